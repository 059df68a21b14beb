"""The grammar and help of ``oamd models pull|list|rm`` (``oamd.cli.models_command`` runs them):
each action's arguments with their defaults; the exit codes their help lists are
``oamd.cli.exits``'. Loads nothing of the store: ``oamd --help`` stays as quick as before."""

from __future__ import annotations

import argparse
import re
import textwrap

from oamd.cli.exits import EPILOG_WIDTH, LIST_EXITS, PULL_EXITS, RM_EXITS

__all__ = ["PROGRESS_STYLES", "add_models_command"]

PROGRESS_STYLES = ("auto", "bar", "json", "none")
SHA256 = re.compile(r"[0-9a-fA-F]{64}")
"""``fullmatch``ed: ``$`` would accept a digest ending in a line break."""

STORE_TEXT = """\
The store is $OAMD_MODELS when set, else $XDG_DATA_HOME/oamd/models (or
~/.local/share/oamd/models) on Linux, ~/Library/Application Support/oamd/models
on macOS, %LOCALAPPDATA%\\oamd\\models on Windows. A pulled model is loaded with
--model llamacpp:NAME; models Ollama pulled load as --model ollama:NAME[:TAG]
and Hugging Face cache files as --model llamacpp:hf:ORG/REPO/FILE.gguf, where
they lie."""

MIRROR_TEXT = """\
$OAMD_CATALOG_BASE_URL names a mirror of the catalog's files (an http(s) URL):
it replaces https://huggingface.co in each catalog URL, the paths below it
unchanged. The catalog's sizes and SHA-256s (or --sha256's) still apply: a
mirror must serve the same files."""


def _paragraph(text: str) -> str:
    return textwrap.fill(text, width=EPILOG_WIDTH)


def _sha256(text: str) -> str:
    if not SHA256.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be 64 hexadecimal digits, not {text!r}")
    return text.lower()


def add_models_command(
    sub: argparse._SubParsersAction, parser_class: type
) -> dict[str, argparse.ArgumentParser]:
    """Adds ``models`` and its actions to the top-level command list ``sub``; returns the
    parsers by command (``models``, ``models pull``…), for usage errors found after parsing."""
    formatter = argparse.RawDescriptionHelpFormatter
    models = sub.add_parser(
        "models",
        help="pull, list and remove GGUF models in the local model store",
        description=_paragraph(
            "Manages the local model store: small instruct GGUF models from the built-in"
            " catalog or any URL, for --model llamacpp:NAME."
        ),
        epilog=f'{STORE_TEXT}\n\n"oamd models <action> --help" explains each action.',
        formatter_class=formatter,
    )
    actions = models.add_subparsers(
        dest="models_action",
        required=True,
        metavar="ACTION",
        title="actions",
        parser_class=parser_class,
    )
    pull = actions.add_parser(
        "pull",
        help="download a catalog model, or a .gguf file by URL, into the store",
        description=_paragraph(
            "Downloads a model into the store: resumable (a partial NAME.gguf.part is"
            " continued), verified (size, GGUF header, SHA-256) and atomic (the model"
            " appears complete or not at all). A second pull of the same model waits for"
            " the first. Progress goes to stderr: a bar on a terminal, else one JSON line"
            ' per step ({"event": "pull_progress", "model", "bytesDownloaded",'
            ' "totalBytes"}).'
        ),
        epilog=f"{STORE_TEXT}\n\n{MIRROR_TEXT}\n\n{PULL_EXITS}",
        formatter_class=formatter,
    )
    pull.add_argument(
        "model",
        metavar="NAME|URL",
        help='a name from "oamd models list", or the http(s) URL of a .gguf file',
    )
    pull.add_argument(
        "--name",
        help="the store name for a URL's file (default: the file name without .gguf, lower-case)",
    )
    pull.add_argument(
        "--sha256",
        type=_sha256,
        metavar="HEX",
        help="the SHA-256 the file must have (default: the catalog's; for a URL, the one it"
        " had when first pulled, recorded then)",
    )
    pull.add_argument(
        "--progress",
        choices=PROGRESS_STYLES,
        default="auto",
        help="how progress shows on stderr: a bar, JSON lines or nothing (default: auto, a bar"
        " on a terminal, else JSON lines)",
    )
    listing = actions.add_parser(
        "list",
        help="list the catalog and the pulled models",
        description=_paragraph(
            "Lists the catalog's models and every model in the store, with size, state"
            " (pulled, pulling, partial, or not pulled) and licence; the store's folder first."
        ),
        epilog=f"{STORE_TEXT}\n\n{MIRROR_TEXT}\n\n{LIST_EXITS}",
        formatter_class=formatter,
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per model on stdout instead of a table (default: a table)",
    )
    remove = actions.add_parser(
        "rm",
        help="delete a pulled model from the store",
        description="Deletes a pulled model (and any partial download of it) from the store.",
        epilog=f"{STORE_TEXT}\n\n{RM_EXITS}",
        formatter_class=formatter,
    )
    remove.add_argument("name", metavar="NAME", help="the model's name in the store")
    return {
        "models": models,
        "models pull": pull,
        "models list": listing,
        "models rm": remove,
    }

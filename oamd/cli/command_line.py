"""The ``oamd`` command line: its grammar, its help and its usage errors (``oamd.cli`` runs it).

Guarantees: ``oamd <command> --help`` explains every option with its default and lists the
command's exit codes; a bad option or value is one ``oamd <command>: error: …`` line after that
command's usage, exit 2, never a traceback; the options the serving commands share (``--model``,
``--log-level``, ``--log-format``) mean the same before the command as after it (after it wins),
and one given before a command that does not take it is refused rather than ignored.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from typing import Any, NoReturn

from oamd.cli.exits import (
    CHECK_EXITS,
    EPILOG_WIDTH,
    REPLAY_EXITS,
    SERVE_EXITS,
    STDIO_EXITS,
    exit_codes,
)
from oamd.cli.models_options import add_models_command
from oamd.cli.options import (
    MODEL_FORMS,
    add_replay_options,
    add_serve_options,
    add_serving_options,
    add_stdio_options,
)
from oamd.log import LEVELS

__all__ = ["CommandLine", "parse_command_line"]

MODEL_VARIABLE = "OAMD_MODEL"
LOG_LEVEL_VARIABLE = "OAMD_LOG_LEVEL"
DEFAULT_LOG_LEVEL = "warning"
LOG_FORMATS = ("json", "console")
SHOWN_LEVELS = ("debug", "info", "warning", "error", "critical")
"""The level names help lists; the aliases in ``LEVELS`` (``warn``, ``fatal``, ``notset``) work too."""
SHARED = {"--model": "model", "--log-level": "log_level", "--log-format": "log_format"}
"""The options several commands share, by flag: each also goes before the command."""
TAKES = {
    "stdio": tuple(SHARED),
    "serve": tuple(SHARED),
    "check": tuple(SHARED),
    "replay": ("--log-level", "--log-format"),
    "version": ("--log-level", "--log-format"),
    "models": (),
    "conformance": (),
}
"""Which shared options each command takes (``conformance`` reads its own command line)."""
BEFORE = "before_"
"""Prefix of the attribute a shared option given before the command is stored under."""

TOP_EPILOG = """\
Options before the command work as after it: "oamd --model llamacpp check" is
"oamd check --model llamacpp" (given in both places, the one after wins).
"oamd <command> --help" explains a command's options and its exit codes."""


def _paragraph(text: str) -> str:
    """A description wrapped as argparse would (the raw formatter that keeps epilogs as written
    keeps descriptions too)."""
    return textwrap.fill(text, width=EPILOG_WIDTH)


def _log_level(text: str) -> str:
    if text.lower() not in LEVELS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(SHOWN_LEVELS)}, not {text!r}")
    return text.lower()


class _Parser(argparse.ArgumentParser):
    """A command's parser. argparse leaves a command's unknown arguments to the top-level parser,
    whose usage does not show the command's options: this one reports them itself. A
    ``verbatim`` one (``conformance``, which has its own command line) hands every argument on
    unread, as ``arguments``."""

    def __init__(self, *args: Any, verbatim: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verbatim = verbatim

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace = argparse.Namespace() if namespace is None else namespace
        if self.verbatim:
            namespace.arguments = list(args or [])
            return namespace, []
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _add_shared(parser: argparse.ArgumentParser, flags: tuple[str, ...], *, before: bool) -> None:
    """The shared options; none has a parser default, so a command's parser, which runs last,
    overwrites only what was given after the command (defaults are applied after parsing)."""
    prefix = BEFORE if before else ""
    model = os.environ.get(MODEL_VARIABLE)
    now = f"now {model!r}" if model else "unset now, so none"
    helps = {
        "--model": f'the backend behind the "system" model (forms below; default: ${MODEL_VARIABLE},'
        f" {now})",
        "--log-level": f"what stderr's log records show: {', '.join(SHOWN_LEVELS)} (default:"
        f" ${LOG_LEVEL_VARIABLE}, else {DEFAULT_LOG_LEVEL})",
        "--log-format": "json (one object per line) or console (plain text) (default: json)",
    }
    kinds: dict[str, dict[str, Any]] = {
        "--model": {"metavar": "SPEC"},
        "--log-level": {"metavar": "LEVEL", "type": _log_level},
        "--log-format": {"choices": LOG_FORMATS},
    }
    for flag in flags:
        parser.add_argument(
            flag,
            dest=prefix + SHARED[flag],
            default=argparse.SUPPRESS,
            help=helps[flag],
            **kinds[flag],
        )


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    formatter = argparse.RawDescriptionHelpFormatter
    top = argparse.ArgumentParser(
        prog="oamd",
        description=_paragraph(
            "oamd serves the open-apple-models bridge protocol (JSON-RPC 2.0, one JSON"
            " object per line) so game engines can use small on-device language models."
        ),
        epilog=f"{TOP_EPILOG}\n\n{MODEL_FORMS}",
        formatter_class=formatter,
    )
    _add_shared(top, tuple(SHARED), before=True)
    sub = top.add_subparsers(
        dest="command", required=True, metavar="COMMAND", title="commands", parser_class=_Parser
    )
    serving = f"{MODEL_FORMS}\n\n"
    commands = {
        "stdio": sub.add_parser(
            "stdio",
            help="serve one engine on stdin/stdout",
            description=_paragraph(
                "Serves the protocol to one engine on stdin/stdout. stdout carries"
                " protocol lines only; logs go to stderr."
            ),
            epilog=serving + STDIO_EXITS,
            formatter_class=formatter,
        ),
        "serve": sub.add_parser(
            "serve",
            help="serve many clients on Unix, abstract and loopback TCP sockets",
            description=_paragraph(
                "Serves the protocol to many clients on local sockets. Once listening it"
                ' writes one JSON line to stderr: {"event": "ready", "endpoints": [...],'
                ' "tokenFile": ...}. SIGTERM or SIGINT drains and stops it.'
            ),
            epilog=serving + SERVE_EXITS,
            formatter_class=formatter,
        ),
        "check": sub.add_parser(
            "check",
            help="print the system model's availability as JSON",
            description=_paragraph(
                "Prints the system model's availability (the model/availability result)"
                " as one JSON object on stdout. An embedded model is loaded to tell, a server asked."
            ),
            epilog=serving + CHECK_EXITS,
            formatter_class=formatter,
        ),
        "replay": sub.add_parser(
            "replay",
            help="play recordings (--record DIR) back with no model and diff the results",
            description=_paragraph(
                "Plays each recorded connection back on a daemon whose system model answers"
                " with the recorded steps, sends the recorded requests and tool replies, and"
                " compares the daemon's lines with the recorded ones, except what is free"
                " by nature (durations, generated ids, how streamed text is cut):"
                " docs/RECORDING.md."
            ),
            epilog=REPLAY_EXITS,
            formatter_class=formatter,
        ),
        "version": sub.add_parser(
            "version",
            help="print the version",
            description='Prints "oamd <version>".',
            epilog=exit_codes((0, "always")),
            formatter_class=formatter,
        ),
    }
    actions = add_models_command(sub, _Parser)
    commands |= {
        "conformance": sub.add_parser(
            "conformance",
            help="play the conformance corpus against an implementation, or diff two"
            ' ("oamd conformance --help")',
            add_help=False,
            verbatim=True,
        ),
    }
    for name, parser in commands.items():
        _add_shared(parser, TAKES[name], before=False)
    for name in ("stdio", "serve"):
        add_serving_options(commands[name])
    add_serve_options(commands["serve"])
    add_replay_options(commands["replay"])
    add_stdio_options(commands["stdio"])
    return top, commands | actions


class CommandLine:
    """The parsed command line: ``args`` with every default applied, and ``refuse`` for a usage
    error found after parsing (it names the command in the usage, as argparse would)."""

    def __init__(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
        self.args = args
        self.command: str = args.command
        self._parser = parser

    def refuse(self, message: str) -> NoReturn:
        """Prints the command's usage and ``message``, exits 2."""
        self._parser.error(message)

    @property
    def model_source(self) -> str:
        """Where the model spec came from, for an error message."""
        return "argument --model" if self.args.model_given else f"${MODEL_VARIABLE}"


def parse_command_line(argv: list[str]) -> CommandLine:
    """Parses ``argv`` (without the program name); a usage error exits 2."""
    top, commands = _parsers()
    args = top.parse_args(argv)
    action = getattr(args, "models_action", None)
    line = CommandLine(args, commands[f"{args.command} {action}" if action else args.command])
    for flag, dest in SHARED.items():
        if not hasattr(args, BEFORE + dest):
            continue
        if flag not in TAKES[args.command]:
            hint = f" (give it to the candidate: --candidate 'oamd stdio {flag} …')"
            top.error(
                f"argument {flag}: not an option of oamd {args.command}"
                + (hint if args.command == "conformance" else "")
            )
        if not hasattr(args, dest):  # not given after the command, where it would win
            setattr(args, dest, getattr(args, BEFORE + dest))
        delattr(args, BEFORE + dest)
    takes = TAKES[args.command]
    args.model_given = hasattr(args, "model")
    if "--model" in takes and not args.model_given:
        args.model = os.environ.get(MODEL_VARIABLE) or None
    if "--log-level" in takes and not hasattr(args, "log_level"):
        level = os.environ.get(LOG_LEVEL_VARIABLE) or DEFAULT_LOG_LEVEL
        try:
            args.log_level = _log_level(level)
        except argparse.ArgumentTypeError as exc:
            line.refuse(f"${LOG_LEVEL_VARIABLE}: {exc}")
    if "--log-format" in takes and not hasattr(args, "log_format"):
        args.log_format = LOG_FORMATS[0]
    if getattr(args, "inspect_token_file", None) and not args.inspect:
        line.refuse("argument --inspect-token-file: only with --inspect")
    return line

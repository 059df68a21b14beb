"""Conformance corpus and runner for the open-apple-models bridge protocol v1.0.

``python -m conformance run|diff|record|list``; ``conformance.cli.main(argv)`` for embedding (the
``oamd conformance`` command). Self-contained: it talks to any implementation over stdio or sockets and
imports nothing from ``oamd``.
"""

from conformance.cli import main

__all__ = ["main"]

"""Conformance corpus and runner for the open-apple-models bridge protocol v1.0.

``python -m oamd.conformance run|diff|record|list``; ``oamd.conformance.main(argv)`` for embedding (the
``oamd conformance`` command). Self-contained: it talks to any implementation over stdio or sockets and
imports nothing from ``oamd``.
"""

from .cli import main

__all__ = ["main"]

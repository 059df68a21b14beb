"""LiteRT-LM (``org.oamd.host.LiteRtBackend``) as a text-only model, through the same JVM seam
and error table as ML Kit.

Owns only what differs from ``oamd.backends.mlkit``: the name, how messages name the model, and
the default watchdog (LiteRT-LM's ``sendMessageAsync`` callback has been seen never to complete,
so the Java side has its own watchdog too). The Java backend maps LiteRT-LM's exceptions onto the
shared codes of ``org.oamd.host.ErrorCodes``. Native tool calling through LiteRT-LM's
``Conversation`` tools is not wired yet, so the envelope loop drives it (``native_tools=False``).
"""

from __future__ import annotations

from oamd.backends.mlkit import MlKitModel

__all__ = ["LITERT_WATCHDOG_SECONDS", "LiteRtModel"]

LITERT_WATCHDOG_SECONDS = 120.0
"""Longest silence between two callbacks of a LiteRT-LM generation (CPU prefill of a long prompt
on a phone is slow); past it the step fails ``generation_failed``."""


class LiteRtModel(MlKitModel):
    """A LiteRT-LM model file run in-process behind an ``OamdBackend`` Java object."""

    name = "litert"
    label = "LiteRT-LM"

    def __init__(self, backend, runtime, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("watchdog_seconds", LITERT_WATCHDOG_SECONDS)
        super().__init__(backend, runtime, **kwargs)

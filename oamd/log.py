"""Logging: structlog to stderr (JSON by default), never to stdout, which carries the protocol.

structlog and its renderers load with the first line logged, not at start: ``oamd stdio`` answers
``initialize`` without them, and at the default level (``warning``) most runs never log. Loggers
are ``get_logger(name)`` proxies that every layer may import; the settings of
``configure_logging`` apply whenever structlog loads, and a logger used before any configuration
still writes to stderr.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["LEVELS", "configure_logging", "debug_enabled", "get_logger"]

LEVELS = {
    "critical": 50,
    "fatal": 50,
    "error": 40,
    "warning": 30,
    "warn": 30,
    "info": 20,
    "debug": 10,
    "notset": 0,
}
"""Level names and their numbers (the standard library's), so none is imported to check them."""

_settings: dict[str, Any] = {"level": LEVELS["warning"], "fmt": "json"}
_structlog: Any = None
"""The structlog module once configured."""


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Sets the level and the format (``json`` or ``console``) of every logger.

    Raises:
        ValueError: an unknown level name.
    """
    numeric = LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level: {level}")
    _settings.update(level=numeric, fmt=fmt)
    if _structlog is not None:
        _apply(_structlog)


def debug_enabled() -> bool:
    """Whether debug records are written: callers skip building one that would be dropped (a
    turn's step records would otherwise cost every turn, and load structlog, at any level)."""
    return _settings["level"] <= LEVELS["debug"]


class _CurrentStderr:
    """``sys.stderr`` as it is when a record is written, not when logging was configured: code that
    swaps ``sys.stderr`` for a while (a test's capture, a host embedding oamd) and closes its file
    afterwards would otherwise leave every later record writing to a closed file."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _apply(structlog: Any) -> None:
    renderer = (
        structlog.processors.JSONRenderer()
        if _settings["fmt"] == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_settings["level"]),
        logger_factory=structlog.WriteLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )


def _loaded() -> Any:
    global _structlog
    if _structlog is None:
        import structlog

        _apply(structlog)
        _structlog = structlog
    return _structlog


class _Logger:
    """Stands for ``structlog.get_logger(name)`` until the first call through it."""

    __slots__ = ("_name", "_real")

    def __init__(self, name: str) -> None:
        self._name = name
        self._real: Any = None

    def __getattr__(self, attribute: str) -> Any:
        if self._real is None:
            self._real = _loaded().get_logger(self._name)
        return getattr(self._real, attribute)


def get_logger(name: str) -> Any:
    """A structlog logger for ``name`` that loads structlog when it first logs."""
    return _Logger(name)

"""The bridge's method sets, by extension, listed without loading them.

As in the reference bridge, the protocol is a core (``initialize``, ``ping``, availability,
validation, shutdown, ``session/*``) and a game extension (``npc/*``, ``world/*``,
``decision/*``, ``content/generate``) that owns its stores (``bridge.game.stores``). Each
namespace names the module whose ``register`` adds its handlers and what that adds
(``tests/test_app.py`` checks the two agree), so ``initialize`` can list every method while only
the core methods are loaded: a namespace's module, with the agent, game and schema code under
it, loads on the first call of one of its methods.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CORE", "EXTENSIONS", "GAME", "TESTING", "Extension", "Namespace"]


@dataclass(frozen=True)
class Namespace:
    """One namespace: its ``name`` (as errors word it), the module under ``oamd.bridge`` that
    registers it, and the methods, notifications and client requests that module adds."""

    name: str
    module: str
    methods: tuple[str, ...]
    notifications: tuple[str, ...] = ()
    client_requests: tuple[str, ...] = ()


@dataclass(frozen=True)
class Extension:
    """A set of namespaces served together; ``initialize`` lists their notifications in order."""

    name: str
    namespaces: tuple[Namespace, ...]


def _verbs(namespace: str, *verbs: str) -> tuple[str, ...]:
    return tuple(f"{namespace}/{verb}" for verb in verbs)


CORE = Extension(
    "core",
    (
        Namespace("validate", "validate", ("schema/validate", "tools/validate")),
        Namespace(
            "session",
            "session.methods",
            _verbs(
                "session",
                "create",
                "respond",
                "cancel",
                "delete",
                "list",
                "transcript",
                "reset",
                "setInstructions",
                "setContextNote",
                "setTools",
                "compact",
            ),
            ("session/event", "tool/cancel"),
            ("tool/call",),
        ),
    ),
)
"""Beside ``bridge.core`` (loaded at start): what every client of the protocol has."""

GAME = Extension(
    "game",
    (
        Namespace(
            "npc",
            "game.npc.methods",
            _verbs(
                "npc",
                "create",
                "talk",
                "bark",
                "state",
                "restore",
                "update",
                "reset",
                "cancel",
                "delete",
                "list",
            ),
            ("npc/event",),
        ),
        Namespace(
            "world",
            "game.world.methods",
            _verbs(
                "world",
                "create",
                "get",
                "set",
                "merge",
                "remove",
                "snapshot",
                "delete",
                "list",
                "subscribe",
                "unsubscribe",
            ),
            ("world/changed",),
        ),
        Namespace("decision", "game.decision.methods", _verbs("decision", "decide", "decideMany")),
        Namespace("content", "game.content.methods", ("content/generate",)),
    ),
)
"""NPCs, worlds, decisions and content: the game-facing part of the protocol."""

TESTING = Extension(
    "testing", (Namespace("testing", "testing", ("test/sleep", "test/modelRequests")),)
)
"""Only with ``DaemonConfig.test_methods`` (the end-to-end suite; never in production)."""

EXTENSIONS = (CORE, GAME)

"""World state (§6): JSON blackboards shared by the game and its NPCs, their store, and the NPC
world tools.

``WorldState`` owns one document and its ``version``; every operation is atomic (a failing one
changes nothing and does not count) and returns the changed leaves, which it hands to its
``observer`` (the ``WorldStore`` that holds it, ``game.world.store``). Documents are never
mutated in place, so ``snapshot()`` is cheap and stays valid; callers must not mutate what they
get either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.session import utc_now
from oamd.agent.tools import ToolOutput
from oamd.errors import LimitReached, WorldError
from oamd.game.world import tools
from oamd.game.world.paths import (
    ABSENT,
    MAX_DEPTH,
    PathError,
    Segments,
    depth_of,
    merge_growth,
    merging,
    parse_path,
    remove_growth,
    removing,
    render,
    same,
    set_growth,
    setting,
    value_at,
)
from oamd.jsonvalue import dumps
from oamd.limits import MAX_WORLD_BYTES
from oamd.log import get_logger

__all__ = [
    "READ_LIMIT_CHARS",
    "Change",
    "WorldState",
    "read_tool_description",
    "read_world_tool",
    "write_tool_description",
    "write_world_state",
]

log = get_logger("oamd.game")

READ_LIMIT_CHARS = 1500
"""Longest JSON ``read_world_state`` returns before shortening the value (at least 100)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One changed leaf: its canonical path, the value before and after. ``created``: there was no
    value before (``old`` is ``None``); ``removed``: there is none after (``new`` is ``None``)."""

    path: str
    old: Any
    new: Any
    created: bool = False
    removed: bool = False
    segments: Segments = field(default=(), compare=False, repr=False)
    """``path`` as keys (a key may itself contain a dot when a merge patch wrote it)."""

    def __post_init__(self) -> None:
        if not self.segments and self.path:
            object.__setattr__(self, "segments", tuple(self.path.split(".")))

    @classmethod
    def of(cls, path: Segments, old: Any, new: Any) -> Change:
        return cls(
            render(path),
            None if old is ABSENT else old,
            None if new is ABSENT else new,
            created=old is ABSENT,
            removed=new is ABSENT,
            segments=path,
        )


class WorldState:
    """A JSON object addressed by dot paths (``"player.gold"``, ``"party.0.name"``, ``""``).

    ``id`` names the world in errors. ``observer`` (set by the store) receives each committed
    operation's changes; an observer that raises is logged, never the caller's problem. ``room``
    (set by the store) is asked before a change that grows the document, with the growth: it
    raises ``LimitReached`` to refuse it (the connection's byte budget), and nothing changes.
    """

    def __init__(self, root: dict[str, Any] | None = None, *, id: str = "") -> None:
        """Takes ``root`` over (it is not copied).

        Raises:
            WorldError: ``root`` is not an object, or is nested deeper than a world allows.
        """
        self.id = id
        if root is None:
            root = {}
        if not isinstance(root, dict):
            raise self._error("The world state root must be a JSON object.", "")
        self._check_depth((), root)
        self._root: dict[str, Any] = root
        self._bytes = len(dumps(root))
        if self._bytes > MAX_WORLD_BYTES:
            raise _too_big(self._bytes)
        self._version = 0
        self.created_at = utc_now()
        self.observer: Callable[[list[Change]], None] | None = None
        self.room: Callable[[int], None] | None = None

    @property
    def version(self) -> int:
        """Counts committed changes; an operation that changes nothing does not count."""
        return self._version

    @property
    def bytes(self) -> int:
        """The size of the document as compact JSON, kept exact change by change."""
        return self._bytes

    def _error(self, message: str, path: str) -> WorldError:
        return WorldError(message, world=self.id, path=path)

    def _parse(self, path: str) -> Segments:
        try:
            return parse_path(path)
        except PathError as exc:
            raise self._error(exc.message, exc.path) from None

    def check_path(self, path: str) -> str:
        """The canonical form of ``path``.

        Raises:
            WorldError: a malformed path (``player..gold``).
        """
        return render(self._parse(path))

    # ---- reading ---------------------------------------------------------------------------

    def lookup(self, path: str = "") -> tuple[bool, Any]:
        """``(exists, value)`` at ``path`` (exact keys); ``value`` is ``None`` when absent.

        Raises:
            WorldError: a malformed path.
        """
        value = value_at(self._root, self._parse(path))
        return (False, None) if value is ABSENT else (True, value)

    def get(self, path: str = "", default: Any = None) -> Any:
        """The value at ``path``, or ``default`` when there is none (or the path is malformed)."""
        try:
            exists, value = self.lookup(path)
        except WorldError:
            return default
        return value if exists else default

    def snapshot(self) -> dict[str, Any]:
        """The whole document, keys in insertion order. Shared and never mutated: do not mutate."""
        return self._root

    def summary(self, paths: list[str], max_lines: int = 30) -> str:
        """``path: value`` lines for the values at ``paths`` (objects flattened to leaves, strings
        unquoted, values clipped at 200 characters; missing paths skipped)."""
        lines: list[str] = []
        for raw in paths:
            try:
                segments = parse_path(raw)
            except PathError:
                continue
            value = value_at(self._root, segments)
            if value is not ABSENT:
                _flatten(value, render(segments), lines, 0)
        if len(lines) > max_lines:
            lines = [*lines[:max_lines], f"({len(lines) - max_lines} more not shown)"]
        return "\n".join(lines)

    # ---- writing ---------------------------------------------------------------------------

    def set(self, path: str, value: Any) -> list[Change]:
        """Writes ``value`` (``None`` is JSON ``null``, a value) at ``path``, creating missing
        objects on the way; index ``n`` of an ``n``-element list appends.

        Raises:
            WorldError: malformed path, a bad list index, a scalar in the way, a non-object root,
                or nesting deeper than the world allows.
        """
        return self._set(self._parse(path), value)

    def _set(self, segments: Segments, value: Any) -> list[Change]:
        old = value_at(self._root, segments)
        if old is not ABSENT and same(old, value):
            return []
        self._check_depth(segments, value)
        root = self._replaced(segments, value)
        growth = set_growth(self._root, segments, value) if segments else self._resized(value)
        return self._commit(root, [Change.of(segments, old, value)], growth)

    def merge(self, patch: Any, path: str = "") -> list[Change]:
        """Applies an RFC 7386 merge patch at ``path`` (objects merge, ``null`` deletes); returns
        one change per changed leaf, in patch order.

        Raises:
            WorldError: as for ``set``.
        """
        segments = self._parse(path)
        self._check_depth(segments, patch)
        leaves: list[tuple[Segments, Any, Any]] = []
        target = value_at(self._root, segments)
        merged = merging(patch, target, segments, leaves)
        if not leaves:
            return []
        root = self._replaced(segments, merged, shown=path)
        if target is ABSENT:  # written like a set: objects on the way are created
            growth = set_growth(self._root, segments, merged)
        else:
            growth = merge_growth(patch, target, merged)
        return self._commit(root, [Change.of(*leaf) for leaf in leaves], growth)

    def remove(self, path: str) -> list[Change]:
        """Removes the value at ``path`` (list elements after it shift); removing ``""`` empties the
        world. A missing value is no error: nothing changes.

        Raises:
            WorldError: a malformed path.
        """
        segments = self._parse(path)
        if not segments:
            if not self._root:
                return []
            return self._commit({}, [Change.of((), self._root, {})], self._resized({}))
        root, removed = removing(segments, self._root)
        if removed is ABSENT:
            return []
        growth = remove_growth(self._root, segments, removed)
        return self._commit(root, [Change.of(segments, removed, ABSENT)], growth)

    def _check_depth(self, segments: Segments, value: Any) -> None:
        if len(segments) + depth_of(value, MAX_DEPTH) > MAX_DEPTH:
            raise self._error(
                f"The value at '{render(segments)}' is nested too deeply "
                f"(a world allows {MAX_DEPTH} levels).",
                render(segments),
            )

    def _replaced(self, segments: Segments, value: Any, shown: str = "") -> dict[str, Any]:
        try:
            root = setting(value, segments, self._root, segments)
        except PathError as exc:
            raise self._error(exc.message, exc.path) from None
        if not isinstance(root, dict):
            raise self._error("The world state root must be a JSON object.", shown)
        return root

    def _resized(self, root: Any) -> int:
        """The growth of replacing the whole document by ``root``."""
        return len(dumps(root)) - self._bytes

    def _commit(self, root: dict[str, Any], changes: list[Change], growth: int) -> list[Change]:
        size = self._bytes + growth
        if growth > 0:  # a refusal changes nothing: the new root is discarded
            if size > MAX_WORLD_BYTES:
                raise _too_big(size)
            if self.room is not None:
                self.room(growth)
        self._root = root
        self._bytes = size
        self._version += 1
        if self.observer is not None:
            try:
                self.observer(changes)
            except Exception:
                log.exception("world_observer_failed", world=self.id)
        return changes


def _too_big(size: int) -> LimitReached:
    return LimitReached(
        "bytes",
        MAX_WORLD_BYTES,
        f"The world would hold about {size} bytes of JSON; a world holds at most "
        f"{MAX_WORLD_BYTES}. Remove something first, or keep bulk data in the game.",
    )


def _flatten(value: Any, path: str, lines: list[str], depth: int) -> None:
    if isinstance(value, dict) and value and depth < 4:
        for key, child in value.items():
            _flatten(child, f"{path}.{key}" if path else key, lines, depth + 1)
        return
    text = value if isinstance(value, str) else tools.compact(value)
    if len(text) > 200:
        text = text[:197] + "..."
    lines.append(f"{path or 'state'}: {text}")


# ---- NPC world tools -------------------------------------------------------------------------


def read_world_tool(
    state: WorldState, path: Any, readable: list[str], *, limit: int = READ_LIMIT_CHARS
) -> ToolOutput:
    """``read_world_state(path)``: the JSON at ``path`` if it lies within a ``readable`` prefix
    (``""`` = everything); reading above readable prefixes shows only the readable parts. Keys
    match case-insensitively; values longer than ``limit`` are shortened. Mistakes are error
    outputs naming valid keys or paths."""
    return tools.read_for_model(state.snapshot(), path, tools.parse_prefixes(readable), limit)


def write_world_state(state: WorldState, path: Any, value: Any, writable: list[str]) -> ToolOutput:
    """``update_world_state(path, value)`` on a world held directly (it may have been deleted
    from its store): writes within a ``writable`` prefix, fitting ``value`` to the type already
    stored. Returns ``Set player.gold to 45 (was 60).`` or an error output."""
    planned = tools.plan_write(state.snapshot(), path, value, tools.parse_prefixes(writable))
    if isinstance(planned, ToolOutput):
        return planned
    try:
        state._set(planned.path, planned.value)
    except (WorldError, LimitReached) as exc:  # the model reads why and carries on
        return ToolOutput.error(exc.message)
    return tools.write_done(planned)


def read_tool_description(state: WorldState, readable: list[str]) -> str:
    """The read tool's description: top-level keys (when everything is readable) or the paths."""
    return tools.read_tool_description(state.snapshot(), tools.parse_prefixes(readable))


def write_tool_description(writable: list[str]) -> str:
    """The write tool's description, listing what may change."""
    return tools.write_tool_description(tools.parse_prefixes(writable))

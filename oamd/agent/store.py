"""ObjectStore: the sessions, NPCs or worlds of one connection, in creation order, by id.

Generated ids are ``<prefix><n>`` from a counter that skips ids in use and advances even when the
creation fails later (as the reference does). Each kind brings its own errors for a missing id,
a taken id and a full store; clearing the store cancels every queued object's work.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from oamd.agent.queue import TurnQueue
from oamd.errors import OamdError

__all__ = ["ObjectStore"]


class _Identified(Protocol):
    id: str


T = TypeVar("T", bound=_Identified)


class ObjectStore(Generic[T]):
    def __init__(
        self,
        prefix: str,
        limit: int,
        *,
        not_found: Callable[[str], OamdError],
        exists: Callable[[str], OamdError],
        full: Callable[[int], OamdError],
    ) -> None:
        self._objects: dict[str, T] = {}
        self._ids = itertools.count(1)
        self._prefix = prefix
        self.limit = limit
        self._not_found = not_found
        self._exists = exists
        self._full = full

    def new_id(self) -> str:
        """The next free generated id."""
        while True:
            candidate = f"{self._prefix}{next(self._ids)}"
            if candidate not in self._objects:
                return candidate

    def check_new(self, object_id: str) -> None:
        if object_id in self._objects:
            raise self._exists(object_id)

    def check_room(self) -> None:
        """Raises the store's ``full`` error when ``limit`` objects are alive."""
        if len(self._objects) >= self.limit:
            raise self._full(self.limit)

    def add(self, obj: T) -> T:
        self.check_new(obj.id)
        self.check_room()
        self._objects[obj.id] = obj
        return obj

    def get(self, object_id: Any) -> T:
        obj = self._objects.get(object_id) if isinstance(object_id, str) else None
        if obj is None:
            raise self._not_found(str(object_id))
        return obj

    def remove(self, object_id: str) -> T:
        obj = self.get(object_id)
        del self._objects[object_id]
        return obj

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._objects.values()))

    def __len__(self) -> int:
        return len(self._objects)

    def clear(self) -> int:
        """Releases every object (``_release``) and forgets them all; returns how many operations
        that cancelled."""
        cancelled = sum(self._release(obj) for obj in self._objects.values())
        self._objects.clear()
        return cancelled

    def _release(self, obj: T) -> int:
        """Ends ``obj`` as the store forgets it: an object with a queue has its queued and running
        work cancelled (returns how many operations)."""
        queue: TurnQueue | None = getattr(obj, "queue", None)
        return 0 if queue is None else queue.cancel_all()

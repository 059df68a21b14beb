"""The notifications as pydantic models: what a typed handler receives (``bridge.on``,
``Session.on_event``, ``Npc.on_event``, ``World.subscribe``).

``session/event`` and ``npc/event`` carry one event each, read by its ``type`` into one of the
event models below; ``world/changed`` is a ``WorldChange``, ``tool/cancel`` a ``ToolCancel``.
Each model mirrors its schema in ``protocol/bridge.json`` (``tests/test_client_results.py``
compares them). A notification that does not validate (an event type this client does not know)
raises in the typed handler, which the client logs: it costs that one message.

``typed_handler`` wraps a handler of models into a handler of ``params`` for
``Client.on_notification``, keeping it plain or ``async`` as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field, WithJsonSchema

from oamd.client._notifications import NotificationHandler, is_coroutine_function
from oamd.client._results import Emotion, Step, ToolCall, ToolCallRecord, WireModel

__all__ = [
    "EmotionEvent",
    "LineDeltaEvent",
    "LineResetEvent",
    "ModelStepEvent",
    "NpcEvent",
    "NpcEventNotification",
    "PartialEvent",
    "SessionEvent",
    "SessionEventNotification",
    "TextEvent",
    "ToolCallCompletedEvent",
    "ToolCallStartedEvent",
    "ToolCancel",
    "WorldChange",
    "typed_handler",
]

Id = Annotated[
    str | int | float, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}]})
]
"""A JSON-RPC id (``$defs/Id``): a string or a number, kept as sent."""

RequestId = Annotated[
    str | int | float | None,
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]}),
]
"""The id of the request that caused a notification; ``None`` for one sent as a notification."""


# ---- events of a turn --------------------------------------------------------------------------


class ModelStepEvent(WireModel):
    """A model step begins (``session/event``)."""

    type: Literal["modelStep"]
    step: Step


class TextEvent(WireModel):
    """More of the answer: ``delta`` is new, ``text`` the whole so far; ``is_reset`` says what
    came before was replaced by ``text``."""

    type: Literal["text"]
    delta: str
    text: str
    is_reset: bool


class PartialEvent(WireModel):
    """A partial structured value of a schema turn."""

    type: Literal["partial"]
    value: Any


class ToolCallStartedEvent(WireModel):
    """The model called a tool (``execution``: ``client`` for a ``tool/call``, ``local`` for the
    daemon's own, an NPC's memory and world tools)."""

    type: Literal["toolCallStarted"]
    call: ToolCall
    execution: Literal["client", "local"]


class ToolCallCompletedEvent(WireModel):
    """A tool call finished, with what the model reads back."""

    type: Literal["toolCallCompleted"]
    record: ToolCallRecord


class EmotionEvent(WireModel):
    """The NPC's emotion for the line being written (``npc/event``)."""

    type: Literal["emotion"]
    emotion: Emotion


class LineDeltaEvent(WireModel):
    """More of the NPC's line."""

    type: Literal["lineDelta"]
    delta: str


class LineResetEvent(WireModel):
    """The NPC's line so far was replaced by ``line`` (a retried or fallback line)."""

    type: Literal["lineReset"]
    line: str


SessionEvent = Annotated[
    ModelStepEvent | TextEvent | PartialEvent | ToolCallStartedEvent | ToolCallCompletedEvent,
    Field(discriminator="type"),
]
"""An event of a session's turn (``$defs/SessionEvent``), by its ``type``."""

NpcEvent = Annotated[
    EmotionEvent | LineDeltaEvent | LineResetEvent | ToolCallStartedEvent | ToolCallCompletedEvent,
    Field(discriminator="type"),
]
"""An event of an NPC's exchange (``$defs/NpcEvent``), by its ``type``."""


# ---- notifications -----------------------------------------------------------------------------


class SessionEventNotification(WireModel):
    """``session/event``: one event of a streamed turn of ``session``."""

    session: str
    request_id: RequestId
    event: SessionEvent


class NpcEventNotification(WireModel):
    """``npc/event``: one event of a streamed exchange of ``npc``."""

    npc: str
    request_id: RequestId
    event: NpcEvent


class WorldChange(WireModel):
    """``world/changed``: the value at ``path`` changed, under a subscription's path.

    ``old_value`` is absent when the value was created, ``new_value`` when it was removed (both
    read ``None`` then; JSON null is a value too, so ``created`` and ``removed`` tell them apart).
    """

    world: str
    subscription: str
    path: str
    old_value: Any = None
    new_value: Any = None

    @property
    def created(self) -> bool:
        return "old_value" not in self.model_fields_set

    @property
    def removed(self) -> bool:
        return "new_value" not in self.model_fields_set


class ToolCancel(WireModel):
    """``tool/cancel``: the daemon no longer needs the output of ``tool/call`` ``id`` (the client
    has already cancelled its running handler). ``session`` or ``npc`` says whose turn it was;
    ``index`` which decision of a ``decision/decideMany``."""

    session: str | None = None
    npc: str | None = None
    index: int | None = None
    request_id: RequestId
    id: Id
    call_id: str
    """The model's id of the call (``ToolCall.id``)."""
    reason: str


M = TypeVar("M", bound=BaseModel)


def typed_handler(
    handler: Callable[[M], Any], model: type[M], accept: Callable[[M], bool] | None = None
) -> NotificationHandler:
    """A handler of ``params`` that validates them as ``model`` and calls ``handler`` with the
    model when ``accept`` (if given) takes it; ``async`` when ``handler`` is."""
    if is_coroutine_function(handler):

        async def typed_async(params: dict[str, Any]) -> None:
            note = model.model_validate(params)
            if accept is None or accept(note):
                await handler(note)

        return typed_async

    def typed(params: dict[str, Any]) -> Any:
        note = model.model_validate(params)
        if accept is None or accept(note):
            return handler(note)
        return None

    return typed

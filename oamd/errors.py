"""Errors every layer raises, by name; numbers live only in ``oamd.rpc.errors``.

Each error carries a stable snake_case ``name`` (the wire's ``data.code``), a message that names the
offending parameter, and optional ``data`` members (``session``, ``limit``, ``path``…). Layers below
``rpc`` never build an error dict: they raise one of these and the single boundary in
``oamd.rpc.errors`` turns it into the wire ``error`` member.

    OamdError
    ├── InvalidMessage         (-32600) not a JSON-RPC 2.0 message
    ├── MethodNotFound         (-32601)
    ├── InvalidParams          (-32602) names the parameter: 'options.toolChoice'
    ├── InvalidSchema          (-32007) a schema or tool definition cannot be used
    ├── ModelError             (-32001…-32012) what a model or agent reports
    ├── Cancelled              (-32009) the request was cancelled before its commit point
    ├── SessionNotFound / SessionExists / SessionLimit
    ├── ShutDown               (-32023)
    └── game errors            (-32050…-32056)
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "MODEL_ERROR_NAMES",
    "Cancelled",
    "InternalError",
    "InvalidMessage",
    "InvalidParams",
    "InvalidRequest",
    "InvalidSchema",
    "LimitReached",
    "MethodNotFound",
    "ModelError",
    "NpcExists",
    "NpcNotFound",
    "OamdError",
    "SessionExists",
    "SessionLimit",
    "SessionNotFound",
    "ShutDown",
    "SubscriptionNotFound",
    "WorldError",
    "WorldExists",
    "WorldNotFound",
]


class OamdError(Exception):
    """Base of every error that reaches the wire with its own ``data.code``."""

    name: str = "internal_error"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = {k: v for k, v in data.items() if v is not None}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, {self.data!r})"


class InternalError(OamdError):
    """A bug: raised where an invariant broke. The boundary logs it with its traceback."""

    name = "internal_error"


class InvalidMessage(OamdError):
    """The line is JSON but not a JSON-RPC 2.0 message we accept (bad id, batch, no method)."""

    name = "invalid_message"
    echo_id: object = None
    """The request id to answer with, when the id itself was valid."""


class MethodNotFound(OamdError):
    """No handler is registered for ``data.method``."""

    name = "method_not_found"

    def __init__(self, method: str) -> None:
        super().__init__(f"Unknown method '{method}'.", method=method)


class InvalidParams(OamdError):
    """A parameter is missing or mistyped; the message names it (``'options.toolChoice'``)."""

    name = "invalid_params"


class InvalidSchema(OamdError):
    """A JSON Schema or tool definition cannot be used; ``data.path``/``data.schemaPath``."""

    name = "invalid_schema"


class InvalidRequest(OamdError):
    """The agent rejected the input (unsupported transcript content, a tool the NPC lacks)."""

    name = "invalid_request"


MODEL_ERROR_NAMES = frozenset(
    {
        "model_unavailable",
        "guardrail_violation",
        "refusal",
        "context_size_exceeded",
        "rate_limited",
        "unsupported_language",
        "invalid_schema",
        "tool_failed",
        "cancelled",
        "busy",
        "invalid_request",
        "generation_failed",
    }
)
"""``data.code`` values a model or agent may fail a turn with (scripted ``error`` steps use them)."""


class ModelError(OamdError):
    """A model or agent failure with one of ``MODEL_ERROR_NAMES`` as its name.

    ``retry_after`` (seconds) travels as ``data.retryAfterSeconds`` and ``data.retryAfter`` (ISO 8601).
    Whatever a backend passes, it is kept within 0 … ``MAX_RETRY_AFTER_SECONDS`` (infinity is the
    most, NaN none): an error built from a server's ``Retry-After: inf`` must still encode.
    """

    def __init__(
        self, name: str, message: str | None = None, *, retry_after: float | None = None
    ) -> None:
        if name not in MODEL_ERROR_NAMES:
            raise ValueError(f"not a model error name: {name}")
        self.name = name
        if retry_after is not None:
            retry_after = (
                None
                if math.isnan(retry_after)
                else min(max(retry_after, 0.0), MAX_RETRY_AFTER_SECONDS)
            )
        data: dict[str, Any] = {}
        if retry_after is not None:
            data["retryAfterSeconds"] = retry_after
            data["retryAfter"] = _iso_duration(retry_after)
        super().__init__(message or _DEFAULT_MODEL_MESSAGES[name], **data)
        self.retry_after = retry_after


_DEFAULT_MODEL_MESSAGES = {
    "model_unavailable": "The model is unavailable.",
    "guardrail_violation": "The input or output tripped the safety guardrails.",
    "refusal": "The model refused to answer.",
    "context_size_exceeded": "The conversation is too long for the model's context.",
    "rate_limited": "The model is rate limited.",
    "unsupported_language": "The prompt's language is not supported.",
    "invalid_schema": "The schema cannot be used.",
    "tool_failed": "A local tool failed.",
    "cancelled": "The request was cancelled.",
    "busy": "The model session was busy.",
    "invalid_request": "The model rejected the input.",
    "generation_failed": "The model failed to generate a response.",
}


MAX_RETRY_AFTER_SECONDS = 86_400.0
"""The longest wait a model error asks for: a day, the protocol's longest timeout."""


def _iso_duration(seconds: float) -> str:
    whole = int(seconds)
    frac = seconds - whole
    return f"PT{whole}S" if frac == 0 else f"PT{seconds:.3f}S"


class Cancelled(OamdError):
    """The request was cancelled before its commit point; it left no trace."""

    name = "cancelled"

    def __init__(self, message: str = "The request was cancelled.") -> None:
        super().__init__(message)


class SessionNotFound(OamdError):
    name = "session_not_found"

    def __init__(self, session: str) -> None:
        super().__init__(f"No session with id '{session}'.", session=session)


class SessionExists(OamdError):
    name = "session_exists"

    def __init__(self, session: str) -> None:
        super().__init__(f"A session with id '{session}' already exists.", session=session)


class SessionLimit(OamdError):
    name = "session_limit"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The session limit ({limit}) is reached; delete a session first.", limit=limit
        )


class ShutDown(OamdError):
    """Raised by every entry point once the connection or daemon has shut down."""

    name = "shut_down"

    def __init__(self) -> None:
        super().__init__("The bridge has shut down.")


class NpcNotFound(OamdError):
    name = "npc_not_found"

    def __init__(self, npc: str) -> None:
        super().__init__(f"No NPC with id '{npc}'.", npc=npc)


class NpcExists(OamdError):
    name = "npc_exists"

    def __init__(self, npc: str) -> None:
        super().__init__(f"An NPC with id '{npc}' already exists.", npc=npc)


class WorldNotFound(OamdError):
    name = "world_not_found"

    def __init__(self, world: str) -> None:
        super().__init__(f"No world with id '{world}'.", world=world)


class WorldExists(OamdError):
    name = "world_exists"

    def __init__(self, world: str) -> None:
        super().__init__(f"A world with id '{world}' already exists.", world=world)


class WorldError(OamdError):
    """A world path or value was rejected; ``data.world``, ``data.path``."""

    name = "world_error"

    def __init__(self, message: str, *, world: str, path: str) -> None:
        super().__init__(message, world=world, path=path)


class LimitReached(OamdError):
    name = "limit_reached"

    def __init__(self, what: str, limit: int, message: str | None = None) -> None:
        super().__init__(
            message or f"The limit of {limit} {what} is reached; delete some first.", limit=limit
        )


class SubscriptionNotFound(OamdError):
    name = "subscription_not_found"

    def __init__(self, subscription: str) -> None:
        super().__init__(
            f"No world subscription with id '{subscription}'.", subscription=subscription
        )

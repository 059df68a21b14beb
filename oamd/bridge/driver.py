"""TurnDriver: bridges one running turn to the client.

Maps the agent's events to ``session/event`` (or ``npc/event``…) notifications when the request
streams, and each client tool call to a ``tool/call`` request whose reply bypasses every queue.
A call that times out gives the model an error output, and a ``tool/cancel`` goes out right after
its ``toolCallCompleted`` event; a call abandoned because the turn ended gets ``tool/cancel`` too,
before the turn's own response. A streaming turn is paced by the client: it waits while more
than the outbox's high-water mark waits to be written (``pace``).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from oamd.agent.events import ToolCall, TurnEvent
from oamd.agent.tools import ToolDefinition, ToolOutput
from oamd.bridge.encode import encode_call, encode_event
from oamd.jsonvalue import dumps_text
from oamd.rpc import Request

__all__ = ["TurnDriver", "format_duration"]

TURN_ENDED_REASON = "The turn ended before the tool finished."


def tool_output(result: Any, error: Any) -> ToolOutput:
    """Every reply form of ``tool/call`` (§7): ``{"output"}``, ``isError``, a JSON-RPC error,
    or a lenient result without ``output`` (the whole result is the output)."""
    if error is not None:
        message = error.get("message") if isinstance(error, dict) else None
        return ToolOutput.error(message if isinstance(message, str) else "Unknown error")
    if isinstance(result, dict) and "output" in result:
        output = result["output"]
        if result.get("isError") is True:
            return ToolOutput.error(output if isinstance(output, str) else dumps_text(output))
        return ToolOutput.text(output) if isinstance(output, str) else ToolOutput.json(output)
    if isinstance(result, str):
        return ToolOutput.text(result)
    return ToolOutput.json(result)


def format_duration(seconds: float) -> str:
    """``120s``, ``200ms``, ``1s 500ms`` — as the reference words tool timeouts."""
    total_ms = round(seconds * 1000)
    whole, ms = divmod(total_ms, 1000)
    parts = ([f"{whole}s"] if whole else []) + ([f"{ms}ms"] if ms else [])
    return " ".join(parts) or "0s"


class TurnDriver:
    def __init__(
        self,
        req: Request,
        context: dict[str, Any],
        *,
        stream: bool,
        event_method: str = "session/event",
        default_timeout: float,
        cancel_reason: str | None = None,
    ) -> None:
        self._cancel_reason = cancel_reason
        """Fixed ``tool/cancel`` reason (decisions); by default the model's error text."""
        self._req = req
        self._context = context
        self._request_id = req.id
        self._stream = stream
        self._event_method = event_method
        self._default_timeout = default_timeout

    @property
    def pace(self) -> Callable[[], Awaitable[None]] | None:
        """What a streaming turn awaits after each text event (``run_turn``'s ``pace``): room in
        the connection's outbox, so a peer that reads slowly slows the turn instead of letting
        its events pile up. ``None`` when the request does not stream."""
        return self._req.wait_writable if self._stream else None

    def emit(self, event: TurnEvent) -> None:
        if self._stream:
            self.send_event(encode_event(event))

    def send_event(self, payload: dict[str, Any]) -> None:
        """Sends one event notification (when the request streams)."""
        if self._stream:
            self._req.notify(
                self._event_method,
                {**self._context, "requestId": self._request_id, "event": payload},
            )

    def _cancel_params(self, call_id: str, call: ToolCall, reason: str) -> dict[str, Any]:
        return {
            **self._context,
            "requestId": self._request_id,
            "id": call_id,
            "callId": call.id,
            "reason": reason,
        }

    async def execute(
        self, call: ToolCall, tool: ToolDefinition
    ) -> tuple[ToolOutput, Callable[[], None] | None]:
        timeout = self._default_timeout if tool.timeout is None else tool.timeout
        pending = self._req.call(
            "tool/call", {**self._context, "requestId": self._request_id, "call": encode_call(call)}
        )
        try:
            with anyio.move_on_after(timeout if timeout > 0 else math.inf):
                reply = await pending.wait()
                return tool_output(reply.result, reply.error), None
        except BaseException:
            if pending.reply is None:
                pending.abandon()
                self._req.notify(
                    "tool/cancel",
                    self._cancel_params(pending.id, call, self._cancel_reason or TURN_ENDED_REASON),
                )
            raise
        pending.abandon()
        output = ToolOutput.error(f"Tool '{call.name}' timed out after {format_duration(timeout)}.")

        def send_cancel() -> None:
            self._req.notify(
                "tool/cancel",
                self._cancel_params(pending.id, call, self._cancel_reason or output.model_text),
            )

        return output, send_cancel

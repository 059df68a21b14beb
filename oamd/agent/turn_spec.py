"""The vocabulary of a turn: what one turn is given, its settings, its retries and its call ids.

It is the bottom floor of the turn: both tool loops (``oamd.agent.native``, ``oamd.agent.envelope``)
build on it and the dispatcher (``oamd.agent.run_turn``) sits above them, so nothing here imports a
loop. ``TurnSettings`` holds the defaults of every per-turn knob once; ``RetryPolicy`` is the one
rule both loops retry model failures by; a ``TurnSpec`` is every turn's, in a session or not (NPC
lines and barks, decisions, content, summaries), each naming only what differs from the defaults.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol, TypeVar

from oamd.agent.events import ToolCall, ToolRecord
from oamd.agent.history import History
from oamd.agent.policy import ToolPolicy
from oamd.agent.schema import CompiledSchema
from oamd.agent.tools import ToolChoice, ToolDefinition, ToolOutput
from oamd.backends.base import LanguageModel, Sampling
from oamd.errors import InvalidRequest, ModelError, OamdError

__all__ = [
    "DEFAULT_TURN_SETTINGS",
    "MAX_RETRY_AFTER_SECONDS",
    "NO_TOOLS",
    "RETRIED_ERRORS",
    "RETRY_FIRST_WAIT_SECONDS",
    "Labels",
    "NoToolExecutor",
    "RetryPolicy",
    "ToolExecutor",
    "TurnSettings",
    "TurnSpec",
    "new_call_id",
]

RETRIED_ERRORS = frozenset({"generation_failed", "busy", "rate_limited"})
"""Model failures a retry may cure (``guardrail_violation`` too, when a turn asks for it)."""

RETRY_FIRST_WAIT_SECONDS = 0.3
"""The wait before the first retry; it doubles for each retry after it."""

MAX_RETRY_AFTER_SECONDS = 5.0
"""A failure asking for a longer wait than this (``busy`` or ``rate_limited`` with its
``retry_after``) is not retried: it fails the turn at once, ``retryAfter`` telling the client
when to ask again, rather than hold the turn, and every operation queued behind it, that long."""

_ID_ALPHABET = string.ascii_letters + string.digits
_ID_TABLE = bytes(ord(_ID_ALPHABET[b % len(_ID_ALPHABET)]) for b in range(256))
"""Random bytes → id characters in one ``translate`` (24 ``secrets.choice`` calls cost a turn
3 % of its time)."""

_T = TypeVar("_T")


def new_call_id() -> str:
    """``call_`` + 24 letters and digits, as Apple's ids look."""
    return "call_" + secrets.token_bytes(24).translate(_ID_TABLE).decode("ascii")


class ToolExecutor(Protocol):
    """Runs one client tool call (``tool/call`` through the connection). Returns the output and
    an optional follow-up to run right after the call's ``toolCallCompleted`` event."""

    async def __call__(
        self, call: ToolCall, tool: ToolDefinition
    ) -> tuple[ToolOutput, Callable[[], None] | None]: ...


class NoToolExecutor:
    """The executor of a turn that offers no tools (a summary, a bark, a regenerated reply).

    Its policy offers none, so no call reaches it; one that did would be a loop's bug, and it
    fails the turn with ``error(reason)`` rather than run anything. Each caller keeps the error
    it has always named (``InvalidRequest`` unless it says otherwise)."""

    __slots__ = ("_error", "_reason")

    def __init__(self, reason: str, error: type[OamdError] = InvalidRequest) -> None:
        self._reason, self._error = reason, error

    async def __call__(
        self, call: ToolCall, tool: ToolDefinition
    ) -> tuple[ToolOutput, Callable[[], None] | None]:
        raise self._error(self._reason)


@dataclass(frozen=True)
class RetryPolicy:
    """When a failed model call is tried again, and after how long.

    A failure named in ``RETRIED_ERRORS`` (plus ``guardrail_violation`` with
    ``retry_guardrail``) is retried until ``max_attempts`` calls were made, and only when it
    asks for no ``retry_after`` or for at most ``MAX_RETRY_AFTER_SECONDS`` (``busy`` and
    ``rate_limited`` alike). The waits are 300 ms, then doubling, or the failure's
    ``retry_after`` when that is longer. What one attempt covers is the loop's: the native loop
    repeats the whole turn while no tool has run, the envelope loop repeats one model step.
    """

    max_attempts: int = 2
    retry_guardrail: bool = False

    def retries(self, error: ModelError) -> bool:
        """Whether trying again may cure ``error`` (attempts aside)."""
        if error.retry_after is not None and error.retry_after > MAX_RETRY_AFTER_SECONDS:
            return False
        if error.name == "guardrail_violation":
            return self.retry_guardrail
        return error.name in RETRIED_ERRORS

    def wait(self, error: ModelError, attempt: int) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` when ``error`` stands."""
        if attempt >= self.max_attempts or not self.retries(error):
            return None
        backoff = RETRY_FIRST_WAIT_SECONDS * 2 ** (attempt - 1)
        # retry_after only ever lengthens the wait; the backoff doubles regardless
        return backoff if error.retry_after is None else max(error.retry_after, backoff)

    async def run(
        self,
        attempt: Callable[[], Awaitable[_T]],
        sleep: Callable[[float], Awaitable[None]],
        *,
        may_retry: Callable[[], bool] = lambda: True,
        on_retry: Callable[[], None] | None = None,
    ) -> _T:
        """``attempt()``'s result, calling it again after each failure the policy retries while
        ``may_retry()`` holds; ``on_retry`` runs before each repeat.

        Raises:
            ModelError: the last failure, when it is not retried or the attempts ran out.
        """
        number = 1
        while True:
            try:
                return await attempt()
            except ModelError as error:
                wait = self.wait(error, number)
                if wait is None or not may_retry():
                    raise
            await sleep(wait)
            number += 1
            if on_retry is not None:
                on_retry()


@dataclass(frozen=True, slots=True)
class Labels:
    """How a text-only turn names its two speakers in what the model reads."""

    user: str = "User"
    assistant: str = "Assistant"


@dataclass(frozen=True)
class TurnSettings:
    """A turn's knobs, with their defaults (a session's ``options`` override them)."""

    sampling: Sampling = Sampling()
    max_attempts: int = 2
    """Model calls per attempt unit before a retried failure stands (``RetryPolicy``)."""
    trim_history: bool = True
    reserved_response_tokens: int = 1024
    user_label: str = "User"
    """Envelope loop: how the user's lines are labelled in the conversation the model reads."""
    assistant_label: str = "Assistant"
    """Envelope loop: how the model's own lines are labelled."""
    dedupe_tool_calls: bool = True
    """Envelope loop: a repeated identical successful call means the model should reply now."""
    retry_guardrail_violations: bool = False
    """Whether a model call that trips the guardrails is retried."""
    stop: tuple[str, ...] = ()
    """Reply steps end where one of these starts (speaker labels of lines the model would
    invent for someone else), besides the model's own end of message."""
    max_sentences: int | None = None
    """Reply steps end once this many sentences are complete (an NPC's line)."""
    reply_opening: Callable[[Sequence[ToolRecord]], str] | None = None
    """Small-model layout: the words a reply step's text starts with, given the turn's tool
    records (a fact-filled opening the model continues in its own voice; the sentence it opens
    ends the reply); none when empty."""

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(self.max_attempts, self.retry_guardrail_violations)


DEFAULT_TURN_SETTINGS = TurnSettings()


NO_TOOLS = ToolPolicy(choice=ToolChoice("none"), max_rounds=0)
"""The policy of a turn that offers no tools (a bark, a summary, a retry after a blocked turn)."""


@dataclass
class TurnSpec:
    """Everything one turn needs, gathered when it starts: the model that answers, what it is told
    (``instructions``, the ``history``, the ``prompt``), the tools it is offered and the policy
    they are offered under, the ``schema`` its answer must match, and how it is sampled, retried
    and read (``settings``). A session's turn gives each; a turn outside one (an NPC's line or
    bark, a decision, content, a summary) names only what it changes: no tools, no history and
    ``TurnSettings``' defaults unless given."""

    model: LanguageModel
    instructions: str | None
    prompt: str
    _: KW_ONLY
    tools: Sequence[ToolDefinition] = ()
    policy: ToolPolicy = NO_TOOLS
    history: History = field(default_factory=History)
    """The committed conversation; the turn sends its window (``agent.history``)."""
    schema: CompiledSchema | None = None
    settings: TurnSettings = DEFAULT_TURN_SETTINGS
    said: str | None = None
    """The speaker's own words when the ``prompt`` holds more (an NPC's line after the facts
    placed before it): what a small model's tool arguments are read from (``agent.small``)."""
    carried_records: Sequence[ToolRecord] = ()
    """Tool records of an earlier failed run that the result keeps (the NPC's text retry)."""
    watch: Callable[[list[dict[str, Any]]], None] | None = None
    """Receives the live list of this attempt's entries (``session/transcript`` shows a running
    turn's progress); the list grows as the turn runs and is not committed by being watched."""

"""What each step of an envelope-loop turn sends: laid out afresh, or continuing the last step.

Afresh (every model's first step, and every step on most models): the system text and one user
message with the conversation, this turn's tool uses and the step's task, the history window
fitted to the input budget (``_prompt``). Continued, for a backend whose conversation only
appends (``capabilities.append_only_steps``, LiteRT-LM's): the last step's messages again, the
model's raw reply to them exactly as the backend streamed it, and one user message with what is
new (the tool uses since that step and the step's task, with its repair note). The model reads the
same information in turn form, and the backend prefills only the new message. A continued layout
that no longer fits the budget is not sent: that step is laid out afresh, and later steps continue
from it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from oamd.agent.envelope._prompt import (
    PRECISE_COUNT_SHARE,
    fit_window,
    history_window,
    render_body,
)
from oamd.agent.turn_spec import Labels, TurnSpec
from oamd.backends.base import ChatMessage, estimate_tokens

__all__ = ["StepLayout", "StepThread", "fits"]


class StepThread:
    """A turn's steps so far, as the next step continues them."""

    def __init__(self) -> None:
        self._sent: list[ChatMessage] = []
        """The last answered step's messages and its raw reply; empty before the first one."""
        self._shown = 0
        """This turn's tool lines the model has read."""
        self.trimmed = 0
        """History turns the last fresh layout dropped (the steps continuing it keep its window)."""

    @property
    def started(self) -> bool:
        return bool(self._sent)

    def continued(self, tool_lines: Sequence[str], task: str) -> list[ChatMessage]:
        """The next step's messages: the last step's, its reply, and what is new since."""
        parts = ["\n".join(tool_lines[self._shown :]), task]
        return [*self._sent, ChatMessage("user", "\n\n".join(part for part in parts if part))]

    def answered(self, messages: Sequence[ChatMessage], reply: str, shown: int) -> None:
        """A step sent ``messages`` (``shown`` tool lines read) and the model answered ``reply``."""
        if not reply:
            self._sent = []  # nothing to send as a model turn: the next step starts afresh
            return
        self._sent = [*messages, ChatMessage("assistant", reply)]
        self._shown = shown


async def fits(
    messages: Sequence[ChatMessage], budget: int, count: Callable[[str], Awaitable[int]]
) -> bool:
    """Whether ``messages`` fit ``budget`` tokens: the chars/4 estimate while it stays under
    ``PRECISE_COUNT_SHARE`` of it, else the backend's tokenizer on each message."""
    texts = [message.content for message in messages]
    if sum(estimate_tokens(text) for text in texts) <= PRECISE_COUNT_SHARE * budget:
        return True
    return sum([await count(text) for text in texts]) <= budget


class StepLayout:
    """The messages of one turn's steps. ``tool_lines`` is the turn's live list of tool uses."""

    def __init__(
        self, spec: TurnSpec, system: str, labels: Labels, tool_lines: Sequence[str]
    ) -> None:
        self._spec = spec
        self._system = system
        self._labels = labels
        self._lines = tool_lines
        self.thread = StepThread() if spec.model.capabilities.append_only_steps else None
        """Set when steps continue each other (``capabilities.append_only_steps``)."""
        self._counts: dict[str, int] = {}

    @property
    def continues(self) -> bool:
        """Whether the next step continues an earlier one (then it is never sent plain)."""
        return self.thread is not None and self.thread.started

    async def messages(self, task: str, plain: bool) -> tuple[list[ChatMessage], int]:
        """The step's messages, and how many history turns they leave out."""
        thread = self.thread
        if thread is not None and thread.started:
            messages = thread.continued(self._lines, task)
            if not self._spec.settings.trim_history or await fits(
                messages, self._budget(), self._count
            ):
                return messages, thread.trimmed
        messages, trimmed = await self._fresh(task, plain)
        if thread is not None:
            thread.trimmed = trimmed
        return messages, trimmed

    def answered(self, messages: Sequence[ChatMessage], reply: str) -> None:
        """The step that sent ``messages`` ended with the model's raw ``reply``."""
        if self.thread is not None:
            self.thread.answered(messages, reply, len(self._lines))

    def _budget(self) -> int:
        settings = self._spec.settings
        return self._spec.model.capabilities.context_size - settings.reserved_response_tokens

    async def _count(self, text: str) -> int:
        if text not in self._counts:
            self._counts[text] = await self._spec.model.count_tokens(text)
        return self._counts[text]

    async def _fresh(self, task: str, plain: bool) -> tuple[list[ChatMessage], int]:
        spec = self._spec

        def render(history_lines: Sequence[str]) -> str:
            return render_body(
                history_lines, spec.prompt, self._lines, task, self._labels, plain=plain
            )

        window = history_window(spec.history, self._labels)
        if spec.settings.trim_history:
            await fit_window(window, self._system, render([]), self._budget(), self._count)
        messages = [ChatMessage("system", self._system)] if self._system else []
        messages.append(ChatMessage("user", render(window.items)))
        return messages, window.trimmed

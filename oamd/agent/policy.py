"""ToolPolicy: which tools a model step may or must call (§5 options, Apple's step steering).

The mode of a step, in this order: ``none`` → disallowed; the model already chose
``respond_directly`` → disallowed; the round or call budget is spent → disallowed; ``required`` or
``explicit`` on the first step → required; ``{"tool": n}`` on the first step → required with only
``n``; otherwise allowed; and disallowed whenever no tool is left to offer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from oamd.agent.tools import ToolChoice

__all__ = ["NO_OVERRIDES", "PolicyOverrides", "StepTools", "ToolPolicy"]


@dataclass(frozen=True, slots=True)
class PolicyOverrides:
    """What one request changes of a policy (``session/respond``'s ``toolChoice``,
    ``maxToolRounds``, ``maxToolCalls``, ``enabledTools``; ``session/create`` reads its options'
    the same way); ``None``: the policy's own is kept."""

    choice: ToolChoice | None = None
    max_rounds: int | None = None
    max_calls: int | None = None
    enabled: frozenset[str] | None = None


NO_OVERRIDES = PolicyOverrides()


@dataclass(frozen=True, slots=True)
class StepTools:
    mode: str
    """``allowed``, ``required`` or ``disallowed``."""
    enabled: tuple[str, ...]
    offer_respond_directly: bool = False


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    choice: ToolChoice = ToolChoice()
    max_rounds: int = 4
    max_calls: int = 12
    enabled: frozenset[str] | None = None
    """``None``: every tool of the session."""

    def step(
        self, tools: Sequence[str], rounds: int, calls: int, responded_directly: bool
    ) -> StepTools:
        visible = tuple(t for t in tools if self.enabled is None or t in self.enabled)
        mode = self.choice.mode
        if mode == "none" or responded_directly:
            return StepTools("disallowed", ())
        if rounds >= self.max_rounds or calls >= self.max_calls:
            return StepTools("disallowed", ())
        if rounds == 0 and mode == "tool":
            only = tuple(t for t in tools if t == self.choice.name)
            return StepTools("required", only) if only else StepTools("disallowed", ())
        if not visible:
            return StepTools("disallowed", ())
        if rounds == 0 and mode in ("required", "explicit"):
            return StepTools("required", visible, offer_respond_directly=mode == "explicit")
        return StepTools("allowed", visible)

    def with_overrides(self, overrides: PolicyOverrides) -> ToolPolicy:
        """This policy with what ``overrides`` gives in place of its own."""
        if overrides == NO_OVERRIDES:
            return self
        o = overrides
        return replace(
            self,
            choice=self.choice if o.choice is None else o.choice,
            max_rounds=self.max_rounds if o.max_rounds is None else o.max_rounds,
            max_calls=self.max_calls if o.max_calls is None else o.max_calls,
            enabled=self.enabled if o.enabled is None else o.enabled,
        )

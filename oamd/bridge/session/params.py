"""``session/*`` params: a session's ``options``, a turn's tool-policy overrides, sampling.

Each option is read in the reference's order, so the first invalid one is the one its error
names; unknown options come back as warnings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from oamd.agent.policy import PolicyOverrides
from oamd.agent.session import SessionOptions
from oamd.backends.base import Sampling
from oamd.bridge.params import Params
from oamd.bridge.tool_params import parse_tool_choice
from oamd.errors import InvalidParams

__all__ = ["OPTION_KEYS", "parse_policy_overrides", "parse_sampling", "parse_session_options"]

_T = TypeVar("_T")

OPTION_KEYS = (
    "toolChoice",
    "maxToolRounds",
    "maxToolCalls",
    "enabledTools",
    "temperature",
    "maxResponseTokens",
    "sampling",
    "toolTimeoutSeconds",
    "trimHistory",
    "reservedResponseTokens",
    "maxAttempts",
    "userLabel",
    "assistantLabel",
    "dedupeToolCalls",
)


def parse_sampling(p: Params, base: Sampling | None = None) -> Sampling:
    """``temperature``, ``maxResponseTokens`` (or ``maximumResponseTokens``) and ``sampling``."""
    base = base or Sampling()
    temperature = p.opt_number("temperature", minimum=0)
    max_tokens = p.opt_int(
        "maxResponseTokens" if "maxResponseTokens" in p.raw else "maximumResponseTokens",
        minimum=1,
    )
    raw = p.get("sampling")
    greedy, top_k, top_p, seed = base.greedy, base.top_k, base.top_p, base.seed
    path = p.path("sampling")
    if raw is not None:
        if raw == "greedy":
            greedy, top_k, top_p, seed = True, None, None, None
        elif isinstance(raw, dict):
            sp = Params(raw, path)
            if "topK" in raw:
                top_k = sp.opt_int("topK", minimum=1)
            elif "topP" in raw:
                top_p = sp.opt_number("topP")
                if top_p is not None and not 0 <= top_p <= 1:
                    raise InvalidParams(f"'{path}.topP' must be between 0 and 1.")
            else:
                raise InvalidParams(f"'{path}' must contain 'topK' or 'topP'.")
            seed = sp.opt_int("seed", minimum=0)
            greedy = False
        else:
            raise InvalidParams(f'\'{path}\' must be "greedy", {{"topK": n}} or {{"topP": p}}.')
    return Sampling(
        temperature=base.temperature if temperature is None else temperature,
        greedy=greedy,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        max_tokens=base.max_tokens if max_tokens is None else max_tokens,
    )


def parse_session_options(
    p: Params | None, base: SessionOptions = SessionOptions()
) -> tuple[SessionOptions, list[str]]:
    """``options`` of ``session/create``; returns the options and unknown-key warnings."""
    if p is None:
        return base, []
    warnings = p.unknown(OPTION_KEYS)
    policy = base.policy.with_overrides(parse_policy_overrides(p))
    turn = base.turn
    sampling = parse_sampling(p, turn.sampling)
    timeout = p.opt_seconds("toolTimeoutSeconds")
    # read in this order: an error names the first bad option the reference would
    trim = p.opt_bool("trimHistory")
    reserved = p.opt_int("reservedResponseTokens", minimum=0)
    attempts = p.opt_int("maxAttempts", minimum=1)
    user_label = _label(p, "userLabel")
    assistant_label = _label(p, "assistantLabel")
    dedupe = p.opt_bool("dedupeToolCalls")
    options = SessionOptions(
        policy=policy,
        tool_timeout=_given(timeout, base.tool_timeout),
        turn=replace(
            turn,
            sampling=sampling,
            trim_history=_given(trim, turn.trim_history),
            reserved_response_tokens=_given(reserved, turn.reserved_response_tokens),
            max_attempts=_given(attempts, turn.max_attempts),
            user_label=_given(user_label, turn.user_label),
            assistant_label=_given(assistant_label, turn.assistant_label),
            dedupe_tool_calls=_given(dedupe, turn.dedupe_tool_calls),
        ),
    )
    return options, warnings


def _label(p: Params, key: str) -> str | None:
    """A prompt label (``userLabel``, ``assistantLabel``), trimmed; blank is refused, as
    open-android-models refuses it (a speaker with no name cannot be told apart)."""
    label = p.opt_string(key)
    if label is None:
        return None
    if not label.strip():
        raise InvalidParams(f"Parameter '{p.path(key)}' must not be blank.")
    return label.strip()


def parse_policy_overrides(p: Params) -> PolicyOverrides:
    """``toolChoice``, ``maxToolRounds``, ``maxToolCalls``, ``enabledTools`` (read in this order:
    an error names the first bad one)."""
    choice = parse_tool_choice(p.get("toolChoice"), p.path("toolChoice"))
    rounds = p.opt_int("maxToolRounds", minimum=0)
    calls = p.opt_int("maxToolCalls", minimum=0)
    enabled = p.opt_strings("enabledTools")
    return PolicyOverrides(
        choice=choice,
        max_rounds=rounds,
        max_calls=calls,
        enabled=None if enabled is None else frozenset(enabled),
    )


def _given(value: _T | None, default: _T) -> _T:
    return default if value is None else value

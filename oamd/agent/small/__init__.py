"""Turns on a small model (``capabilities.compact_prompts``): its layout and its closed choices.

``layout`` lays a text-only turn out as a short prose system text and a plain chat (no tool
catalog, no envelope); ``choices`` reads what must be closed — which tool a message calls for,
the answer to a question after a line, the likeliest of some options — off the model's
likelihoods. The envelope loop (``oamd.agent.envelope``) runs a small model's turns in this
layout; ``oamd.game`` builds its small-model NPC lines and decisions on both.
"""

from __future__ import annotations

from oamd.agent.small.choices import (
    NEUTRAL_EXCHANGE,
    Likeliest,
    Priors,
    Question,
    best,
    channel_candidates,
    lift,
    likeliest,
)
from oamd.agent.small.layout import (
    chat_messages,
    chat_prefix,
    chat_window,
    reply_messages,
    turn_facts,
)

__all__ = [
    "NEUTRAL_EXCHANGE",
    "Likeliest",
    "Priors",
    "Question",
    "best",
    "channel_candidates",
    "chat_messages",
    "chat_prefix",
    "chat_window",
    "lift",
    "likeliest",
    "reply_messages",
    "turn_facts",
]

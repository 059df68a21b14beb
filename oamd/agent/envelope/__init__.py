"""The envelope tool loop of text-only models (no tool-call API), with the private parts only it uses.

``_loop`` runs a turn in decide/toolArguments/respond/structured steps (a small model's in the
layout of ``oamd.agent.small``, which also reads which tool a message calls for from the
model's likelihoods); ``_parser`` reads what an answer meant (an envelope, tool arguments), the
forgiving JSON small models write read by ``oamd.agent.json_reader``; ``_prompt`` renders each
step's prompt and fits the history window; ``_layout`` lays a step out afresh or continuing the
last (append-only backends); ``oamd.agent.step`` reads (and retries) each model step, generated
or scored; ``_calls`` runs and records the turn's tool calls; ``_reply`` cleans and shows the
streamed reply. The turn's vocabulary is ``oamd.agent.turn_spec``'s; choosing this loop is
``oamd.agent.run_turn``'s.
"""

from __future__ import annotations

from oamd.agent.envelope._loop import (
    STEP_KINDS,
    prefill_system_text,
    regenerate_reply,
    run_envelope_turn,
)
from oamd.agent.envelope._reply import SentenceWatch

__all__ = [
    "STEP_KINDS",
    "SentenceWatch",
    "prefill_system_text",
    "regenerate_reply",
    "run_envelope_turn",
]

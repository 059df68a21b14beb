"""The compact layout on an OpenAI-compatible server (spec option ``prompts=compact``), without
I/O: a conversation written out in ChatML and sent to ``POST /completions``, and the
log-probability of a scored text read off an echoed prompt.

A chat-completions server renders the conversation itself and always starts a fresh reply, so
it can neither continue a reply's opening (``GenerationRequest.reply_prefix``) nor say how
likely a given text is. A plain completion can do both when the prompt is written here: the
reply steps of a small model go that way, in ChatML (SmolLM2's, Qwen2.5's, the template
llama.cpp uses when a file has none), with the same messages the embedded backend gives its
template (``oamd.backends._plain_chat``). Scoring sends each candidate as a prompt that ends
with its scored text and asks for the prompt's own log-probabilities (``echo`` with
``logprobs``, OpenAI's completions contract, which vLLM and llama-cpp-python keep).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oamd.backends._plain_chat import plain_message, unmarked
from oamd.backends.base import ChatMessage, GenerationRequest, ScoredText
from oamd.backends.openai.wire import MAX_STOP_SEQUENCES, WireOptions, sampled
from oamd.errors import ModelError

__all__ = [
    "END",
    "START",
    "ScoredPrompt",
    "chatml",
    "completion_body",
    "goes_as_completion",
    "score_body",
    "scored_logprob",
    "scored_prompt",
]

START = "<|im_start|>"
END = "<|im_end|>"


def chatml(messages: Sequence[ChatMessage], *, reply: str | None = "") -> str:
    """The conversation in ChatML; with ``reply`` (not ``None``), an assistant's turn opened
    after it that starts with those words."""
    out = [
        f"{START}{m['role']}\n{m['content']}{END}\n" for m in (plain_message(x) for x in messages)
    ]
    if reply is not None:
        out.append(f"{START}assistant\n{unmarked(reply)}")
    return "".join(out)


def goes_as_completion(request: GenerationRequest) -> bool:
    """Whether a step of the compact layout is written out here: free text (no tool offered, no
    schema). Steps that call tools or answer JSON keep the server's chat template and its
    constraints."""
    return request.schema is None and (not request.tools or request.tool_mode == "none")


def completion_body(
    request: GenerationRequest, options: WireOptions, *, stream: bool
) -> dict[str, Any]:
    """The ``POST /completions`` body for a free-text step: the conversation in ChatML, the
    assistant's turn opened with ``reply_prefix``, ending at ChatML's end of message."""
    body: dict[str, Any] = {
        "model": options.model,
        "prompt": chatml(request.messages, reply=request.reply_prefix),
        "stream": stream,
        "stop": [END, *request.stop][:MAX_STOP_SEQUENCES],
    }
    return sampled(body, request, options)


class ScoredPrompt:
    """One candidate as a plain prompt: its conversation up to the end of the scored text, and
    how many characters of it are scored."""

    __slots__ = ("prompt", "scored_chars")

    def __init__(self, prompt: str, scored_chars: int) -> None:
        self.prompt = prompt
        self.scored_chars = scored_chars


def scored_prompt(candidate: ScoredText) -> ScoredPrompt:
    """The candidate's conversation in ChatML, its last message left open after the scored
    text (the end of message is not scored, as on the embedded model)."""
    *before, last = candidate.messages
    plain = plain_message(last)
    scored = unmarked(candidate.scored)
    if not plain["content"].endswith(scored):
        raise ModelError(
            "invalid_request", "A scored text must end its conversation's last message."
        )
    prompt = chatml(before, reply=None) + f"{START}{plain['role']}\n{plain['content']}"
    return ScoredPrompt(prompt, len(scored))


def score_body(options: WireOptions, prompt: str) -> dict[str, Any]:
    """Asks for the prompt's own token log-probabilities and one token after it."""
    return {
        "model": options.model,
        "prompt": prompt,
        "echo": True,
        "logprobs": 0,
        "max_tokens": 1,
        "temperature": 0.0,
        "stream": False,
    }


def scored_logprob(response: Mapping[str, Any], scored: ScoredPrompt) -> tuple[float, int, int]:
    """The summed log-probability of the scored text's tokens in an echoed completion, how many
    tokens that is, and how many the prompt has.

    The tokens are matched from the end: the echoed text is the prompt and then what was
    generated, and a chat template's markers echo as empty tokens (llama-cpp-python), so
    character offsets from the start do not line up with the prompt; its end does.

    Raises:
        ModelError: ``generation_failed`` when the answer carries no per-token log-probabilities
            (the server does not echo them) or they do not cover the scored text.
    """
    try:
        choice = response["choices"][0]
        logprobs = choice["logprobs"]
        tokens = list(logprobs["tokens"])
        values = list(logprobs["token_logprobs"])
        text = choice.get("text") or ""
    except (KeyError, IndexError, TypeError) as exc:
        raise _no_logprobs() from exc
    if len(tokens) != len(values) or not all(isinstance(t, str) for t in tokens):
        raise _no_logprobs()
    generated = len(text) - len(scored.prompt) if text.startswith(scored.prompt) else 0
    index = len(tokens)
    while generated > 0 and index > 0:  # the generated token(s), after the prompt
        index -= 1
        generated -= len(tokens[index])
    prompt_tokens = index
    need = scored.scored_chars
    total = 0.0
    count = 0
    while need > 0 and index > 0:
        index -= 1
        value = values[index]
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _no_logprobs()
        try:
            total += float(value)
        except OverflowError:  # a 400-digit integer is a JSON number, not a log-probability
            raise _no_logprobs() from None
        count += 1
        need -= len(tokens[index])
    if need > 0 or count == 0:
        raise _no_logprobs()
    return total, count, prompt_tokens


def _no_logprobs() -> ModelError:
    return ModelError(
        "generation_failed",
        "The model server's completion carries no log-probabilities of the prompt's tokens "
        "(echo with logprobs); use choices=generation with this server.",
    )

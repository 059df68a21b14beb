"""A grounded set (the first, the independent or the fresh one) played as a developer without
oamd would play it (the floor oamd must be far above): llama-cpp-python's
``create_chat_completion`` on the same GGUF file, the persona, its knowledge and secret, the world state the NPC reads and its
memory facts pasted into one system message, and for a line answered by a tool, that tool's output
for the right arguments pasted there too (a bare chat calls no tools, so it is given the answer).
The chat history of the NPC follows the system message. What LLMUnity and NobodyWho amount to.

Sampling: temperature 0.7 (oamd's for an NPC line) with a fixed seed, at most 64 tokens (oamd's
cap for a line), top-p 0.9 and a repetition penalty of 1.1, what game integrations of llama.cpp
commonly default to (the library's own 1.0 loops: "He's a boat. He's a boat…"); the rest the
library's defaults. The model is loaded once (n_ctx 4096, 2 threads).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from evals.grounded import GroundedLine, judged
from evals.grounded_judge import world_lines
from evals.grounded_set import GROUNDED, Character, GroundedSet, Say

__all__ = ["FloorChat", "floor_system_message"]

CONTEXT = 4096
THREADS = 2
TEMPERATURE = 0.7
MAX_TOKENS = 64
TOP_P = 0.9
REPEAT_PENALTY = 1.1
SEED = 34


def floor_system_message(character: Character, say: Say) -> str:
    """One system message with everything the NPC knows, as a developer would paste it."""
    p = character.persona
    parts = [
        f"You are {p['name']}, {p['role']}, a character in a fantasy video game.",
        f"Personality: {p['personality']}",
        f"Speaking style: {p['speakingStyle']}",
        "What you know:",
        *(f"- {fact}" for fact in p.get("knowledge") or []),
        "What you remember about the player:",
        *(f"- {fact}" for fact in character.memory),
        "The world right now:",
        *(f"- {line}" for line in world_lines(character.world_paths, character.world)),
    ]
    if say.tool:
        output = character.answers[say.tool](say.expected_call).get("output")
        parts.append(f"Result of {say.tool}: {orjson.dumps(output).decode()}")
    parts.append(f"Your secret, which you must never reveal: {' '.join(p.get('secrets') or [])}")
    parts.append("Stay in character. Answer the player in one or two short sentences.")
    return "\n".join(parts)


class FloorChat:
    """One ``llama_cpp.Llama`` on ``path``, playing every NPC of the set in turn."""

    def __init__(self, path: str | Path) -> None:
        import llama_cpp  # the floor only: the rest of the evals never load it

        self.path = str(path)
        self.llm = llama_cpp.Llama(
            model_path=self.path,
            n_ctx=CONTEXT,
            n_threads=THREADS,
            n_threads_batch=THREADS,
            seed=SEED,
            verbose=False,
        )

    def _reply(self, messages: list[dict[str, str]]) -> tuple[str, float, int, int, int]:
        before = list(self.llm._input_ids)  # what the context holds: the prefix it reuses
        started = time.monotonic()
        answer: Any = self.llm.create_chat_completion(
            messages,
            temperature=TEMPERATURE,
            top_p=TOP_P,
            repeat_penalty=REPEAT_PENALTY,
            max_tokens=MAX_TOKENS,
            seed=SEED,
        )
        seconds = time.monotonic() - started
        usage = answer.get("usage") or {}
        prompt = int(usage.get("prompt_tokens", 0))
        after = list(self.llm._input_ids)[:prompt]
        cached = 0
        for a, b in zip(before, after, strict=False):
            if a != b:
                break
            cached += 1
        text = answer["choices"][0]["message"].get("content") or ""
        return text.strip(), seconds, prompt, cached, int(usage.get("completion_tokens", 0))

    def play(
        self, progress: Callable[[str], None] | None = None, grounded: GroundedSet = GROUNDED
    ) -> list[GroundedLine]:
        """The whole set ``grounded`` once (``progress`` is told each NPC's key as it starts)."""
        lines: list[GroundedLine] = []
        for character in grounded.characters:
            if progress is not None:
                progress(character.key)
            history: list[dict[str, str]] = []
            earlier: list[str] = []
            for say in character.lines:
                system = {"role": "system", "content": floor_system_message(character, say)}
                asked = {"role": "user", "content": say.text}
                text, seconds, prompt, cached, output = self._reply([system, *history, asked])
                line = GroundedLine(character.key, say.text, say.kind, say.source, text)
                line.seconds, line.input_tokens = seconds, prompt
                line.cached_tokens, line.output_tokens = cached, output
                lines.append(judged(character, say, line, earlier, None))
                history += [asked, {"role": "assistant", "content": text}]
                earlier.append(text)
        return lines

    def close(self) -> None:
        self.llm.close()

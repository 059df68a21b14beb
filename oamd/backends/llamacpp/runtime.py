"""The blocking side of the embedded llama.cpp backend: one loaded model and what runs on it.

Every function here blocks (loading, tokenizing, compiling grammars, decoding a token) and must
run in a worker thread, one call at a time; ``oamd.backends.llamacpp.model`` guarantees both with its
``CapacityLimiter(1)``. Imports ``llama_cpp`` only when a model is loaded, so the daemon runs
without the ``local`` extra. The KV cache is llama.cpp's own: ``Llama.generate`` keeps the last
sequence and re-evaluates only past the longest common prefix, which is why the agent's
byte-stable system prefix costs nothing after the first step.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from oamd.backends._plain_chat import plain_message, unmarked
from oamd.backends.base import ChatMessage, Sampling, ScoredText
from oamd.backends.llamacpp.kv_slots import DEFAULT_MAX_BYTES as DEFAULT_SLOT_BYTES
from oamd.backends.llamacpp.kv_slots import DEFAULT_SLOTS, KvSlots
from oamd.backends.llamacpp.kv_store import DEFAULT_MAX_BYTES, KvStore, model_identity
from oamd.backends.llamacpp.scoring import Scorer, parallel_context, shared_length
from oamd.backends.llamacpp.threads import ThreadPolicy
from oamd.jsonvalue import dumps_text

__all__ = [
    "CHATML_TEMPLATE",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "LlamaRuntime",
    "llama_cpp_version",
]

DEFAULT_MAX_OUTPUT_TOKENS = 512
"""Output cap of a step whose sampling sets none: a tiny model can ramble to the end of its
context, which takes minutes on a CPU."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""The template used when a GGUF file carries none."""

NO_THINKING = "<think>\n\n</think>\n\n"
"""An empty reasoning block: Qwen3's template writes it to switch thinking off."""

GREEDY_TOP_K = 1

GRAMMAR_CACHE = 64
"""Compiled grammars kept (a client may send any number of schemas)."""

MAX_ENUMERATED_RANGE = 1000
"""An integer range up to this many values is constrained as the list of them: llama-cpp-python's
schema converter ignores ``minimum``/``maximum`` (a price of 1000 came back for ``maximum: 500``)."""


def llama_cpp_version() -> str | None:
    """The installed llama-cpp-python version, or ``None`` when it cannot be imported."""
    try:
        import llama_cpp
    except ImportError:
        return None
    return str(getattr(llama_cpp, "__version__", "unknown"))


class LlamaRuntime:
    """A loaded GGUF model. Not thread-safe: the caller runs one method at a time."""

    def __init__(
        self,
        path: Path,
        *,
        context_size: int,
        threads: int | None,
        ram_cache_bytes: int = 0,
        slots: int = DEFAULT_SLOTS,
        slot_bytes: int = DEFAULT_SLOT_BYTES,
        kv_folder: Path | None = None,
        kv_max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        """Loads the model (blocking).

        Raises:
            ImportError: llama-cpp-python is not installed.
            ValueError: llama.cpp could not load the file.
        """
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.threads = ThreadPolicy(threads)
        """Each step's thread count: ``threads`` when given, else the cores left free."""
        threads = self.threads.most
        self._using = threads
        self.path = path
        self.llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=context_size,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self._scorer = Scorer(self.llm, parallel_context(self.llm))
        store = None
        if kv_folder is not None:
            identity = model_identity(path, llama_cpp_version() or "unknown")
            store = KvStore(kv_folder, identity, kv_max_bytes)
        self.slots = KvSlots(
            self.llm,
            slots,
            max_bytes=slot_bytes,
            spill=store.save if store else None,
            unspill=store.find if store else None,
        )
        """The conversations kept warm besides the one in the KV cache."""
        self.threads.choose()  # the first look: the first step sees the machine since the load
        if ram_cache_bytes > 0:
            self.llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=ram_cache_bytes))
        self.context_size = self.llm.n_ctx()
        eos = self.llm.token_eos()
        bos = self.llm.token_bos()
        template = self.llm.metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=self._token_text(eos),
            bos_token=self._token_text(bos),
            stop_token_ids=[eos] if eos >= 0 else None,
        )
        self._whole = Jinja2ChatFormatter(  # whole conversations, to score their last message
            template=template,
            eos_token=self._token_text(eos),
            bos_token=self._token_text(bos),
            add_generation_prompt=False,
        )
        self._answer_opening = NO_THINKING if "enable_thinking" in template else ""
        """What the template writes after the assistant's header with ``enable_thinking``
        false, which llama-cpp-python's formatter cannot pass: a thinking model (Qwen3) then
        answers at once instead of spending a turn's tokens on reasoning."""
        self._grammars: dict[bytes, Any] = {}
        self.parameters = int(self.llm._model.n_params())
        """The model's size, which picks its prompt layout."""

    def pick_threads(self) -> int:
        """Sets the threads of the next step (``ThreadPolicy``) and returns how many."""
        threads = self.threads.choose()
        if threads != self._using:
            self.llm._ctx.set_n_threads(threads, threads)
            self._using = threads
        return threads

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def prompt_tokens(
        self, messages: Sequence[ChatMessage], reply_prefix: str = ""
    ) -> tuple[list[int], list[str]]:
        """The chat prompt (and the start of the reply) as tokens, and the template's stops."""
        result = self._formatter(messages=[plain_message(m) for m in messages])
        tokens = self.llm.tokenize(
            (result.prompt + self._answer_opening + unmarked(reply_prefix)).encode("utf-8"),
            add_bos=not result.added_special,
            special=True,
        )
        stops = result.stop if isinstance(result.stop, list) else [result.stop]
        return tokens, [s for s in stops if s]

    def _conversation_tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        result = self._whole(messages=[plain_message(m) for m in messages])
        return self.llm.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )

    def scored_tokens(self, candidate: ScoredText) -> tuple[list[int], int, int]:
        """The candidate's conversation as tokens, and where its scored part begins and ends:
        the tokens that differ from the same conversation without the scored text (the chat
        template's end of message after it is not scored)."""
        tokens = self._conversation_tokens(candidate.messages)
        last = candidate.messages[-1]
        cut = len(last.content) - len(candidate.scored)
        without = self._conversation_tokens(
            [*candidate.messages[:-1], replace(last, content=last.content[:cut])]
        )
        start = max(1, min(shared_length(without, tokens), len(tokens) - 1))
        tail = shared_length(without[::-1], tokens[::-1])
        end = max(start + 1, min(len(tokens) - tail, len(tokens)))
        return tokens, start, end

    def score(self, candidates: list[tuple[list[int], int, int]]) -> tuple[list[float], int, int]:
        """The summed log-probability of each candidate's ``tokens[start:end]`` given what
        precedes them; how many tokens that took, and how many came from the KV cache."""
        if candidates:
            self.slots.recall(candidates[0][0])
        return self._scorer.score(candidates)

    def warm_prefix(self, tokens: Sequence[int]) -> int:
        """Puts the kept state that starts most like ``tokens`` in the KV cache (``KvSlots``);
        how many leading tokens the next step then skips."""
        self.slots.recall(tokens)
        return self.reusable_prefix(tokens)

    def reusable_prefix(self, tokens: Sequence[int]) -> int:
        """How many leading prompt tokens the KV cache already holds (what ``generate`` skips)."""
        shared = shared_length(self.llm.input_ids[: self.llm.n_tokens].tolist(), tokens)
        if shared == len(tokens) and shared:
            shared -= 1  # the last prompt token is decoded again to get fresh logits
        cache = self.llm.cache
        if cache is not None and tokens:
            try:
                state = cache[list(tokens)]
            except KeyError:
                return shared
            saved = shared_length(state.input_ids.tolist(), tokens)
            shared = max(shared, min(saved, len(tokens) - 1))
        return shared

    def grammar(self, schema: dict[str, Any]) -> Any | None:
        """A GBNF grammar for ``schema`` (compiled once per schema, the ``GRAMMAR_CACHE`` latest
        kept), or ``None`` when llama.cpp's converter cannot express it; the step then runs
        unconstrained. Integer ranges the converter ignores become the list of their values."""
        from llama_cpp import LlamaGrammar

        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        if key in self._grammars:
            self._grammars[key] = self._grammars.pop(key)  # most recently used last
            return self._grammars[key]
        try:
            text = dumps_text(_ranges_as_enums(schema), sort_keys=True)
            grammar = LlamaGrammar.from_json_schema(text, verbose=False)
        except Exception:  # the converter raises bare errors on unsupported keywords
            grammar = None
        self._grammars[key] = grammar
        if len(self._grammars) > GRAMMAR_CACHE:
            del self._grammars[next(iter(self._grammars))]
        return grammar

    def start(
        self,
        tokens: list[int],
        stops: list[str],
        sampling: Sampling,
        grammar: Any | None,
    ) -> Iterator[dict[str, Any]]:
        """The streamed completion chunks of one step; each ``next`` decodes about one token."""
        options: dict[str, Any] = {}
        if sampling.greedy:
            options["temperature"] = 0.0
            options["top_k"] = GREEDY_TOP_K
        else:
            if sampling.temperature is not None:
                options["temperature"] = sampling.temperature
            if sampling.top_k is not None:
                options["top_k"] = sampling.top_k
            if sampling.top_p is not None:
                options["top_p"] = sampling.top_p
        if sampling.repetition_penalty is not None:
            options["repeat_penalty"] = sampling.repetition_penalty
        if sampling.seed is not None:
            options["seed"] = sampling.seed
        max_tokens = sampling.max_tokens or DEFAULT_MAX_OUTPUT_TOKENS
        max_tokens = min(max_tokens, self.context_size - len(tokens))
        return self.llm.create_completion(
            tokens,
            max_tokens=max_tokens,
            stop=stops,
            stream=True,
            grammar=grammar,
            **options,
        )

    def finish(self, chunks: Iterator[dict[str, Any]]) -> None:
        """Closes a step's completion (``start``) and frees the sampler llama-cpp-python made
        for it. That sampler sits in a reference cycle (its exit stack's callback holds it), so
        left alone its native memory, a grammar's parse state among it, waits for a full
        garbage collection: RSS grew ~30 MiB per round of 40 NPC turns, flat with this."""
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
        sampler = getattr(self.llm, "_sampler", None)
        if sampler is not None:
            sampler.close()
            self.llm._sampler = None

    def prefill(self, tokens: list[int], most: int) -> bool:
        """Evaluates at most ``most`` more of ``tokens`` into the KV cache, past the prefix it
        holds; ``True`` once it holds all of them but the last, which the step that starts with
        them decodes again for its logits (``reusable_prefix``)."""
        self.slots.recall(tokens)
        llm = self.llm
        held = shared_length(llm.input_ids[: llm.n_tokens].tolist(), tokens)
        wanted = len(tokens) - 1
        if held < wanted:
            llm.n_tokens = held  # eval drops the cells past it
            upto = min(wanted, held + most)
            llm.eval(tokens[held:upto])
            held = upto
        return held >= wanted

    def generated_tokens(self, prompt_length: int) -> int:
        """Tokens decoded past the prompt by the step that just ran."""
        return max(0, self.llm.n_tokens - prompt_length)

    def count(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def close(self) -> None:
        self.slots.close()
        self.llm.close()


def _ranges_as_enums(schema: Any) -> Any:
    """``schema`` with each bounded integer of at most ``MAX_ENUMERATED_RANGE`` values given as
    an ``enum`` of them, the converter expressing those."""
    if isinstance(schema, list):
        return [_ranges_as_enums(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _ranges_as_enums(value) for key, value in schema.items()}
    if out.get("type") != "integer" or "enum" in out:
        return out
    low, high = out.get("minimum"), out.get("maximum")
    if isinstance(out.get("exclusiveMinimum"), int | float):
        low = math.floor(out["exclusiveMinimum"]) + 1
    if isinstance(out.get("exclusiveMaximum"), int | float):
        high = math.ceil(out["exclusiveMaximum"]) - 1
    if not all(isinstance(b, int | float) and math.isfinite(b) for b in (low, high)):
        return out
    first, last = math.ceil(low), math.floor(high)
    if not 0 <= last - first < MAX_ENUMERATED_RANGE:
        return out
    kept = {k: v for k, v in out.items() if k in ("description", "title")}
    return {**kept, "enum": list(range(first, last + 1))}

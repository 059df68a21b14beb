"""Scoring texts on the embedded model: the log-probability of each candidate's scored tokens.

Blocking, like everything on a loaded model (``oamd.backends.llamacpp.runtime`` calls it in its
worker thread). Candidates share a beginning (the conversation); it is evaluated once, in sequence
0 of the KV cache, past what the cache already holds. Then every candidate's own tokens are
decoded together in one batch, each in a sequence of its own that starts as a copy of sequence 0
(llama.cpp shares those cells, it copies nothing), with logits only where a scored token is
predicted; the extra sequences are dropped afterwards, so sequence 0 holds the shared beginning
for the next step. That needs a context made for several sequences (``parallel_context``); on one
that is not, candidates are decoded one after another in sequence 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

__all__ = ["SCORING_SEQUENCES", "Scorer", "parallel_context", "shared_length"]

SCORING_SEQUENCES = 32
"""Sequences the context is made for: the main one, and one per candidate decoded at once."""

Candidate = tuple[list[int], int, int]
"""A candidate's tokens, and where its scored part starts and ends."""


def parallel_context(llm: Any) -> bool:
    """Remakes ``llm``'s context for ``SCORING_SEQUENCES`` sequences over one shared (unified)
    KV cache, before anything was evaluated; ``False`` (the context left as it was) when this
    llama-cpp-python cannot."""
    from llama_cpp import _internals

    params = llm.context_params
    if not hasattr(params, "kv_unified") or not hasattr(params, "n_seq_max"):
        return False
    params.n_seq_max = SCORING_SEQUENCES
    params.kv_unified = True
    try:
        context = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
    except Exception:  # an older llama.cpp refuses the parameters: score one at a time
        params.n_seq_max = 1
        return False
    llm._ctx.close()
    llm._ctx = context
    llm._stack.enter_context(contextlib.closing(context))
    return True


def shared_length(a: Sequence[int], b: Sequence[int]) -> int:
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared


def _log_softmax(logits: Any) -> Any:
    import numpy as np

    values = np.asarray(logits, dtype=np.float64)
    top = values.max(axis=-1, keepdims=True)
    return values - top - np.log(np.exp(values - top).sum(axis=-1, keepdims=True))


class Scorer:
    """Scores candidates on one loaded model (``parallel``: its context takes several
    sequences)."""

    def __init__(self, llm: Any, parallel: bool) -> None:
        self._llm = llm
        self._parallel = parallel

    def score(self, candidates: list[Candidate]) -> tuple[list[float], int, int]:
        """Each candidate's summed log-probability; the tokens that took (prompt figures), and
        how many of them the KV cache already held."""
        group = SCORING_SEQUENCES - 1 if self._parallel else 1
        logprobs: list[float] = []
        evaluated = reused = 0
        for first in range(0, len(candidates), group):
            scores, took, kept = self._together(
                candidates[first : first + group], sequences=self._parallel
            )
            logprobs.extend(scores)
            evaluated += took
            reused += kept
        return logprobs, evaluated, reused

    def _keep(self, tokens: Sequence[int], most: int) -> int:
        """Cuts the KV cache to the longest prefix of ``tokens`` it holds, at most ``most``."""
        llm = self._llm
        kept = min(shared_length(llm.input_ids[: llm.n_tokens].tolist(), tokens), most)
        llm._ctx.kv_cache_seq_rm(-1, kept, -1)
        llm.n_tokens = kept
        return kept

    def _together(
        self, candidates: list[Candidate], *, sequences: bool
    ) -> tuple[list[float], int, int]:
        """Scores ``candidates`` (each in a sequence of its own with ``sequences``, else the one
        candidate in sequence 0)."""
        import llama_cpp
        import numpy as np

        llm = self._llm
        common = candidates[0][0]
        length = min(start for _, start, _ in candidates)  # logits from start - 1 on
        for tokens, _, _ in candidates[1:]:
            length = min(length, shared_length(common, tokens))
        length = max(1, length)
        reused = self._keep(common, length - 1)
        llm.eval(common[reused:length])  # the shared beginning, in sequence 0
        last = _log_softmax(
            np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)
            )
        )
        totals = [0.0] * len(candidates)
        wanted: list[tuple[int, int, int, int]] = []
        """(candidate, sequence, position, token) to decode; a logit row where it predicts."""
        for index, (tokens, start, end) in enumerate(candidates):
            if start == length:
                totals[index] += float(last[tokens[start]])
            for position in range(length, end - 1):
                wanted.append((index, index + 1 if sequences else 0, position, tokens[position]))
        batch = llm._batch.batch
        capacity = llm.n_batch
        rows: list[tuple[int, int]] = []
        count = 0

        def flush() -> None:
            nonlocal count
            if not count:
                return
            batch.n_tokens = count
            llm._ctx.decode(llm._batch)
            if rows:
                logits = _log_softmax(
                    np.ctypeslib.as_array(
                        llama_cpp.llama_get_logits(llm._ctx.ctx), shape=(len(rows), llm.n_vocab())
                    )
                )
                for row, (index, following) in enumerate(rows):
                    totals[index] += float(logits[row, following])
            rows.clear()
            count = 0

        copied: set[int] = set()
        for index, sequence, position, token in wanted:
            tokens, start, end = candidates[index]
            if sequence and sequence not in copied:
                llm._ctx.kv_cache_seq_cp(0, sequence, 0, length)
                copied.add(sequence)
            if count == capacity:
                flush()
            scored = start - 1 <= position < end - 1
            batch.token[count] = token
            batch.pos[count] = position
            batch.n_seq_id[count] = 1
            batch.seq_id[count][0] = sequence
            batch.logits[count] = scored
            if scored:
                rows.append((index, tokens[position + 1]))
            count += 1
        flush()
        for sequence in copied:
            llm._ctx.kv_cache_seq_rm(sequence, -1, -1)
        if sequences:
            llm.n_tokens = length
        else:  # one candidate, decoded in sequence 0: the cache holds it now
            tokens, _, end = candidates[0]
            llm.input_ids[length : end - 1] = tokens[length : end - 1]
            llm.n_tokens = max(length, end - 1)
        llm._requires_eval = True  # the context's last logits are not sequence 0's last token
        evaluated = length + sum(end - length for _, _, end in candidates)
        return totals, evaluated, reused

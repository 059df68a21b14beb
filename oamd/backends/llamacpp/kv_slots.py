"""Warm conversations on one embedded model: the KV state of each recent conversation kept aside
while another one runs, and put back when it speaks again.

llama.cpp's cache holds one sequence (sequence 0) that every step decodes in. A step whose prompt
starts differently (another NPC, a decision actor, another session) would re-evaluate its whole
prompt and overwrite the one before, so two NPCs talked to in turn each re-prefill on every line
(seconds for a thousand-token persona on a phone-class CPU). Here, before a step:

- when the step is about to overwrite most of sequence 0, its state is *parked*: copied out of the
  context into memory (``llama_state_seq_get_data``, ~20 ms for a 1,200-token prompt);
- when a parked state shares a longer beginning with the step's prompt than sequence 0 does, it is
  put back into sequence 0 (``llama_state_seq_set_data``, ~30 ms) and only the rest is evaluated.

States are found by their tokens, not by who they belong to, so sessions, NPCs, decisions and
scored candidates are all served the same way. A conversation has at most one parked state (a
newer one of the same conversation, which shares more than half of it, replaces it). At most
``slots`` are kept, taking at most ``max_bytes`` in all, the least recently used dropped first (or
handed to ``spill``: the cache directory, ``oamd.backends.llamacpp.kv_store``); each costs the KV
bytes of its tokens (SmolLM2-135M: about 20 KB a token, so 24 MB for a 1,200-token prompt). Blocking: called in the model's worker
thread, like everything on a loaded model.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from oamd.backends.llamacpp.scoring import shared_length
from oamd.log import debug_enabled, get_logger

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_SLOTS", "MAX_SLOTS", "KvSlots", "ParkedState"]

DEFAULT_SLOTS = 16
"""Conversations kept warm besides the one running (spec option ``slots``), as long as they fit
in ``DEFAULT_MAX_BYTES``: sixteen guards deciding at once (200-token prompts, 4 MB each) all stay
warm, and so do ten 1,200-token NPCs."""

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
"""What the kept states may take in all (spec option ``slots_mib``); past it, or past ``slots``,
the least recently used go first. A phone-class device may want 64 MiB (two or three NPCs)."""

MAX_SLOTS = 64
"""The most ``slots`` a spec may ask for: each can hold a whole context's KV state."""

MIN_GAIN = 16
"""Tokens a parked state must save over sequence 0 to be put back: a restore costs about what
evaluating a few tokens does."""

MIN_PARK = 64
"""A shorter state is not worth keeping: re-evaluating it costs less than holding it."""

log = get_logger("oamd.backends.llamacpp.kv_slots")


@dataclass(eq=False, slots=True)
class ParkedState:
    """Sequence 0's state as llama.cpp serialises it, and the tokens it holds."""

    tokens: tuple[int, ...]
    data: Any
    """A ctypes byte array: what ``llama_state_seq_set_data`` reads back."""

    @property
    def nbytes(self) -> int:
        return ctypes.sizeof(self.data)


Spill = Callable[[ParkedState], None]
"""Where a state dropped from memory goes (the cache directory), if anywhere."""

Unspill = Callable[[Sequence[int], int], ParkedState | None]
"""A state from the cache directory that shares more than ``n`` leading tokens with a prompt."""


class KvSlots:
    """The parked states of one loaded model (``llm``, a ``llama_cpp.Llama``)."""

    def __init__(
        self,
        llm: Any,
        slots: int = DEFAULT_SLOTS,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        spill: Spill | None = None,
        unspill: Unspill | None = None,
    ) -> None:
        self._llm = llm
        self._slots = max(0, slots)
        self._max_bytes = max(0, max_bytes)
        self._parked: list[ParkedState] = []
        """Least recently used first."""
        self._spill = spill
        self._unspill = unspill

    @property
    def parked(self) -> list[ParkedState]:
        return list(self._parked)

    def live_tokens(self) -> list[int]:
        llm = self._llm
        return [int(t) for t in llm.input_ids[: llm.n_tokens]]

    def recall(self, tokens: Sequence[int]) -> None:
        """Makes sequence 0 hold the longest beginning of ``tokens`` that any kept state holds,
        keeping the state it held when the step would overwrite most of it."""
        if not self._slots and self._unspill is None:
            return
        live = self.live_tokens()
        live_shared = shared_length(live, tokens)
        best: ParkedState | None = None
        best_shared = live_shared + MIN_GAIN - 1
        for state in self._parked:
            shared = shared_length(state.tokens, tokens)
            if shared > best_shared:
                best, best_shared = state, shared
        if best is None and self._unspill is not None:
            best = self._unspill(tokens, best_shared)
            if best is not None:
                best_shared = shared_length(best.tokens, tokens)
        overwrites = len(live) - live_shared >= max(MIN_PARK, len(live) // 2)
        if best is not None or overwrites:
            self.park()
        if best is not None:
            if best in self._parked:
                self._parked.remove(best)
            self._restore(best)

    def park(self) -> None:
        """Copies sequence 0's state into memory (a no-op for a short one, or with no slots)."""
        import llama_cpp

        llm = self._llm
        if llm.n_tokens < MIN_PARK or (not self._slots and self._spill is None):
            return
        tokens = tuple(self.live_tokens())
        size = llama_cpp.llama_state_seq_get_size(llm._ctx.ctx, 0)
        data = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(llm._ctx.ctx, data, size, 0) != size:
            return
        state = ParkedState(tokens, data)
        # a newer state of the same conversation replaces its older one
        kept = []
        for other in self._parked:
            if 2 * shared_length(other.tokens, tokens) > len(other.tokens):
                continue
            kept.append(other)
        kept.append(state)
        while kept and (len(kept) > self._slots or sum(k.nbytes for k in kept) > self._max_bytes):
            self._drop(kept.pop(0))
        self._parked = kept
        if debug_enabled():
            held = sum(k.nbytes for k in kept)
            log.debug(
                "kv_state_parked", tokens=len(tokens), bytes=size, held=len(kept), held_bytes=held
            )

    def _drop(self, state: ParkedState) -> None:
        if self._spill is not None:
            try:
                self._spill(state)
            except OSError as exc:  # a full or read-only cache directory loses a cache entry
                log.warning("kv_state_not_saved", error=str(exc))

    def _restore(self, state: ParkedState) -> None:
        import llama_cpp

        llm = self._llm
        llm._ctx.kv_cache_seq_rm(0, -1, -1)
        read = llama_cpp.llama_state_seq_set_data(
            llm._ctx.ctx, state.data, ctypes.sizeof(state.data), 0
        )
        if read == 0:  # refused (another model's state): start from an empty sequence
            llm._ctx.kv_cache_seq_rm(0, -1, -1)
            llm.n_tokens = 0
            log.warning("kv_state_refused", tokens=len(state.tokens))
            return
        count = len(state.tokens)
        llm.input_ids[:count] = state.tokens
        llm.n_tokens = count
        llm._requires_eval = True  # the context's logits are not this state's last token
        log.debug("kv_state_restored", tokens=count)

    def close(self) -> None:
        """Hands every kept state to ``spill`` (the daemon exits), most recent last."""
        if self._spill is None:
            self._parked = []
            return
        self.park()
        parked, self._parked = self._parked, []
        for state in parked:
            self._drop(state)

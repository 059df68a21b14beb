"""The envelope loop itself: one turn of a session on a text-only model (no tool-call API).

A decide step answers with ``{"action": "<tool>" | "respond", "arguments": {…}}``, read leniently,
its arguments coerced and validated against the tool's schema, with one repair that quotes the
problem; each round makes one call; an identical successful call made again means "reply now"
(unless ``dedupe_tool_calls`` is off); the round and call budgets then force the reply, a respond
step (streamed and cleaned) or a structured step (JSON, one repair). Where the backend constrains
decoding, decide, toolArguments and structured steps carry the schema to decode with. A failure
the turn's ``RetryPolicy`` retries repeats that one model step, never a tool, waiting through the
injected ``sleep``. The events, records and entries have the native loop's shapes; the caller
commits the entries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from oamd.agent.entries import RESPONSE, kind_of, prompt_entry, response_entry
from oamd.agent.envelope._calls import TurnCalls
from oamd.agent.envelope._fields import is_flat, write_fields
from oamd.agent.envelope._layout import StepLayout
from oamd.agent.envelope._parser import (
    NOT_AN_OBJECT,
    Invalid,
    Respond,
    argument_candidates,
    choose_arguments,
    join_problems,
    parse_envelope,
)
from oamd.agent.envelope._prompt import (
    Repair,
    arguments_task,
    decide_schema,
    decide_task,
    is_parameterless,
    respond_task,
    structured_task,
    system_text,
    tool_catalog,
)
from oamd.agent.envelope._reply import ReplyCleaner, ReplyDisplay, SentenceWatch, whole_sentences
from oamd.agent.events import (
    PartialValue,
    Step,
    StepStarted,
    TurnFailed,
    TurnResult,
    TurnUsage,
)
from oamd.agent.json_reader import (
    LenientJsonError,
    first_value,
    json_candidates,
    parse_lenient,
)
from oamd.agent.ports import TurnPeer
from oamd.agent.small import channel_candidates, chat_messages, chat_window, turn_facts
from oamd.agent.small.arguments import is_lookup, read_from_words, spells_out, unsaid_required
from oamd.agent.small.words import is_question
from oamd.agent.step import PartialEmitter, StepReading, prefill_step, read_step, score_step
from oamd.agent.tools import ToolDefinition
from oamd.agent.turn_spec import Labels, NoToolExecutor, TurnSpec
from oamd.backends.base import (
    ChatMessage,
    GenerationRequest,
    LanguageModel,
    Sampling,
)
from oamd.backends.scripted.turn_snapshot import TurnSnapshot, showing
from oamd.errors import InvalidRequest, ModelError
from oamd.jsonvalue import dumps_text

__all__ = ["STEP_KINDS", "prefill_system_text", "regenerate_reply", "run_envelope_turn"]

DECIDE, TOOL_ARGUMENTS, RESPOND, STRUCTURED = "decide", "toolArguments", "respond", "structured"
STEP_KINDS = (DECIDE, TOOL_ARGUMENTS, RESPOND, STRUCTURED)

STEP_TRIES = 2
"""Tries of a decide, toolArguments or structured step: the answer, then one repair."""

APPEND_ONLY_CHATTER_CHARS = 200
"""On an append-only model, how much text after a complete answer is read before the step is
cut (which ends its conversation): room for a closing remark, not for decoding to the limit."""

QUESTION_LOOKUP_LIFT = 1.25
"""Nats a lookup's reading gains over "just chat" when the message is a question: a question
is what a lookup answers, and SmolLM2-135M's channel put "Have you got any chain mail?" and
"What about Mara Quill, is she wanted?" 0.7–1.2 nats on the side of chat (the grounded set's
small talk sat 1.8–6 nats away)."""

SPELLED_ACT_LIFT = 3.0
"""Nats an act's reading gains over "just chat" when the words give each of its required amounts
and choices a value of their own (``spells_out``): SmolLM2-135M's channel put "Three of us need
to cross, no horses." 2.7 nats on the side of chat, with the booking's every field said."""

DECISION_TEMPERATURE = 0.0
"""Decide and toolArguments steps pick, they do not write: sample greedily."""

DECISION_MAX_TOKENS = 256
"""Output cap of decide and toolArguments steps; an envelope is short."""

_NO_JSON = "the answer did not contain JSON"


@dataclass(frozen=True, slots=True)
class _Chosen:
    tool: ToolDefinition
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Failed:
    tool: ToolDefinition | None
    """The tool the answer named, when it named one: the call is recorded as not made."""
    arguments: dict[str, Any]
    problem: str


_Outcome = _Chosen | _Failed | Respond


async def prefill_system_text(
    model: LanguageModel,
    instructions: str | None,
    tools: Sequence[ToolDefinition],
    *,
    user_label: str = "User",
    assistant_label: str = "Assistant",
) -> None:
    """Has a text-only model with a prefix cache evaluate the system text its turns will start
    with (instructions, context note, tool catalog: the same bytes the first step sends), so the
    first turn finds it cached (a ``prefill`` step, ``oamd.agent.step``). Best effort; does
    nothing on other models."""
    await model.settle_capabilities()
    capabilities = model.capabilities
    if capabilities.native_tools or not capabilities.prefix_cache:
        return
    if capabilities.compact_prompts and not capabilities.append_only_steps:
        system = (instructions or "").strip()  # the small-model layout sends no catalog
    else:
        system = system_text(instructions, tools, Labels(user_label, assistant_label))
    if system:
        await prefill_step(model, [ChatMessage("system", system)])


async def run_envelope_turn(
    spec: TurnSpec, peer: TurnPeer, sleep: Callable[[float], Awaitable[None]]
) -> TurnResult:
    """Runs the turn on a text-only model; ``peer.pace`` is awaited after each text event
    (``oamd.agent.stream``).

    Raises:
        ModelError: the model failed a step after its retries, or a structured answer stayed
            invalid after its repair (``generation_failed``).
        InvalidRequest: ``{"tool": name}`` names a tool the turn does not have.
    """
    return await _EnvelopeTurn(spec, peer, sleep).run()


async def regenerate_reply(
    spec: TurnSpec,
    result: TurnResult,
    sampling: Sampling,
    peer: TurnPeer,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> TurnResult:
    """The reply of a finished turn written again with ``sampling``: the same prompt, tool uses
    and layout, one respond step, its events to ``peer.emit`` (paced by ``peer.pace``); it calls
    no tools, whatever ``peer.execute`` is. The result keeps ``result``'s records, steps and usage, adds
    the new step's, and its entries end with the new reply (the caller commits them).

    Raises:
        ModelError: the model failed the step after its retries.
    """
    settings = replace(spec.settings, sampling=sampling)
    peer = replace(peer, execute=_REGENERATE_NO_TOOLS)
    turn = _EnvelopeTurn(replace(spec, settings=settings), peer, sleep)
    turn.entries[:] = [entry for entry in result.entries if kind_of(entry) != RESPONSE]
    turn.calls.records[:] = result.records
    turn.steps[:] = result.steps
    turn.usage = replace(result.usage)
    turn.rounds = max((step.completed_tool_rounds for step in result.steps), default=0)
    return await turn._respond_step()


_REGENERATE_NO_TOOLS = NoToolExecutor("a regenerated reply calls no tools")


class _EnvelopeTurn:
    def __init__(
        self, spec: TurnSpec, peer: TurnPeer, sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        emit = peer.emit
        self.spec = spec
        self.emit = emit
        self.sleep = sleep
        self.pace = peer.pace
        self.settings = spec.settings
        self.labels = Labels(spec.settings.user_label, spec.settings.assistant_label)
        capabilities = spec.model.capabilities
        self.small = capabilities.compact_prompts and not capabilities.append_only_steps
        """Small model: the chat layout of ``agent.small``, no catalog, free-text replies."""
        self.by_likelihood = self.small and capabilities.scores_text
        """Which tool (or none) is chosen from the model's likelihoods, not generated."""
        self.system = (
            (spec.instructions or "").strip()
            if self.small
            else system_text(spec.instructions, spec.tools, self.labels)
        )
        self.by_name = {t.name: t for t in spec.tools}
        self.constrained = spec.model.capabilities.constrained_json
        self.entries: list[dict[str, Any]] = [prompt_entry(spec.prompt)]
        if spec.watch is not None:
            spec.watch(self.entries)
        self.calls = TurnCalls(self.entries, spec.carried_records, self.labels, emit, peer.execute)
        self.steps: list[Step] = []
        self.usage = TurnUsage()
        self.rounds = 0
        self.display = ReplyDisplay(emit)
        self.layout = StepLayout(spec, self.system, self.labels, self.calls.lines)

    # ---- the turn ------------------------------------------------------------------------------

    async def run(self) -> TurnResult:
        try:
            return await self._run()
        except ModelError as error:
            # with what the failed run gathered, for a caller's retry
            raise TurnFailed(error, self.calls.records) from error

    async def _run(self) -> TurnResult:
        policy = self.spec.policy
        mode = policy.choice.mode
        enabled = [t for t in self.spec.tools if policy.enabled is None or t.name in policy.enabled]
        forced = None
        if mode == "tool":
            forced = self.by_name.get(policy.choice.name or "")
            if forced is None:
                raise InvalidRequest(
                    f"'toolChoice' names tool '{policy.choice.name}', which this turn does not have."
                )
        calls = 0
        replying = mode == "none" or (not enabled and forced is None)
        while not replying and self.rounds < policy.max_rounds and calls < policy.max_calls:
            first = self.rounds == 0
            if first and forced is not None:
                outcome = await self._arguments_step(forced)
            elif first and mode == "required" and len(enabled) == 1:
                outcome = await self._arguments_step(enabled[0])
            elif not enabled:
                break
            else:
                allow_respond = not (first and mode == "required")
                offered = enabled
                if self.small and not first:
                    # a small model asked again mostly picks the tool it just used, or another
                    # lookup with a guess for its text: after a round, only the acts not used
                    # yet are offered beside the reply (the order after the menu)
                    used = {record.call.name for record in self.calls.records}
                    offered = [
                        tool
                        for tool in enabled
                        if tool.name not in used and not is_lookup(tool.schema.generation)
                    ]
                    if not offered:
                        break
                outcome = await self._decide_step(offered, allow_respond)
            if isinstance(outcome, Respond):
                break
            if isinstance(outcome, _Failed):
                if outcome.tool is not None:
                    self.calls.reject(outcome.tool, outcome.arguments, outcome.problem)
                    self.rounds += 1
                break  # a failure that survived its repair ends the tool loop
            await self.calls.run(outcome.tool, outcome.arguments)
            self.rounds += 1
            calls += 1
        if self.spec.schema is not None:
            return await self._structured_step()
        return await self._respond_step()

    def _result(
        self, text: str, structured: Any = None, has_structured: bool = False
    ) -> TurnResult:
        return TurnResult(
            text=text,
            structured=structured,
            has_structured=has_structured,
            records=self.calls.records,
            usage=self.usage,
            steps=self.steps,
            entries=self.entries,
        )

    # ---- the steps -----------------------------------------------------------------------------

    async def _decide_step(self, tools: Sequence[ToolDefinition], allow_respond: bool) -> _Outcome:
        if self.small and allow_respond:
            # a call whose required closed fields the words do not hold would act on the
            # model's guess ("How much is the stew?" ordering ten), scored or decoded
            tools = [t for t in tools if not unsaid_required(t.schema.generation, self._said())]
            if not tools:
                return Respond()
        if self.by_likelihood:
            return await self._likely_step(tools, allow_respond)
        names = [t.name for t in tools]
        mode = "allowed" if allow_respond else "required"
        schema = decide_schema(tools, allow_respond) if self.constrained else None
        repair: Repair | None = None
        failure = _Failed(None, {}, NOT_AN_OBJECT)
        for attempt in range(STEP_TRIES):
            task = decide_task(tools, allow_respond, self.labels, self.spec.prompt, repair)
            if self.small:  # no catalog in the system text: the task carries it
                task = f"{tool_catalog(tools, self.labels)}\n\n{task}"
            request, trimmed = await self._request(DECIDE, task, schema)
            self._start(DECIDE, mode, names, trimmed, attempt > 0)
            text = await self._generate(request, stop_early=True)
            decision = parse_envelope(text, names, allow_respond)
            if isinstance(decision, Respond):
                return decision
            if isinstance(decision, Invalid):
                failure = _Failed(None, {}, decision.problem)
            else:
                tool = self.by_name[decision.tool]
                candidates = decision.candidates
                if self.small and tool.local is None:
                    # a small model's decoded fields, read again from what the user said
                    # (as in a toolArguments step): not the question, not the NPC's name
                    schema = tool.schema.generation
                    candidates = tuple(read_from_words(c, schema, self._said()) for c in candidates)
                arguments, problem = choose_arguments(tool.name, tool.schema, candidates)
                if problem is None:
                    if self.settings.dedupe_tool_calls and self.calls.repeats(tool, arguments):
                        return Respond()  # the same call again: the model has what it needs
                    return _Chosen(tool, arguments)
                failure = _Failed(tool, arguments, problem)
            repair = (failure.problem, text)
        return failure

    async def _likely_step(self, tools: Sequence[ToolDefinition], allow_respond: bool) -> _Outcome:
        """The decide step of a model that scores texts: the most likely reading of the user's
        message (``agent.small.channel_candidates``) picks the tool, or no tool; the arguments of
        a tool that takes some come from a toolArguments step."""
        said = self._said()
        options: list[ToolDefinition | None] = [*tools, None] if allow_respond else list(tools)
        window = chat_window(self.spec.history, trim=self.settings.trim_history)
        candidates = channel_candidates(
            self.system,
            window,
            self.spec.prompt,
            self._facts(),
            options,
            self.labels,
            self.spec.said,
        )
        mode = "allowed" if allow_respond else "required"
        self._start(DECIDE, mode, [t.name for t in tools], window.trimmed, False)
        scores = await score_step(
            self.spec.model, candidates, self.usage, self.settings.retry, self.sleep
        )
        lift = QUESTION_LOOKUP_LIFT if is_question(said) else 0.0

        def lifted_by(tool: ToolDefinition | None) -> float:
            if tool is None:
                return 0.0
            schema = tool.schema.generation
            if is_lookup(schema):
                return lift
            return SPELLED_ACT_LIFT if spells_out(schema, said) else 0.0

        lifted = [
            score + lifted_by(tool) for tool, score in zip(options, scores.logprobs, strict=True)
        ]
        tool = options[max(range(len(options)), key=lifted.__getitem__)]
        if tool is None:
            return Respond()
        outcome = await self._arguments_step(tool)
        if (
            isinstance(outcome, _Chosen)
            and self.settings.dedupe_tool_calls
            and self.calls.repeats(tool, outcome.arguments)
        ):
            return Respond()  # the same call again: the model has what it needs
        return outcome

    def _reply_stops(self) -> tuple[str, ...]:
        """Where a reply ends besides the model's end of message: the turn's own stops, else, in
        the small-model layout, a line the model starts for someone else (a small model writes the
        user's next line too: "The North Gate is open.\nUser: Please go ahead…")."""
        if self.settings.stop or not self.small:
            return self.settings.stop
        labels = dict.fromkeys(
            (self.labels.user, self.labels.assistant, "User", "Assistant")
        )  # in order, once each
        return tuple(f"\n{label}:" for label in labels)

    def _said(self) -> str:
        """What the user said this turn, without what the caller wrapped around it."""
        return self.spec.prompt if self.spec.said is None else self.spec.said

    def _facts(self) -> list[str]:
        """This turn's tool results as the small-model layout shows them."""
        return turn_facts(self.entries)

    async def _arguments_step(self, tool: ToolDefinition) -> _Outcome:
        if is_parameterless(tool.parameters):
            return _Chosen(tool, {})
        schema = tool.schema.generation if self.constrained else None
        repair: Repair | None = None
        failure = _Failed(tool, {}, NOT_AN_OBJECT)
        for attempt in range(STEP_TRIES):
            task = arguments_task(tool, self.labels, repair)
            request, trimmed = await self._request(TOOL_ARGUMENTS, task, schema)
            self._start(TOOL_ARGUMENTS, "required", [tool.name], trimmed, attempt > 0)
            text = await self._generate(request, stop_early=True)
            found = first_value(text)
            if isinstance(found, dict) and self.small and tool.local is None:
                found = read_from_words(found, tool.schema.generation, self._said())
            if isinstance(found, dict):
                candidates = argument_candidates(found, tool.name)
                arguments, problem = choose_arguments(tool.name, tool.schema, candidates)
                if problem is None:
                    return _Chosen(tool, arguments)
                failure = _Failed(tool, arguments, problem)
            else:
                failure = _Failed(tool, {}, NOT_AN_OBJECT)
            repair = (failure.problem, text)
        return failure

    async def _respond_step(self) -> TurnResult:
        plain = self._plain()
        task = (
            ""
            if plain or self.small
            else respond_task(self.labels, self.spec.prompt, bool(self.calls.records))
        )
        request, trimmed = await self._request(RESPOND, task, None, plain=plain)
        opening = self._opening()
        if opening:
            request = replace(request, reply_prefix=opening)
        self._start(RESPOND, "disallowed", [], trimmed, False)
        cleaner = ReplyCleaner(self.labels.assistant)
        # an opened line is the answer: the sentence it opens ends it (a small model's second
        # sentence after a fact is where it invents: "… the new moon is on June 21st")
        limit = 1 if opening else self.settings.max_sentences
        output_before = self.usage.output_tokens
        raw = await self._generate(
            request,
            on_text=lambda so_far: self.display.show(cleaner.visible(opening + so_far)),
            on_retry=self.display.restart,
            stop_when=SentenceWatch(limit) if limit else None,
        )
        text = cleaner.final(opening + _joined(opening, raw))
        cap = request.sampling.max_tokens
        if self.small and cap and self.usage.output_tokens - output_before >= cap:
            text = whole_sentences(text)  # cut by the output limit: end at its last sentence
        self.display.finish(text)
        self.entries.append(response_entry(text))
        return self._result(text)

    def _opening(self) -> str:
        """The words the reply starts with (``TurnSettings.reply_opening``), small layout only."""
        opening = self.settings.reply_opening
        if not self.small or opening is None:
            return ""
        return opening(self.calls.records).strip()

    async def _structured_step(self) -> TurnResult:
        schema = self.spec.schema
        assert schema is not None
        if self.by_likelihood and is_flat(schema.generation):
            return await self._fields_step()
        arrays = schema.generation.get("type") == "array"
        plain = self._plain()
        repair: Repair | None = None
        problem = _NO_JSON
        for attempt in range(STEP_TRIES):
            task = structured_task(
                schema.generation, self.labels, self.spec.prompt, plain=plain, repair=repair
            )
            request, trimmed = await self._request(STRUCTURED, task, schema.generation, plain=plain)
            self._start(STRUCTURED, "disallowed", [], trimmed, attempt > 0)
            partials = PartialEmitter(self.emit, arrays)
            text = await self._generate(request, on_text=partials, stop_early=True, arrays=arrays)
            value = _extract(text, arrays, scalar=_is_scalar(schema.generation))
            if value is not _NOTHING:
                ordered, problems = schema.accept(value)
                if not problems:
                    self.emit(PartialValue(ordered))
                    answer = dumps_text(ordered)
                    self.entries.append(response_entry(answer, ordered))
                    return self._result(answer, ordered, True)
                problem = f"the JSON does not match the required form: {join_problems(problems)}"
            else:
                problem = _NO_JSON
            repair = (problem, text)
        raise ModelError(
            "generation_failed",
            f"The structured answer stayed invalid after a repair attempt: {problem}.",
        )

    async def _fields_step(self) -> TurnResult:
        """A flat object written a value at a time (``_fields``): words as text, closed values
        by likelihood, the JSON around them the daemon's."""
        schema = self.spec.schema
        assert schema is not None
        task = structured_task(schema.generation, self.labels, self.spec.prompt, plain=False)
        request, trimmed = await self._request(STRUCTURED, task, None)
        self._start(STRUCTURED, "disallowed", [], trimmed, False)
        value = await write_fields(
            self.spec.model,
            request.messages,
            schema.generation,
            request,
            self.usage,
            self._generate,
        )
        ordered, problems = schema.accept(value)
        if problems:
            raise ModelError(
                "generation_failed",
                f"The structured answer does not match the required form: "
                f"{join_problems(problems)}.",
            )
        self.emit(PartialValue(ordered))
        answer = dumps_text(ordered)
        self.entries.append(response_entry(answer, ordered))
        return self._result(answer, ordered, True)

    # ---- model steps ---------------------------------------------------------------------------

    def _plain(self) -> bool:
        """A first request with nothing before it: the prompt is sent as it is."""
        if self.small:
            return False  # the small-model layout always sends the prompt as it is
        if self.layout.continues:
            return False
        return not self.spec.history and not self.calls.lines and bool(self.spec.prompt.strip())

    def _start(
        self, kind: str, mode: str, enabled: Sequence[str], trimmed: int, is_repair: bool
    ) -> None:
        step = Step(len(self.steps), self.rounds, mode, tuple(enabled), trimmed, kind, is_repair)
        self.steps.append(step)
        self.emit(StepStarted(step))

    async def _request(
        self, kind: str, task: str, schema: dict[str, Any] | None, *, plain: bool = False
    ) -> tuple[GenerationRequest, int]:
        if self.small:
            window = chat_window(self.spec.history, trim=self.settings.trim_history)
            messages = chat_messages(self.system, window, self.spec.prompt, self._facts(), task)
            trimmed = window.trimmed
        else:
            messages, trimmed = await self.layout.messages(task, plain)
        sampling = self.settings.sampling
        if kind in (DECIDE, TOOL_ARGUMENTS) and self.layout.thread is None:
            # a continued conversation keeps the sampling it was opened with: the turn's
            sampling = replace(
                sampling, temperature=DECISION_TEMPERATURE, max_tokens=DECISION_MAX_TOKENS
            )
        request = GenerationRequest(
            messages=messages,
            tools=[],
            tool_mode="none",
            schema=schema if self.constrained else None,
            sampling=sampling,
            kind=kind,
            stop=self._reply_stops() if kind == RESPOND else (),
        )
        return request, trimmed

    async def _generate(self, request: GenerationRequest, **options: Any) -> str:
        if self.layout.thread is not None:
            # stopping a step cancels it, and a cancelled conversation cannot go on: a model
            # that ends soon after its answer keeps the conversation; one that talks on is cut
            # (the next step starts afresh) rather than decoding to its output limit
            options["chatter_chars"] = APPEND_ONLY_CHATTER_CHARS
        reading = StepReading(pace=self.pace, **options)
        with showing(TurnSnapshot(self.spec.prompt, tuple(self.calls.outputs))):
            text = await read_step(
                self.spec.model, request, self.usage, reading, self.settings.retry, self.sleep
            )
        self.layout.answered(request.messages, text)
        return text


_NOTHING = object()


def _joined(opening: str, continuation: str) -> str:
    """The model's continuation of an opening: a word it starts without a space gets one (a
    tokenizer may put the space in the opening's last token)."""
    if opening and continuation[:1].isalnum() and opening[-1:].isalnum():
        return " " + continuation
    return continuation


def _is_scalar(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return isinstance(kind, str) and kind not in ("object", "array")


def _extract(text: str, arrays: bool, *, scalar: bool) -> Any:
    """A structured answer's JSON: the first object (or array); for a scalar schema, the value."""
    found = first_value(text, arrays=arrays)
    if found is not None:
        return found
    if not scalar:
        return _NOTHING
    try:
        return parse_lenient(json_candidates(text)[0].strip())
    except LenientJsonError:
        return _NOTHING

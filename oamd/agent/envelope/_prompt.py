"""What a text-only model reads at each step of the envelope loop, and what fits its input budget.

Laid out for the prefix cache: the system text (instructions + context note + the catalog of the
session's tools: names, descriptions, arguments) is the same bytes at every step and turn of a
session until a ``set*`` call; the conversation follows as labelled lines, then this turn's tool
uses, then a short per-step task naming the tools offered *now* (and the repair note). Each history
turn's lines are rendered once (``agent.history``); trimming drops whole oldest turns down to the
low-water mark, counting with the backend's tokenizer only once the estimate passes
``PRECISE_COUNT_SHARE`` of the budget, each turn once; it never drops the current turn or the last
history turn. The constrained-decoding schema of a decide step is built here too, beside the task
it answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from oamd.agent.entries import (
    PROMPT,
    RESPONSE,
    TOOL_CALLS,
    TOOL_OUTPUT,
    calls_of,
    has_structured,
    kind_of,
    output_of,
    structured_of,
    text_of,
)
from oamd.agent.history import History, Window
from oamd.agent.schema import envelope_example, render_fields, render_inline
from oamd.agent.tools import MAX_TOOL_OUTPUT_CHARS, ToolDefinition, ToolOutput
from oamd.agent.turn_spec import Labels
from oamd.backends.base import estimate_tokens
from oamd.jsonvalue import dumps_text

__all__ = [
    "arguments_task",
    "decide_schema",
    "decide_task",
    "entry_lines",
    "fit_window",
    "history_window",
    "is_parameterless",
    "render_body",
    "respond_task",
    "structured_task",
    "system_text",
    "tool_line",
]

MAX_MESSAGE_CHARS = 300
"""The user's last message quoted in a task is cut here, followed by ``…``."""

MAX_ECHO_CHARS = 240
"""The previous answer quoted in a repair note is cut here, followed by ``…``."""

PRECISE_COUNT_SHARE = 0.6
"""Above this share of the budget (by the chars/4 estimate) the backend's tokenizer counts."""

MIN_RECENT_TURNS = 1
"""History turns trimming always keeps."""

REPAIR_MARKER = "Your previous answer was invalid: "

_RESPOND_SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}
_PARAMETERLESS_BLOCKERS = ("anyOf", "oneOf", "allOf", "$ref", "enum", "const", "items")

Repair = tuple[str, str]
"""The problem with the previous answer, and that answer."""


def tool_catalog(tools: Sequence[ToolDefinition], labels: Labels) -> str:
    """Every tool of the session, each with its description and arguments, and the rules of a
    decide step, as the model reads them; which tools a step offers is the task's business."""
    a, u = labels.assistant, labels.user
    lines = [f"{a} can use these tools:"]
    for tool in tools:
        description = tool.description.strip() or "(no description)"
        lines.append(
            f"- {tool.name}: {description} Arguments: {render_inline(tool.schema.generation)}"
        )
    lines.append(
        f"When asked what {a} does next, answer with one JSON object and nothing else: "
        '{"action": "<tool name>", "arguments": {…}} to use a tool, or, when allowed, '
        f'{{"action": "respond", "arguments": {{}}}} to reply to {u} without one. Use a tool only '
        f"if {u}'s last message needs its information or asks for what it does. Choose respond "
        "for small talk, or when the conversation and the tool results in [brackets] already "
        "have what is needed."
    )
    return "\n".join(lines)


def system_text(instructions: str | None, tools: Sequence[ToolDefinition], labels: Labels) -> str:
    """Instructions (with the context note), then the tool catalog: stable bytes for the cache."""
    parts = [text for text in ((instructions or "").strip(),) if text]
    if tools:
        parts.append(tool_catalog(tools, labels))
    return "\n\n".join(parts)


def tool_line(name: str, arguments: dict[str, Any], output: ToolOutput) -> str:
    """``[check_menu → {"stew":3}]``, ``[take_order {"item":"stew"} → Error: out of stew]``"""
    args = f" {dumps_text(arguments)}" if arguments else ""
    text = output.model_text.strip()
    if len(text) > MAX_TOOL_OUTPUT_CHARS:
        text = text[:MAX_TOOL_OUTPUT_CHARS] + "… (truncated)"
    return f"[{name}{args} → {text}]"


def _structured_line(value: Any) -> str:
    """``key: value; key2: value2`` (strings unquoted): small models copy raw JSON objects."""
    if not isinstance(value, dict):
        return dumps_text(value)
    return "; ".join(f"{k}: {v if isinstance(v, str) else dumps_text(v)}" for k, v in value.items())


def entry_lines(entries: Sequence[dict[str, Any]], labels: Labels) -> list[str]:
    """Transcript entries as the lines the model reads: ``User: …``, ``Assistant: …`` and one
    ``[tool {args} → output]`` line per tool output (its arguments found by call id)."""
    arguments: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    for entry in entries:
        kind = kind_of(entry)
        if kind == PROMPT:
            lines.append(f"{labels.user}: {text_of(entry).strip()}")
        elif kind == RESPONSE:
            shown = (
                _structured_line(structured_of(entry))
                if has_structured(entry)
                else text_of(entry).strip()
            )
            lines.append(f"{labels.assistant}: {shown}")
        elif kind == TOOL_CALLS:
            for call in calls_of(entry):
                arguments[call.id] = call.arguments
        elif kind == TOOL_OUTPUT:
            out = output_of(entry)
            lines.append(tool_line(out.name, arguments.get(out.call_id, {}), out.output))
    return lines


def history_window(history: History, labels: Labels) -> Window:
    """The history turns a step may send, each as its lines (rendered once per turn)."""

    def render(entries: Sequence[dict[str, Any]]) -> tuple[tuple[str, ...], int]:
        lines = tuple(entry_lines(entries, labels))
        return lines, estimate_tokens("\n".join(lines))

    return history.window(("lines", labels), render)


def _last_message(prompt: str) -> str:
    text = " ".join(prompt.split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "…"


def render_body(
    history_lines: Sequence[str],
    prompt: str,
    tool_lines: Sequence[str],
    task: str,
    labels: Labels,
    *,
    plain: bool,
) -> str:
    """The user text: just the prompt (and a structured task) on a plain first request, else
    ``Conversation:``, the history lines, the prompt line, this turn's tool uses, a blank line
    and the task."""
    if plain:
        return prompt.strip() + (f"\n\n{task}" if task else "")
    lines = ["Conversation:", *history_lines]
    if prompt.strip():
        lines.append(f"{labels.user}: {prompt.strip()}")
    lines.extend(tool_lines)
    return "\n".join(lines) + "\n\n" + task


def _with_repair(task: str, repair: Repair | None) -> str:
    if repair is None:
        return task
    problem, previous = repair
    echo = " ".join(previous.split())
    if len(echo) > MAX_ECHO_CHARS:
        echo = echo[:MAX_ECHO_CHARS] + "…"
    problem = problem if problem.endswith(".") else problem + "."
    return (
        f"{task}\n{REPAIR_MARKER}{problem}\nPrevious answer: {echo}\n"
        "Answer again, correctly, in the form asked for above."
    )


def decide_task(
    tools: Sequence[ToolDefinition],
    allow_respond: bool,
    labels: Labels,
    prompt: str,
    repair: Repair | None = None,
) -> str:
    """Which of the catalog's tools this step offers, the question, and the answer's form; the
    rules themselves are in the system text, so this stays short."""
    a, u = labels.assistant, labels.user
    names = ", ".join(tool.name for tool in tools)
    if allow_respond:
        lines = [f"Tools {a} can use now: {names}. {a} can also respond."]
    else:
        lines = [f"{a} must use one of the tools now: {names}."]
    if prompt.strip():
        lines.append(f'{u}\'s last message: "{_last_message(prompt)}"')
    example = envelope_example(tools[0].name, tools[0].schema.generation)
    alternative = ' or {"action": "respond", "arguments": {}}' if allow_respond else ""
    lines.append(
        f"What does {a} do next? Answer with one JSON object, like {example}{alternative}."
    )
    return _with_repair("\n".join(lines), repair)


def arguments_task(tool: ToolDefinition, labels: Labels, repair: Repair | None = None) -> str:
    description = tool.description.strip().removesuffix(".")
    about = f" ({description})" if description else ""
    text = (
        f"{labels.assistant} calls the tool {tool.name}{about}.\n"
        "Write its arguments as one JSON object with these keys:\n"
        f"{render_fields(tool.schema.generation)}\n"
        "Answer with the JSON object only."
    )
    return _with_repair(text, repair)


def respond_task(labels: Labels, prompt: str, tools_ran: bool) -> str:
    a, u = labels.assistant, labels.user
    target = f"{a}'s reply to {u}'s last message" if prompt.strip() else f"{a}'s next reply"
    # Never mention the bracketed tool lines here: models echoed them when it did.
    facts = ", using the facts from the tool results above in your own words" if tools_ran else ""
    return f"Write {target}{facts}.\nAnswer with only what {a} says."


def structured_task(
    schema: dict[str, Any],
    labels: Labels,
    prompt: str,
    *,
    plain: bool,
    repair: Repair | None = None,
) -> str:
    a, u = labels.assistant, labels.user
    fields = render_fields(schema)
    keyed = fields.startswith("- ")
    shape = "one JSON object with these keys:" if keyed else "JSON of this form:"
    if plain:
        first = f"Answer with {shape}"
    elif prompt.strip():
        # Quoting the message and asking for a *new* reply stops copying of the previous one.
        first = (
            f"Write {a}'s new reply to {u}'s last message (\"{_last_message(prompt)}\") as {shape}"
        )
    else:
        first = f"Write {a}'s next reply as {shape}"
    closing = "Answer with the JSON object only." if keyed else "Answer with the JSON only."
    return _with_repair(f"{first}\n{fields}\n{closing}", repair)


def is_parameterless(parameters: dict[str, Any]) -> bool:
    """Whether a tool takes no arguments at all, so it can run without an arguments step."""
    if parameters.get("type", "object") != "object":
        return False
    if parameters.get("properties"):
        return False
    return not any(k in parameters for k in _PARAMETERLESS_BLOCKERS)


def _hoisted(generation: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """A tool's schema ready to nest: its ``$defs`` moved into ``defs`` under ``prefix``, and
    its references (``#`` included) rewritten to match."""
    own = generation.get("$defs") or {}
    names = {name: f"{prefix}_{name}" for name in own}
    root_name = f"{prefix}_root"
    uses_root = False

    def rebase(node: Any) -> Any:
        nonlocal uses_root
        if isinstance(node, list):
            return [rebase(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                if value == "#":
                    uses_root = True
                    value = f"#/$defs/{root_name}"
                elif value.startswith("#/$defs/") and value[len("#/$defs/") :] in names:
                    value = f"#/$defs/{names[value[len('#/$defs/') :]]}"
                out[key] = value
            else:
                out[key] = rebase(value)
        return out

    body = rebase({k: v for k, v in generation.items() if k != "$defs"})
    for name, definition in own.items():
        defs[names[name]] = rebase(definition)
    if uses_root:
        defs[root_name] = body
    return body


def _branch(action: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": [action]}, "arguments": arguments},
        "required": ["action", "arguments"],
        "x-order": ["action", "arguments"],
        "additionalProperties": False,
    }


def decide_schema(tools: Sequence[ToolDefinition], allow_respond: bool) -> dict[str, Any]:
    """The envelope a constrained decide step must produce: one branch per offered tool (its
    ``action`` the tool's name, its ``arguments`` the tool's schema), plus ``respond`` when
    allowed, so one step yields a complete, valid call."""
    defs: dict[str, Any] = {}
    branches = [
        _branch(tool.name, _hoisted(tool.schema.generation, f"tool{i}", defs))
        for i, tool in enumerate(tools)
    ]
    if allow_respond:
        branches.append(_branch("respond", dict(_RESPOND_SCHEMA)))
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
    return {**schema, "$defs": defs} if defs else schema


async def fit_window(
    window: Window,
    system: str,
    rest: str,
    budget: int,
    count: Callable[[str], Awaitable[int]],
) -> None:
    """Fits ``window`` to ``budget`` tokens next to the system text and the rest of the body
    (``rest``: prompt, tool uses, task). Small prompts are never counted; past
    ``PRECISE_COUNT_SHARE`` of the budget the backend's tokenizer counts each history turn once
    in its life and the fixed part at every step."""
    fixed = estimate_tokens(system) + estimate_tokens(rest)
    if not window.turns or fixed + window.tokens <= PRECISE_COUNT_SHARE * budget:
        return
    await window.count_with(count)
    fixed = await count(system) + await count(rest)
    window.fit(fixed, budget, min_turns=MIN_RECENT_TURNS)

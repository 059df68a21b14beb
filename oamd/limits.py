"""Every limit of the protocol and of the daemon, as a named constant with the error past it."""

from __future__ import annotations

__all__ = [
    "AUTH_TIMEOUT_SECONDS",
    "DEFAULT_TOOL_TIMEOUT_SECONDS",
    "DRAIN_SECONDS",
    "INSPECT_MAX_HEAD_BYTES",
    "INSPECT_MAX_PAGE_CONNECTIONS",
    "INSPECT_MESSAGE_CHARS",
    "INSPECT_OUTPUT_CHARS",
    "INSPECT_PAGE_QUEUE_EVENTS",
    "INSPECT_PROMPT_CHARS",
    "INSPECT_STEPS_KEPT",
    "INSPECT_SUBJECTS_KEPT",
    "INSPECT_TURNS_KEPT",
    "INSPECT_WORLD_CHANGES_KEPT",
    "MAX_CONCURRENT_GENERATIONS",
    "MAX_CONNECTIONS",
    "MAX_CONNECTION_BYTES",
    "MAX_DECISIONS",
    "MAX_DECISION_CONCURRENCY",
    "MAX_DECISION_OPTIONS",
    "MAX_EMBEDDED_JSON_DEPTH",
    "MAX_ID_CHARS",
    "MAX_IN_FLIGHT_REQUESTS",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_NPCS",
    "MAX_OUTBOX_BYTES",
    "MAX_PENDING_AUTH",
    "MAX_PREAUTH_LINE_BYTES",
    "MAX_QUEUED_OPERATIONS",
    "MAX_RECORDED_SECONDS",
    "MAX_RECORDING_BYTES",
    "MAX_RECORDING_FILE_BYTES",
    "MAX_REPLAYED_OVERSIZED_BYTES",
    "MAX_SAFE_INTEGER",
    "MAX_SCRIPT_CHUNKS",
    "MAX_SESSIONS",
    "MAX_STEP_TEXT_CHARS",
    "MAX_SUBSCRIPTIONS",
    "MAX_TIMEOUT_SECONDS",
    "MAX_TOOLS",
    "MAX_TOOL_NAME_CHARS",
    "MAX_WORLDS",
    "MAX_WORLD_BYTES",
    "OUTBOX_HIGH_WATER_BYTES",
    "PEER_STALL_SECONDS",
    "PROTOCOL_VERSION",
    "RECOMMENDED_MAX_TOOLS",
    "RECORDING_WRITE_SECONDS",
    "SHUTDOWN_GRACE_SECONDS",
    "WRITE_GRACE_SECONDS",
]

PROTOCOL_VERSION = "1.0"
"""The bridge protocol version served; ``initialize`` with another major version fails -32602."""

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest numeric request id in magnitude; beyond it (or non-finite) the message fails -32600."""

MAX_JSON_DEPTH = 128
"""Deepest nesting of arrays and objects in one input line. A deeper line is answered -32600
(``invalid_message``, id ``null``, ``data.limit``) and nothing in it reaches a handler, so every
value the daemon is given (params, tool outputs, ``tool/call`` replies, world values, schemas,
scripts) stays well within what its recursive code and its encoder handle."""

MAX_EMBEDDED_JSON_DEPTH = 64
"""Deepest nesting of JSON written inside a string: a model's output, a schema or tool parameters
passed as text. Half the line limit, so a value read from such text still fits, with the messages
around it (a ``tool/call``, a saved transcript), in a line a client can send back; deeper text is
not JSON to the daemon (a model's answer is then repaired or fails like any unreadable one)."""

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Default longest input line; a longer one is skipped unread and answered -32600
(``--max-line-bytes``)."""

MAX_SESSIONS = 64
"""Live sessions per connection; ``session/create`` beyond it fails -32022 ``session_limit``."""

MAX_NPCS = 128
"""Live NPCs per connection; ``npc/create`` beyond it fails -32055 ``limit_reached``."""

MAX_WORLDS = 64
"""Live worlds per connection; ``world/create`` beyond it fails -32055 ``limit_reached``."""

MAX_WORLD_BYTES = 4 * 1024 * 1024
"""The most compact JSON one world holds (each write counts every key it creates on the way); a
create or change past it fails -32055 ``limit_reached`` (``data.limit``) and changes nothing. A
world is a game's shared blackboard, not its database."""

MAX_CONNECTION_BYTES = 256 * 1024 * 1024
"""About the most a connection may hold (``--max-connection-bytes``), counted as JSON: every
session's history, instructions, context note, tools, model spec and options; every NPC's history,
persona, options, memory, client tools and model spec; every world document (a deleted one while
an NPC uses it); and the params of operations still queued or running. A request that would pass
it fails -32055 ``limit_reached`` (``data.limit``) and changes nothing, checked when read (a
create by what it creates, a queued operation or bark by its params, held until it ends), when a
turn or ``npc/update`` commits (by what it adds beyond its params) and when a world grows.
Reading, deleting, resetting, compacting and cancelling always work."""

MAX_IN_FLIGHT_REQUESTS = 1024
"""Requests one connection may have waiting for an answer (queued turns included); one more is
answered -32055 ``limit_reached`` (``data.limit``) at once. Cheap requests (``ping``, ``*/list``,
``world/get``…) are answered as they are read and never count."""

MAX_SUBSCRIPTIONS = 256
"""Live world subscriptions per connection; beyond it ``world/subscribe`` fails -32055."""

MAX_QUEUED_OPERATIONS = 64
"""Operations (turns, resets, restores…) queued or running on one session or NPC; one more fails
-32055 ``limit_reached`` (``data.limit``) without taking a place in line."""

MAX_DECISION_OPTIONS = 64
"""Options of one decision; more fail -32055 ``limit_reached`` (``data.limit``) before any is
read. Every option goes into the decision's prompt and its answer's enum, as a tool does."""

MAX_DECISIONS = 256
"""Decisions one ``decision/decideMany`` takes (``requests``); more fail -32055 ``limit_reached``
(``data.limit``) before any is parsed. A crowd is at most ``MAX_NPCS`` characters; each decision
costs a parse, a task and a result, so an unbounded list held hundreds of MiB and the loop for
seconds."""

MAX_DECISION_CONCURRENCY = 16
"""Most decisions of one ``decision/decideMany`` running at once: a larger ``maxConcurrency`` is
served as this many (the reference takes any integer ≥ 1; a smaller one fails -32602). A model
largely serialises generations, so more only queues inside it."""

MAX_ID_CHARS = 128
"""Longest session/NPC/world id; longer ids fail -32602."""

MAX_TOOL_NAME_CHARS = 64
"""Longest tool name (``A–Z a–z 0–9 _ - .``); longer names fail -32602."""

MAX_TOOLS = 64
"""Tools one session or NPC takes, an NPC's built-in world and memory tools included; more fail
-32055 ``limit_reached`` (``data.limit``). Every tool goes into every prompt, so even this many
only fits a large context."""

RECOMMENDED_MAX_TOOLS = 5
"""More tools than this in one session or NPC produce a warning (Apple recommends 3–5)."""

MAX_TIMEOUT_SECONDS = 86400.0
"""Largest ``…TimeoutSeconds`` value (one day); larger, negative or non-finite fail -32602."""

DEFAULT_TOOL_TIMEOUT_SECONDS = 120.0
"""Time the engine has to answer a ``tool/call`` unless the session or tool says otherwise."""

SHUTDOWN_GRACE_SECONDS = 2.0
"""How long ``shutdown`` (and end of input) waits for cancelled work to send its error responses."""

WRITE_GRACE_SECONDS = 2.0
"""How long the last writes of a closing connection may take before they are abandoned."""

OUTBOX_HIGH_WATER_BYTES = 1 << 20
"""Bytes waiting to be written above which a connection stops reading until they are written."""

MAX_OUTBOX_BYTES = 64 * 1024 * 1024
"""Bytes waiting, behind a write in progress, for a peer that does not read (``--max-outbox-bytes``);
past it the peer is cut off: a socket client is disconnected, and ``oamd stdio`` takes its parent
for gone (as when stdout breaks: everything is cancelled and it exits 141)."""

PEER_STALL_SECONDS = 10.0
"""How long a streaming turn waits for a peer that takes nothing while more than
``OUTBOX_HIGH_WATER_BYTES`` wait for it. A peer that reads slowly paces the turn; one that stops
reading for this long no longer holds it (or the model slot it streams from): its output then piles
up until ``MAX_OUTBOX_BYTES`` cuts it off."""

MAX_STEP_TEXT_CHARS = 1 << 20
"""Most characters one model step may stream (about 250,000 tokens, past any model's output
limit); a step that streams more fails ``-32012 generation_failed``, whatever the backend."""

MAX_SCRIPT_CHUNKS = 1 << 20
"""Most pieces a scripted step's ``chunks`` asks for (one per character of the longest text a
step may stream); more is ``-32602`` naming ``model.steps[i].chunks``."""

MAX_CONNECTIONS = 16
"""``oamd serve``: clients served at once (``--max-connections``); one more gets a single -32055
``limit_reached`` error line and is disconnected."""

MAX_CONCURRENT_GENERATIONS = 4
"""``oamd serve``: model generations running at once across all clients (``--max-generations``);
the rest wait, and free slots go to the waiting clients in turn."""

AUTH_TIMEOUT_SECONDS = 3.0
"""``oamd serve``: how long a client that must authenticate may take to send its ``initialize``
before it is disconnected (``--auth-timeout``). Short: a client sends it right after connecting."""

MAX_PENDING_AUTH = 8
"""``oamd serve``: connections that have yet to authenticate, held apart from
``--max-connections`` (``--max-pending-auth``). When one more arrives the oldest of them is
dropped, so peers that connect and send nothing can never keep a token holder out."""

MAX_PREAUTH_LINE_BYTES = 64 * 1024
"""``oamd serve``: longest line before a client has authenticated (its ``initialize`` needs a few
hundred bytes); a longer one is refused like any other wrong first message."""

DRAIN_SECONDS = 5.0
"""``oamd serve``: on SIGTERM/SIGINT, how long cancelled turns may take to answer and connections
to flush before the daemon exits anyway."""

MAX_RECORDING_BYTES = 64 * 1024 * 1024
"""What one connection's recording (``--record``) may hold: its lines both ways and its model
steps. Past it nothing more is kept, the file says ``"truncated": true`` and ``oamd replay``
refuses it (a recording that stops halfway cannot be played back)."""

MAX_RECORDING_FILE_BYTES = 4 * MAX_RECORDING_BYTES
"""The largest file ``oamd replay`` reads: a recording's ``MAX_RECORDING_BYTES`` written as JSON
(escapes, base64, layout) with room to spare. A larger file is refused (exit 2) unread."""

MAX_RECORDED_SECONDS = 366 * 86400.0
"""Latest time (``at``, ``clientClosedAt``, seconds into the connection) a recording may state;
``oamd replay`` refuses a file with a later, negative or non-finite one (exit 2). A client line
waits at most ``MAX_TIMEOUT_SECONDS`` of its recorded pause (no daemon wait is longer)."""

MAX_REPLAYED_OVERSIZED_BYTES = 1024 * 1024 * 1024
"""The most bytes the oversized lines of one recording may stand for together: the replay sends
each again at its recorded size (from one reused piece, never allocated whole), so this bounds its
time. A recording past it is refused (exit 2)."""

RECORDING_WRITE_SECONDS = 30.0
"""How long writing a closed connection's recording may take (in a worker thread) before the
daemon stops waiting for it: a shutdown is not held up by a slow disk for longer."""

INSPECT_TURNS_KEPT = 20
"""``--inspect``: the turns the inspector keeps per session, per NPC and per connection for the
turns that have neither (decisions, content); an older one is forgotten as a new one starts."""

INSPECT_SUBJECTS_KEPT = 256
"""``--inspect``: sessions and NPCs per connection whose turns are kept (those of deleted ones
too, until this many more have run turns since)."""

INSPECT_STEPS_KEPT = 32
"""``--inspect``: model steps kept per turn; later ones are counted, not kept."""

INSPECT_MESSAGE_CHARS = 4000
"""``--inspect``: characters kept of each prompt message and tool output; the rest is cut (the
record says how much)."""

INSPECT_PROMPT_CHARS = 24000
"""``--inspect``: characters kept of one step's whole prompt: its first message (the system text)
and its last messages up to this; the messages between are counted, not kept."""

INSPECT_OUTPUT_CHARS = 8000
"""``--inspect``: characters kept of a step's raw output and of a turn's answer."""

INSPECT_WORLD_CHANGES_KEPT = 64
"""``--inspect``: a connection's most recent world changes kept (all its worlds together)."""

INSPECT_PAGE_QUEUE_EVENTS = 1024
"""``--inspect``: live events waiting for one page's event stream (a few hundred bytes each; at
the fastest, scripted turns make about 4,000 a second); a page that falls this far behind is
disconnected (it reconnects and reloads) rather than slowing the daemon."""

INSPECT_MAX_PAGE_CONNECTIONS = 16
"""``--inspect``: HTTP connections the inspector serves at once; one more is answered 503."""

INSPECT_MAX_HEAD_BYTES = 16 * 1024
"""``--inspect``: longest request head (request line, headers and the blank line after them) the
page server reads; a longer one is answered 431 and its connection closed."""

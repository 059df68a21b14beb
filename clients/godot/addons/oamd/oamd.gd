## The `Oamd` autoload: a client of the oamd daemon, which speaks the open-apple-models bridge
## protocol v1.0 (JSON-RPC 2.0, one JSON object per line).
##
## Two transports, one API: `spawn()` runs the shipped executable as a child process over stdio,
## `connect_to_daemon()` reaches a running `oamd serve --tcp` with its token. Either way the client
## sends `initialize` first, holds back requests made before it is answered, answers the daemon's
## `tool/call` requests from `tool_handlers`, honours `tool/cancel` and turns notifications into
## signals. Everything except the stdio pipe reads runs on the main thread from `_process`.
##
## Godot parses every JSON number as a float: response ids are turned back into ints here, but
## numbers inside results and events stay floats (`int()` them where an int is meant).
extends Node

## `initialize` succeeded; `result` is its result (server, capabilities, model).
signal connected(result: Dictionary)
## The daemon could not be started or reached, or refused `initialize` (wrong token, too many
## clients). `error` is a JSON-RPC error object.
signal connection_failed(error: Dictionary)
## The connection closed after `connected` (the child exited, the socket closed, `close()`).
signal disconnected
## Every notification from the daemon, before the specific signals below.
signal notification_received(method: String, params: Dictionary)
## A `session/event` notification (streamed text, tool activity) of a turn.
signal session_event(session: String, request_id: Variant, event: Dictionary)
## An `npc/event` notification of an NPC turn.
signal npc_event(npc: String, request_id: Variant, event: Dictionary)
## The whole line an NPC has said so far in the streamed turn `request_id` (`npc/talk` with
## `stream: true`), after `npc_event`: a `lineDelta` appends its `delta`, a `lineReset` replaces
## the line with its own (the daemon took the streamed words back). Show `line` as it is; the
## turn's `result.line` is what stands. Not emitted for a turn started by `notify` (no id).
signal npc_line_changed(npc: String, request_id: int, line: String)
## A `world/changed` notification of a `world/subscribe` subscription.
signal world_changed(world: String, subscription: String, params: Dictionary)
## The daemon no longer needs the output of the tool call `call_id` (`tool/cancel`); its handler's
## answer will not be sent. `params` holds `requestId`, `reason` and the session or NPC.
signal tool_cancelled(call_id: String, params: Dictionary)
## The reply to request `id`: `message` holds `result` or `error`.
signal response_received(id: int, message: Dictionary)
## A line the spawned daemon wrote on stderr (its log).
signal log_received(line: String)
## Each `model/availability` answer `wait_for_model` reads: `status` (`downloading` while the
## model is fetched, with `bytesDownloaded` and `totalBytes` once known), `detail`, `available`.
signal model_progress(availability: Dictionary)

enum State { CLOSED, CONNECTING, INITIALIZING, READY }

const Lines := preload("oamd_lines.gd")
const StdioTransport := preload("oamd_stdio.gd")
const TcpTransport := preload("oamd_tcp.gd")

## What `spawn()` runs: `executable_path`, these, then the caller's `args`
## (`tests/test_godot_addon.py` runs the same command line).
const STDIO_ARGS := ["stdio"]
const PROTOCOL_VERSION := "1.0"
## How long `close()` lets a spawned daemon exit after `shutdown` before killing it.
const SHUTDOWN_GRACE_MSEC := 500
## The folder holding the executable: `res://oamd/` in the project, `oamd/` beside an export.
const EXECUTABLE_DIR := "oamd"

## Tool name -> Callable(arguments, call_params) returning the tool's output: any JSON value, or a
## Dictionary with `output` (and `isError: true` to report a failure) sent as the result as is.
## The Callable may `await`. A tool without a handler is answered with `isError`.
var tool_handlers: Dictionary = {}
## Sent as `initialize`'s `client.name`.
var client_name := "godot"

var _state := State.CLOSED
var _transport: RefCounted
var _lines := Lines.new()
var _log_lines := Lines.new()
var _next_id := 1
var _init_id := -1
var _token := ""
var _held: Array[Dictionary] = []  # messages made before `initialize` was answered
var _pending := {}  # request id -> true until its reply
var _running_tools := {}  # callId -> cancelled?
var _npc_lines := {}  # request id -> the line its npc/event line events add up to so far


func _init() -> void:
	process_mode = Node.PROCESS_MODE_ALWAYS  # a paused game still gets its tool calls answered


## Where `spawn()` looks for the daemon by default: `res://oamd/oamd` (`oamd.exe` on Windows)
## turned into a filesystem path when run from the editor, and `oamd/oamd` next to the game's
## executable in an export (res:// is inside the .pck there, and a .pck cannot hold a program).
static func default_executable() -> String:
	var file := "oamd.exe" if OS.get_name() == "Windows" else "oamd"
	if OS.has_feature("editor"):
		return ProjectSettings.globalize_path("res://%s/%s" % [EXECUTABLE_DIR, file])
	return OS.get_executable_path().get_base_dir().path_join(EXECUTABLE_DIR).path_join(file)


## Reads the token written by `oamd serve` (the ready line's `tokenFile`).
static func read_token(path: String) -> String:
	return FileAccess.get_file_as_string(path).strip_edges()


## Runs the daemon as a child process (`oamd stdio`, then `args`) and connects over its stdio.
## `connected` or `connection_failed` follows; the child is shut down and killed by `close()`,
## which runs when the game quits.
func spawn(executable_path := "", args: Array = []) -> Error:
	close()
	var path := executable_path if not executable_path.is_empty() else default_executable()
	var transport := StdioTransport.new()
	var error := transport.open(path, _spawn_arguments(args))
	_start(transport, "", error)
	return error


## Connects to `oamd serve --tcp HOST:PORT`; `token` is the content of its token file.
## `connected` or `connection_failed` follows.
func connect_to_daemon(host: String, port: int, token: String) -> Error:
	close()
	var transport := TcpTransport.new()
	var error := transport.open(host, port)
	_start(transport, token, error)
	return error


## Sends `shutdown` (once `connected`), then ends the connection: a spawned daemon gets
## SHUTDOWN_GRACE_MSEC to exit, then is killed; one still starting is killed at once. Requests
## still waiting are answered with a `connection_closed` error.
func close() -> void:
	if _transport == null:
		return
	var grace_msec := 0  # a daemon not told to shut down will not exit by itself
	if _state == State.READY:
		_write({"jsonrpc": "2.0", "id": _take_id(), "method": "shutdown"})
		grace_msec = SHUTDOWN_GRACE_MSEC
	_transport.close(grace_msec)
	_finish({})


func is_ready() -> bool:
	return _state == State.READY


func get_state() -> State:
	return _state


## Sends a request and returns its id; the reply arrives through `response_received`. Requests
## made before `initialize` is answered are held and sent right after it.
func request(method: String, params: Dictionary = {}) -> int:
	var id := _take_id()
	_pending[id] = true
	_send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return id


## Sends a notification (no reply), e.g. `session/cancel` without waiting.
func notify(method: String, params: Dictionary = {}) -> void:
	_send({"jsonrpc": "2.0", "method": method, "params": params})


## Sends a request and waits for its reply message (`{"result": ...}` or `{"error": ...}`).
func call_method(method: String, params: Dictionary = {}) -> Dictionary:
	var id := request(method, params)
	while true:
		var reply: Array = await response_received
		if reply[0] == id:
			return reply[1]
	return {}


## `session/create`; `extra` adds `options`, `model`, `history`... as PROTOCOL.md names them.
func session_create(
	session: String, instructions := "", tools: Array = [], extra: Dictionary = {}
) -> Dictionary:
	var params := {"session": session, "tools": tools}
	if not instructions.is_empty():
		params["instructions"] = instructions
	params.merge(extra, true)
	return await call_method("session/create", params)


## `session/respond`; `extra` adds `stream`, `schema`, `toolChoice`, `maxToolRounds`...
func session_respond(session: String, prompt: String, extra: Dictionary = {}) -> Dictionary:
	var params := {"session": session, "prompt": prompt}
	params.merge(extra, true)
	return await call_method("session/respond", params)


## `npc/create`; `persona` needs at least `name`; `extra` adds `tools`, `world`, `memory`...
func npc_create(npc: String, persona: Dictionary, extra: Dictionary = {}) -> Dictionary:
	var params := {"npc": npc, "persona": persona}
	params.merge(extra, true)
	return await call_method("npc/create", params)


## `npc/talk`: the player says `line` ("" for nothing); `extra` adds `context`, `stream`...
func npc_talk(npc: String, line: String, extra: Dictionary = {}) -> Dictionary:
	var params := {"npc": npc, "line": line}
	params.merge(extra, true)
	return await call_method("npc/talk", params)


## `decision/decide`: picks one of `options` (ids, or `{id, description}`) for `situation`.
func decide(situation: Variant, options: Array, extra: Dictionary = {}) -> Dictionary:
	var params := {"situation": situation, "options": options}
	params.merge(extra, true)
	return await call_method("decision/decide", params)


func world_create(world: String, state: Dictionary = {}) -> Dictionary:
	return await call_method("world/create", {"world": world, "state": state})


## `world/get` of a dot path ("player.gold"; "" is the root).
func world_get(world: String, path := "") -> Dictionary:
	return await call_method("world/get", {"world": world, "path": path})


func world_set(world: String, path: String, value: Variant) -> Dictionary:
	return await call_method("world/set", {"world": world, "path": path, "value": value})


## `world/subscribe`: changes under `path` arrive through `world_changed`.
func world_subscribe(world: String, path := "") -> Dictionary:
	return await call_method("world/subscribe", {"world": world, "path": path})


## Asks `model/availability` every `poll_seconds` until the daemon's model can be used, emitting
## `model_progress` with each answer, and returns the last reply: `{"result": availability}`
## (`available` true, or the status that ended the wait) or `{"error": …}`. It asks again while
## `status` is `downloading`, and once after `downloadable` (a failed download, which the next
## check starts again: `--model llamacpp:NAME?pull=on-request` fetches a catalog model when
## asked); anything else (`unavailable`, a second `downloadable`) ends the wait. Every number in
## `availability` is a float, as everywhere in Godot's JSON.
func wait_for_model(poll_seconds := 1.0) -> Dictionary:
	var retried := false
	while true:
		var reply: Dictionary = await call_method("model/availability")
		if not reply.has("result"):
			return reply
		var availability: Dictionary = reply["result"]
		model_progress.emit(availability)
		if not _polls_again(availability, retried):
			return reply
		retried = retried or availability.get("status") == "downloadable"
		await get_tree().create_timer(poll_seconds).timeout
	return {}


## True once the daemon cancelled the tool call `call_id` (`call_params["call"]["id"]`): a long
## handler can stop early; its answer is dropped anyway.
func is_tool_call_cancelled(call_id: String) -> bool:
	return _running_tools.get(call_id, false)


func _process(_delta: float) -> void:
	# A signal handler may close() or spawn() again: whatever this transport still holds is
	# then no one's, so each step checks that the connection is still the one it started with.
	var transport := _transport
	if transport == null:
		return
	_emit_log()
	if _transport != transport:
		return
	var data: PackedByteArray = transport.poll()
	if _state == State.CONNECTING and transport.is_open():
		_state = State.INITIALIZING
		_init_id = _take_id()
		var params := {"protocolVersion": PROTOCOL_VERSION, "client": {"name": client_name}}
		if not _token.is_empty():
			params["auth"] = _token
		_write({"jsonrpc": "2.0", "id": _init_id, "method": "initialize", "params": params})
	for line in _lines.feed(data):
		_handle_line(line)
		if _transport != transport:
			return
	if transport.is_closed():
		var reason: String = transport.failure()
		transport.close(0)  # joins a spawned daemon's reader threads
		_emit_log(true)  # its last words (often why it exited) arrive after stdout's end
		if _transport != transport:
			return
		if reason.is_empty():
			reason = "The daemon closed the connection."
		_finish(_error("connection_closed", reason))


# Never leave a spawned daemon running after the game: the window's close button, then the
# autoload leaving the tree on quit (whichever comes first; the second finds nothing to do).
func _notification(what: int) -> void:
	if what == NOTIFICATION_WM_CLOSE_REQUEST:
		close()


func _exit_tree() -> void:
	close()


# Emits the complete lines the daemon wrote on stderr; `last` also ends an unterminated tail.
func _emit_log(last := false) -> void:
	if not _transport.has_method("poll_log"):
		return
	var data: PackedByteArray = _transport.poll_log()
	if last:
		data.append(Lines.NEWLINE)
	for line in _log_lines.feed(data):
		log_received.emit(line)


static func _spawn_arguments(args: Array) -> PackedStringArray:
	var argv := PackedStringArray(STDIO_ARGS)
	for arg in args:
		argv.append(str(arg))
	return argv


# Godot parses every number as a float; the daemon echoes integral ids as plain digits.
static func _normal_id(id: Variant) -> Variant:
	if typeof(id) == TYPE_FLOAT and id == floorf(id):
		return int(id)
	return id


# `wait_for_model`'s rule: ask again while the model downloads, and once after a failed download.
static func _polls_again(availability: Dictionary, retried: bool) -> bool:
	if availability.get("available", false):
		return false
	var status = availability.get("status", "")
	return status == "downloading" or (status == "downloadable" and not retried)


# The line an NPC's turn shows after `event`: `lineDelta` appends, `lineReset` replaces.
static func _folded_line(shown: String, event: Dictionary) -> String:
	match event.get("type"):
		"lineDelta":
			return shown + str(event.get("delta", ""))
		"lineReset":
			return str(event.get("line", ""))
	return shown


static func _error(code: String, message: String) -> Dictionary:
	return {"code": 0, "message": message, "data": {"code": code}}


func _start(transport: RefCounted, token: String, error: Error) -> void:
	_lines.clear()
	_log_lines.clear()
	_token = token
	_transport = transport
	_state = State.CONNECTING
	if error != OK:
		_finish(_error("connection_failed", transport.failure()))


func _take_id() -> int:
	var id := _next_id
	_next_id += 1
	return id


func _send(message: Dictionary) -> void:
	match _state:
		State.READY:
			_write(message)
		State.CONNECTING, State.INITIALIZING:
			_held.append(message)
		_:
			if message.has("id"):  # deferred: the caller has not reached its `await` yet
				_fail_request.call_deferred(message["id"])


func _write(message: Dictionary) -> void:
	_transport.write((JSON.stringify(message) + "\n").to_utf8_buffer())


func _fail_request(id: int) -> void:
	_pending.erase(id)
	var error := _error("connection_closed", "Not connected to the daemon.")
	response_received.emit(id, {"jsonrpc": "2.0", "id": id, "error": error})


func _handle_line(text: String) -> void:
	var message = JSON.parse_string(text)
	if not message is Dictionary:
		return
	var params = message.get("params")
	if not params is Dictionary:
		params = {}
	if message.has("method"):
		if message.has("id"):
			_answer(_normal_id(message["id"]), str(message["method"]), params)
		else:
			_dispatch(str(message["method"]), params)
		return
	var id = _normal_id(message.get("id"))
	if typeof(id) != TYPE_INT:
		return  # an error about a line with no usable id
	if id == _init_id and _state == State.INITIALIZING:
		_on_initialized(message)
		return
	_pending.erase(id)
	_npc_lines.erase(id)  # the turn is over: its result.line stands
	response_received.emit(id, message)


func _on_initialized(message: Dictionary) -> void:
	if message.has("error"):
		_transport.close(0)
		_finish(message["error"])
		return
	_state = State.READY
	var held := _held
	_held = []
	for waiting in held:
		_write(waiting)
	connected.emit(message.get("result", {}))


func _dispatch(method: String, params: Dictionary) -> void:
	notification_received.emit(method, params)
	var request_id = _normal_id(params.get("requestId"))
	match method:
		"session/event":
			session_event.emit(str(params.get("session", "")), request_id, params.get("event", {}))
		"npc/event":
			var npc := str(params.get("npc", ""))
			var event = params.get("event", {})
			npc_event.emit(npc, request_id, event)
			if typeof(request_id) == TYPE_INT and event is Dictionary and event.has("type"):
				if event["type"] in ["lineDelta", "lineReset"]:
					var line := _folded_line(_npc_lines.get(request_id, ""), event)
					_npc_lines[request_id] = line
					npc_line_changed.emit(npc, request_id, line)
		"world/changed":
			world_changed.emit(
				str(params.get("world", "")), str(params.get("subscription", "")), params
			)
		"tool/cancel":
			var call_id := str(params.get("callId", ""))
			if _running_tools.has(call_id):
				_running_tools[call_id] = true
			tool_cancelled.emit(call_id, params)


func _answer(id: Variant, method: String, params: Dictionary) -> void:
	if method != "tool/call":
		var error := _error("method_not_found", "Unknown method '%s'." % method)
		error["code"] = -32601
		_send({"jsonrpc": "2.0", "id": id, "error": error})
		return
	var transport := _transport  # the answer belongs to this connection only
	var call: Dictionary = params.get("call", {})
	var tool_name := str(call.get("name", ""))
	var call_id := str(call.get("id", ""))
	var result := {}
	if tool_handlers.has(tool_name):
		_running_tools[call_id] = false
		var output = await tool_handlers[tool_name].call(call.get("arguments", {}), params)
		if output is Dictionary and output.has("output"):
			result = output
		else:
			result = {"output": output}
	else:
		result = {"output": "The game has no tool named '%s'." % tool_name, "isError": true}
	if _transport != transport:
		return  # the connection ended meanwhile; `_running_tools` may hold a new one's calls
	var cancelled: bool = _running_tools.get(call_id, false)
	_running_tools.erase(call_id)
	if not cancelled and _state == State.READY:  # a cancelled call's answer is not wanted
		_send({"jsonrpc": "2.0", "id": id, "result": result})


# Every way a connection ends: a failed start, a refused initialize, end of input, close().
func _finish(error: Dictionary) -> void:
	var was := _state
	_state = State.CLOSED
	_transport = null
	_held.clear()
	_running_tools.clear()
	_npc_lines.clear()
	var closed := _error("connection_closed", "The connection to the daemon closed.")
	for id in _pending.keys():
		_pending.erase(id)
		response_received.emit(id, {"jsonrpc": "2.0", "id": id, "error": closed})
	if was == State.READY:
		disconnected.emit()
	elif was != State.CLOSED:
		connection_failed.emit(error if not error.is_empty() else closed)

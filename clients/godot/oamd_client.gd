## A Godot 4 autoload that speaks the oamd bridge protocol (JSON-RPC 2.0, one JSON object per line)
## to a running `oamd serve --tcp 127.0.0.1:PORT` over StreamPeerTCP.
##
## It sends `initialize` with the daemon's token as `auth` first, answers the daemon's `tool/call`
## requests with the handlers registered in `tool_handlers`, and turns notifications into signals.
## Everything runs on the main thread from `_process`; nothing blocks.
extends Node

## `initialize` succeeded; `result` is its result (server, capabilities, model).
signal connected(result: Dictionary)
## The daemon refused the connection (wrong token, too many clients) or it could not be reached.
signal connection_failed(error: Dictionary)
## The connection closed after it had been established.
signal disconnected
## Any notification from the daemon (`session/event`, `world/changed`, `tool/cancel`...).
signal notification_received(method: String, params: Dictionary)
## A `session/event` notification's event, with its session and request id.
signal session_event(session: String, request_id: Variant, event: Dictionary)
## A response to a request sent with `request()`; `message` holds `result` or `error`.
signal response_received(id: int, message: Dictionary)

## Tool name -> Callable(arguments: Dictionary, call_params: Dictionary) returning the tool's output
## (a String or any JSON value). The Callable may `await`. A missing tool answers with `isError`.
var tool_handlers: Dictionary = {}

var _peer := StreamPeerTCP.new()
var _status := StreamPeerTCP.STATUS_NONE
var _buffer := PackedByteArray()
var _next_id := 1
var _init_id := -1
var _token := ""
var _client_name := "godot"


## Starts connecting; `connected` or `connection_failed` follows.
func connect_to_daemon(host: String, port: int, token: String, client_name := "godot") -> Error:
	_token = token
	_client_name = client_name
	_buffer.clear()
	_status = StreamPeerTCP.STATUS_NONE
	return _peer.connect_to_host(host, port)


## Reads the token written by `oamd serve` (the ready line's `tokenFile`).
static func read_token(path: String) -> String:
	return FileAccess.get_file_as_string(path).strip_edges()


func close() -> void:
	_peer.disconnect_from_host()
	_status = StreamPeerTCP.STATUS_NONE


func is_ready() -> bool:
	return _status == StreamPeerTCP.STATUS_CONNECTED and _init_id == 0


## Sends a request and returns its id; the reply arrives through `response_received`.
func request(method: String, params: Dictionary = {}) -> int:
	var id := _next_id
	_next_id += 1
	_send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return id


## Sends a request and waits for its reply message (`{"result": ...}` or `{"error": ...}`).
func call_method(method: String, params: Dictionary = {}) -> Dictionary:
	var id := request(method, params)
	while true:
		var reply: Array = await response_received
		if reply[0] == id:
			return reply[1]
	return {}


func _process(_delta: float) -> void:
	_peer.poll()
	var status := _peer.get_status()
	if status != _status:
		var previous := _status
		_status = status
		if status == StreamPeerTCP.STATUS_CONNECTED:
			_peer.set_no_delay(true)
			_init_id = request(
				"initialize",
				{"protocolVersion": "1.0", "client": {"name": _client_name}, "auth": _token}
			)
		elif status == StreamPeerTCP.STATUS_ERROR:
			connection_failed.emit({"message": "cannot connect to the daemon"})
		elif previous == StreamPeerTCP.STATUS_CONNECTED:
			disconnected.emit()
	if status != StreamPeerTCP.STATUS_CONNECTED:
		return
	var available := _peer.get_available_bytes()
	if available > 0:
		var got: Array = _peer.get_partial_data(available)
		if got[0] == OK:
			_buffer.append_array(got[1])
			_read_lines()


func _read_lines() -> void:
	var newline := _buffer.find(10)
	while newline >= 0:
		var text := _buffer.slice(0, newline).get_string_from_utf8()
		_buffer = _buffer.slice(newline + 1)
		if not text.strip_edges().is_empty():
			var message = JSON.parse_string(text)
			if message is Dictionary:
				_handle(message)
		newline = _buffer.find(10)


func _handle(message: Dictionary) -> void:
	if message.has("method"):
		var params: Dictionary = message.get("params", {})
		if message.has("id"):
			_answer(message["id"], message["method"], params)
		else:
			notification_received.emit(message["method"], params)
			if message["method"] == "session/event":
				session_event.emit(
					params.get("session", ""), params.get("requestId"), params.get("event", {})
				)
		return
	var id = message.get("id")
	if typeof(id) == TYPE_FLOAT:
		id = int(id)  # Godot parses every JSON number as a float
	if typeof(id) != TYPE_INT:
		return  # e.g. an error about a line we sent that had no valid id
	if id == _init_id:
		if message.has("error"):
			connection_failed.emit(message["error"])
			close()
			return
		_init_id = 0
		connected.emit(message.get("result", {}))
		return
	response_received.emit(id, message)


func _answer(id: Variant, method: String, params: Dictionary) -> void:
	if method != "tool/call":
		_send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Unknown method."}})
		return
	var call: Dictionary = params.get("call", {})
	var name: String = call.get("name", "")
	var result := {}
	if tool_handlers.has(name):
		var output = await tool_handlers[name].call(call.get("arguments", {}), params)
		result = {"output": output}
	else:
		result = {"output": "The game has no tool named '%s'." % name, "isError": true}
	_send({"jsonrpc": "2.0", "id": id, "result": result})


func _send(message: Dictionary) -> void:
	if _peer.get_status() == StreamPeerTCP.STATUS_CONNECTED:
		_peer.put_data((JSON.stringify(message) + "\n").to_utf8_buffer())

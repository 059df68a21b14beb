## TCP transport: a `StreamPeerTCP` to a running `oamd serve --tcp 127.0.0.1:PORT`.
##
## Everything happens in `poll()` on the main thread; a socket read never blocks. Godot's
## `StreamPeerUDS` only exists in newer builds, so loopback TCP is the portable choice.
extends RefCounted

var _peer := StreamPeerTCP.new()
var _status := StreamPeerTCP.STATUS_NONE
var _failure := ""


func open(host: String, port: int) -> Error:
	var error := _peer.connect_to_host(host, port)
	_status = _peer.get_status()
	if error != OK:
		_failure = "cannot connect to %s:%d (%s)" % [host, port, error_string(error)]
	return error


## Bytes received since the last call (empty when nothing arrived).
func poll() -> PackedByteArray:
	_peer.poll()
	var status := _peer.get_status()
	if status == StreamPeerTCP.STATUS_CONNECTED and _status != status:
		_peer.set_no_delay(true)  # one small line per message; don't let Nagle hold it back
	_status = status
	if _status == StreamPeerTCP.STATUS_ERROR and _failure.is_empty():
		_failure = "cannot connect to the daemon"
	if _status != StreamPeerTCP.STATUS_CONNECTED:
		return PackedByteArray()
	var available := _peer.get_available_bytes()
	if available <= 0:
		return PackedByteArray()
	var got: Array = _peer.get_partial_data(available)
	return got[1] if got[0] == OK else PackedByteArray()


func is_open() -> bool:
	return _status == StreamPeerTCP.STATUS_CONNECTED


func is_closed() -> bool:
	return _status == StreamPeerTCP.STATUS_NONE or _status == StreamPeerTCP.STATUS_ERROR


## Why the transport never opened, or "".
func failure() -> String:
	return _failure


func write(data: PackedByteArray) -> void:
	if _peer.get_status() == StreamPeerTCP.STATUS_CONNECTED:
		_peer.put_data(data)


## The caller sends `shutdown` first when it can; the daemon cancels the connection's work anyway
## when the socket closes, so there is nothing to wait for.
func close(_grace_msec: int) -> void:
	_peer.disconnect_from_host()
	_status = StreamPeerTCP.STATUS_NONE

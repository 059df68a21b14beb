## stdio transport: runs the shipped `oamd` executable as a child process
## (`OS.execute_with_pipe`, Godot 4.3+) and speaks to it over its stdin and stdout.
##
## The pipes are opened blocking, the only mode Godot 4.3 has: a read waits until the child writes
## something, so one thread per output pipe (stdout, stderr) reads it and hands the bytes to the
## main thread under a mutex; `poll()` takes them from `_process`. Blocking also suits writes: in
## Godot 4.4's non-blocking mode a line longer than the pipe's buffer (64 KiB) would be cut short
## without telling how much was written. stderr is read too, or the child would stall once that
## pipe's buffer filled with log lines.
extends RefCounted

## One read returns what is in the pipe, up to this many bytes.
const CHUNK_BYTES := 65536
## How long `close` waits for a reader thread after the child is gone before leaving it behind.
const JOIN_MSEC := 1000

var pid := -1

var _stdio: FileAccess
var _stderr: FileAccess
var _mutex := Mutex.new()
var _out := PackedByteArray()
var _err := PackedByteArray()
var _out_ended := false
var _out_reader: Thread
var _err_reader: Thread
var _failure := ""
var _closed := false


## Starts `path` with `arguments`; `failure()` says why when it returns an error.
func open(path: String, arguments: PackedStringArray) -> Error:
	if not FileAccess.file_exists(path):
		_failure = "no oamd executable at %s" % path
		return ERR_FILE_NOT_FOUND
	var info := OS.execute_with_pipe(path, arguments)
	if info.is_empty():
		_failure = "cannot start %s" % path
		return ERR_CANT_CREATE
	_stdio = info["stdio"]
	_stderr = info["stderr"]
	pid = info["pid"]
	_out_reader = Thread.new()
	_out_reader.start(_read_pipe.bind(_stdio, true))
	_err_reader = Thread.new()
	_err_reader.start(_read_pipe.bind(_stderr, false))
	return OK


## Bytes the child wrote on stdout since the last call (empty when nothing arrived).
func poll() -> PackedByteArray:
	_mutex.lock()
	var data := _out
	_out = PackedByteArray()
	_mutex.unlock()
	return data


## The child's stderr (its log) since the last call.
func poll_log() -> PackedByteArray:
	_mutex.lock()
	var data := _err
	_err = PackedByteArray()
	_mutex.unlock()
	return data


func is_open() -> bool:
	return pid > 0 and not _closed and not is_closed()


## True once the child closed its stdout (it exited) and every byte was handed over by `poll`.
func is_closed() -> bool:
	_mutex.lock()
	var ended := _out_ended and _out.is_empty()
	_mutex.unlock()
	return ended or _closed or (pid <= 0 and not _failure.is_empty())


func failure() -> String:
	return _failure


func write(data: PackedByteArray) -> void:
	# A write to a child that has exited would raise SIGPIPE; ask first.
	if is_open() and OS.is_process_running(pid):
		_stdio.store_buffer(data)  # blocks only while the child is behind reading


## Waits up to `grace_msec` for the child to exit on its own (the caller sent `shutdown`), kills
## it otherwise, then joins the reader threads, which end at the pipes' end of file.
func close(grace_msec: int) -> void:
	if pid <= 0 or _closed:
		return
	_closed = true
	var deadline := Time.get_ticks_msec() + grace_msec
	while OS.is_process_running(pid) and Time.get_ticks_msec() < deadline:
		OS.delay_msec(5)
	if OS.is_process_running(pid):
		OS.kill(pid)
	var joined := _join(_out_reader) and _join(_err_reader)
	if joined:  # closing a pipe another thread still reads from would race with that read
		_stdio.close()
		_stderr.close()


func _join(thread: Thread) -> bool:
	var deadline := Time.get_ticks_msec() + JOIN_MSEC
	while thread.is_alive() and Time.get_ticks_msec() < deadline:
		OS.delay_msec(5)
	if thread.is_alive():
		# A grandchild still holds the pipe open; Godot detaches a Thread dropped unfinished.
		push_warning("oamd: a pipe reader did not end; leaving it behind")
		return false
	thread.wait_to_finish()
	return true


# Runs on a reader thread: each read blocks until the child writes, and returns what is there.
# An empty read is the end of file (the child exited or closed the pipe).
func _read_pipe(pipe: FileAccess, is_stdout: bool) -> void:
	while true:
		var chunk := pipe.get_buffer(CHUNK_BYTES)
		_mutex.lock()
		if is_stdout:
			_out.append_array(chunk)
			_out_ended = chunk.is_empty()
		else:
			_err.append_array(chunk)
		_mutex.unlock()
		if chunk.is_empty():
			return

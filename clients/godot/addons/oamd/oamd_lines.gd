## Line framing of the bridge protocol: bytes in, complete lines out.
##
## A pipe or socket read returns whatever arrived, so a message may be split across reads and one
## read may hold several messages; the tail without its newline waits for the next `feed`.
extends RefCounted

## Longer lines are dropped instead of growing the buffer without end (the daemon's own limit).
const MAX_LINE_BYTES := 16 * 1024 * 1024
const NEWLINE := 10
const CARRIAGE_RETURN := 13

var _pending := PackedByteArray()
var _skipping := false


## Appends `data` and returns the complete lines it finished, decoded from UTF-8, in order.
## Blank lines are skipped.
func feed(data: PackedByteArray) -> PackedStringArray:
	var lines := PackedStringArray()
	var start := 0
	var newline := data.find(NEWLINE)
	while newline >= 0:
		var line := _pending + data.slice(start, newline)
		_pending.clear()
		if not _skipping and line.size() > 0:
			if line[line.size() - 1] == CARRIAGE_RETURN:
				line = line.slice(0, line.size() - 1)
			var text := line.get_string_from_utf8()
			if not text.strip_edges().is_empty():
				lines.append(text)
		_skipping = false
		start = newline + 1
		newline = data.find(NEWLINE, start)
	if not _skipping:
		_pending.append_array(data.slice(start))
		if _pending.size() > MAX_LINE_BYTES:
			_pending.clear()
			_skipping = true
	return lines


## Forgets a partial line (after a reconnect the old tail belongs to nothing).
func clear() -> void:
	_pending.clear()
	_skipping = false

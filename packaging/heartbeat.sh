#!/usr/bin/env bash
# heartbeat.sh WHAT COMMAND...: runs COMMAND, printing "  ... WHAT: N min" to stderr each minute it
# is still running, so a long quiet step (pip compiling llama.cpp) shows it is alive. Exits with
# COMMAND's status.
set -u
what=$1
shift
"$@" &
pid=$!
(
	minutes=0
	while sleep 60; do
		minutes=$((minutes + 1))
		echo "  ... $what: $minutes min" >&2
	done
) &
beat=$!
wait "$pid"
status=$?
kill "$beat" 2>/dev/null
wait "$beat" 2>/dev/null
exit "$status"

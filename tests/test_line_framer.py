"""The line framer on its own: the lines it returns, its limit, and that it is linear in the bytes
it is fed (a line dribbled in small writes must not be re-copied at every write)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from oamd.transport.framing import LineFramer, OversizedLine


class CopyCountingBuffer(bytearray):
    """A pending buffer that counts the bytes copied out of it with ``bytes(...)``."""

    copied = 0

    def __bytes__(self) -> bytes:
        CopyCountingBuffer.copied += len(self)
        return bytes(memoryview(self))


def feed_all(framer: LineFramer, chunks: list[bytes]) -> list[bytes | OversizedLine]:
    out: list[bytes | OversizedLine] = []
    for chunk in chunks:
        out.extend(framer.feed(chunk))
    return out


def test_a_line_dribbled_in_small_writes_is_copied_once():
    framer = LineFramer(1 << 20)
    framer._pending = CopyCountingBuffer()  # type: ignore[misc]
    CopyCountingBuffer.copied = 0
    line = b"x" * 200_000
    chunks = [line[i : i + 64] for i in range(0, len(line), 64)] + [b"\n"]
    assert feed_all(framer, chunks) == [line]
    # re-copying the pending bytes at each of the 3,125 writes would copy ~312 MB
    assert CopyCountingBuffer.copied <= len(line)


def test_an_unfinished_line_past_the_limit_is_dropped_while_it_streams():
    framer = LineFramer(1000)
    for _ in range(100):
        assert framer.feed(b"y" * 100) == []
        assert framer.pending <= 1000
    assert framer.feed(b"tail\nnext\n") == [OversizedLine(10_004), b"next"]
    assert framer.pending == 0


def test_the_limit_can_be_raised_between_feeds():
    framer = LineFramer(10)
    assert framer.feed(b"short\n" + b"z" * 8) == [b"short"]
    framer.limit = 100
    assert framer.feed(b"z" * 50 + b"\n") == [b"z" * 58]


def test_crlf_is_stripped_from_a_line_that_spans_writes():
    framer = LineFramer(100)
    assert feed_all(framer, [b"ab", b"c\r", b"\nd\r\n"]) == [b"abc", b"d"]


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
    limit=st.integers(min_value=1, max_value=60),
)
def test_any_split_of_the_stream_gives_the_same_lines(lines, cuts, limit):
    stream = b"".join(line + b"\n" for line in lines)
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    expected: list[bytes | OversizedLine] = []
    for line in lines:
        if len(line) > limit:
            expected.append(OversizedLine(len(line)))
        else:
            expected.append(line[:-1] if line.endswith(b"\r") else line)
    assert feed_all(LineFramer(limit), chunks) == expected


def test_at_end_of_input_an_unfinished_last_line_is_a_line():
    framer = LineFramer(10)
    assert framer.feed(b"one\ntwo\r") == [b"one"]
    assert framer.finish() == [b"two"]
    assert framer.finish() == []  # it was handed out once
    assert framer.feed(b"three\n") == [b"three"]
    assert framer.finish() == []  # the input ended with its newline: nothing more
    framer.feed(b"y" * 11)
    assert framer.finish() == [OversizedLine(11)]

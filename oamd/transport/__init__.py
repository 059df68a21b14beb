"""Transports: bytes in and out of a connection, split into lines. Nothing about JSON-RPC.

Every transport hands the RPC layer an ``anyio.abc.ByteStream``; ``LineFramer`` splits what it
receives into lines, enforcing the longest line allowed without buffering an oversized one.
"""

from oamd.transport.framing import LineFramer, OversizedLine
from oamd.transport.memory import memory_stream_pair
from oamd.transport.stdio import stdio_stream

__all__ = ["LineFramer", "OversizedLine", "memory_stream_pair", "stdio_stream"]

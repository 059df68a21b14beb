"""Minimal MCP server on the MCP Python SDK's own stdio transport, for ``ping_throughput.py``.

It is the SDK's idiomatic high-level server (``MCPServer``, the v2 name of ``FastMCP``)
with nothing registered: ``ping`` is answered by the SDK's built-in handler. A client
sends ``initialize`` and then ``notifications/initialized`` before its pings (see
``_harness.MCP_HANDSHAKE``); the SDK exempts ``ping`` from the initialization gate, but
the bench does the full handshake so every ping takes the normal post-handshake path.

Run as ``python bench/mcp_server.py``; it serves until stdin reaches EOF.
"""

from __future__ import annotations

from mcp.server import MCPServer


def main() -> None:
    """Serve MCP over stdin/stdout until EOF."""
    MCPServer("oamd-bench-mcp").run("stdio")


if __name__ == "__main__":
    main()

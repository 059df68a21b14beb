"""The HTTP connections to one OpenAI-compatible server, each in an httpx pool of its own, so that
hundreds of steps at once (a game voicing hundreds of NPCs against vLLM or a llama.cpp server
farm) cost each request the bookkeeping of one connection, not of hundreds.

``oamd.backends.openai.model`` owns the exchange and admits at most its ``max_in_flight`` chat
completions at once, first come first served; this module is the transport under its
``httpx.AsyncClient``, opened for that many requests and the probe. Guarantees: while no more
requests run than the capacity, none waits inside httpcore; a request takes the connection freed
last (the likeliest still open: keep-alive), and opens one only when none is free; a
connection is given back when its response is closed, however it ends. At most the capacity of
connections stay open (an idle one the server closed is reopened by its next request).

Why not one httpx pool as large as the capacity: httpcore 1.0's pool runs a pass over all its
connections whenever a request starts or ends, and that pass costs, for each idle connection, a
count of every connection and a poll of its socket (encode/httpcore#1035); it also hands an idle
connection to every request that arrives before the first one sends on it, and all but one
fail and pass again. Measured with 256 connections: a burst of 256 requests on a warm pool took
8.6 to 10.8 s (4.5 to 6.7 s of CPU), against 0.5 to 0.7 s in pools of eight; pools of one run
two passes a request, each over one connection. Past its limit a pool hands a freed connection
to every waiting request at once: the thundering herd that made 256 sessions over httpx's
default 100 connections take 8 to 14 times the ideal.

And httpcore asks for ``sniffio`` on every lock, event and semaphore it makes; without sniffio
installed (anyio 4.11 and later no longer bring it) each ask is a failed import that scans
``sys.path`` (encode/httpcore#1103): about half a millisecond of CPU, several times a request.
Importing this module records it as absent once, which makes each ask immediate.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable

import httpx

__all__ = ["ServerConnections"]

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # type: ignore[assignment]  # Python's "known absent" mark

_ONE_CONNECTION = httpx.Limits(max_connections=1, max_keepalive_connections=1)


class _Released(httpx.AsyncByteStream):
    """A response body that gives its connection back when it is closed (once)."""

    def __init__(self, body: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._body = body
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._body:
            yield part

    async def aclose(self) -> None:
        try:
            await self._body.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class ServerConnections(httpx.AsyncBaseTransport):
    """Up to ``capacity`` connections, each in a pool of its own; a request takes the one
    freed last (its connection the likeliest still open), or opens one more."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._opened: list[httpx.AsyncHTTPTransport] = []
        self._free: list[httpx.AsyncHTTPTransport] = []
        """Pools with no request, the one freed last at the end."""
        self._ssl = httpx.create_ssl_context()  # once: each pool of its own would load the CAs

    def _take(self) -> tuple[httpx.AsyncHTTPTransport, bool]:
        if self._free:
            return self._free.pop(), True
        if len(self._opened) < self._capacity:
            pool = httpx.AsyncHTTPTransport(verify=self._ssl, limits=_ONE_CONNECTION)
            self._opened.append(pool)
            return pool, True
        # more requests than the capacity, which the backend never admits: share a pool (its
        # request waits for the one before it) rather than fail
        return self._opened[0], False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pool, owned = self._take()

        def release() -> None:
            if owned:
                self._free.append(pool)

        try:
            response = await pool.handle_async_request(request)
        except BaseException:
            release()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Released(response.stream, release)
        return response

    async def aclose(self) -> None:
        for pool in self._opened:
            await pool.aclose()

"""A file server on 127.0.0.1 for the model store's pulls: each path plays a ``Route`` (a body
served with HTTP ``Range`` support, an error status, a redirect, a connection cut after some
bytes, or a pause mid-body until the test lets it go), and every request's path and headers are
kept. Threaded ``http.server``: the pulls under test run in other processes.

``small_gguf`` makes a file with a valid GGUF header (no tensors: enough to pass a pull's
checks, not to load; tests that load copy the packaged SmolLM2 model instead)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = [
    "UNPINNED_MODEL",
    "ModelServer",
    "Route",
    "catalog_file",
    "packaged_model_bytes",
    "serving",
    "sha256",
    "small_gguf",
]

GATE_TIMEOUT_SECONDS = 60.0
"""Longest a paused response waits for the test to let it go (the test failed by then)."""
SEND_BYTES = 64 * 1024


def small_gguf(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that start like a GGUF v3 file with no tensors and no metadata."""
    header = b"GGUF" + (3).to_bytes(4, "little") + bytes(16)
    filler = hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1)
    return (header + filler)[:size]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


UNPINNED_MODEL = "smollm2-360m-instruct"
"""A catalog entry without a pinned size or digest: a mirror may serve another model's bytes
under its name (trust on first use), as the tests of a fetched model serve the packaged SmolLM2."""


def catalog_file(name: str = UNPINNED_MODEL) -> str:
    """The path of a catalog model's file below ``https://huggingface.co`` (what a mirror set by
    ``$OAMD_CATALOG_BASE_URL`` serves it at), read from the catalog itself, not the mirror's."""
    from oamd.models.catalog import CATALOG, HF

    (entry,) = [entry for entry in CATALOG if entry.name == name]
    assert entry.sha256 is None and entry.size_bytes is None, "a pinned entry takes no other bytes"
    return entry.url.removeprefix(HF)


def packaged_model_bytes() -> bytes:
    """The packaged SmolLM2's GGUF file: a real model for a test to serve and then load."""
    from oamd.backends.llamacpp.packaged_model import packaged_model_path

    path = packaged_model_path()
    assert path is not None
    return path.read_bytes()


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    location: str | None = None
    """Answer with this redirect instead."""
    cut_at: int | None = None
    """Close the connection when the body reaches this offset (a broken download); a request
    starting at or past it gets its headers and no byte."""
    cuts: int = 1_000_000
    """How many responses are cut at ``cut_at`` before the route behaves."""
    pause_after: int | None = None
    """Stop after this many bytes of the body until ``release`` is set."""
    ranges: bool = True
    """Honour ``Range`` (206); otherwise always send the whole body (200)."""
    excess: int = 0
    """Send this many zero bytes past the body (a 206's ``Content-Range`` still gives the body's
    size; ``Content-Length`` counts them)."""
    length: bool = True
    """Send ``Content-Length``; without it the body ends when the connection closes."""
    headers: dict[str, str] = field(default_factory=dict)
    """Sent instead of the route's own headers of the same name; with an error ``status``, an
    answer with these headers and no body (instead of ``send_error``'s page)."""
    paused: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class ModelServer:
    port: int
    routes: dict[str, Route]
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def ranges_asked(self, path: str) -> list[str | None]:
        return [headers.get("range") for asked, headers in self.requests if asked == path]


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            server.requests.append((self.path, headers))
            route = server.routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            if route.location is not None:
                self.send_response(302)
                self.send_header("Location", route.location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if route.status != 200 and route.headers:
                self.send_response(route.status)
                for key, value in {"Content-Length": "0", **route.headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                return
            if route.status != 200:
                self.send_error(route.status)
                return
            self._send_body(route, headers.get("range"))

        def _send_body(self, route: Route, asked: str | None) -> None:
            body, start = route.body, 0
            if asked and route.ranges and asked.startswith("bytes="):
                start = int(asked[len("bytes=") :].split("-", 1)[0])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                sent_headers = {"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"}
            else:
                self.send_response(200)
                sent_headers = {}
            rest = body[start:] + bytes(route.excess)
            sent_headers["Content-Type"] = "application/octet-stream"
            if route.length:
                sent_headers["Content-Length"] = str(len(rest))
            for key, value in {**sent_headers, **route.headers}.items():
                self.send_header(key, value)
            self.end_headers()
            limit = len(rest)
            if route.cut_at is not None and route.cuts > 0:
                route.cuts -= 1
                limit = max(0, route.cut_at - start)
            sent = 0
            while sent < min(limit, len(rest)):
                if route.pause_after is not None and sent >= route.pause_after:
                    self.wfile.flush()
                    route.paused.set()
                    route.release.wait(GATE_TIMEOUT_SECONDS)
                    route.pause_after = None
                step = min(SEND_BYTES, limit - sent)
                if route.pause_after is not None:
                    step = min(step, route.pause_after - sent)
                self.wfile.write(rest[sent : sent + step])
                sent += step
            self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def serving(routes: dict[str, Route]) -> Iterator[ModelServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server = ModelServer(httpd.server_address[1], routes)
    httpd.RequestHandlerClass = _handler(server)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        for route in routes.values():
            route.release.set()
        httpd.shutdown()
        httpd.server_close()

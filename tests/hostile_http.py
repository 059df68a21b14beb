"""Hostile HTTP servers against ``oamd models pull``: a seeded generator of misbehaving file
servers, and the checks a pull from one of them must pass.

Used by ``tests/test_models_pull_fuzz.py`` (a small seeded run in ``make test``) and run as a
script by ``make fuzz`` (seeded, reproducible; ``$OAMD_FUZZ_PULLS`` cases, default 200):

    python tests/hostile_http.py [--seed N] [--cases 200] [--jobs 2]

Each case is one raw-socket server on 127.0.0.1 that owns one small GGUF file (the truth) and
answers every request with one misbehaviour, drawn from the case's seed: a body longer or shorter
than it says, a truncated body, a 416 to a plain GET, a redirect loop, a slow or silent body,
garbage or huge headers, a wrong ``Content-Range``, odd statuses, broken chunked encoding. Half the
cases start with the file's digest and size known to the store (``digests.json``, as after a first
pull), some with a partial download already there. The pull runs as ``oamd models pull URL`` (a
fifth of them ``oamd models pull NAME`` of a catalog model, the server as its mirror, named by
``$OAMD_CATALOG_BASE_URL``) with its read timeout cut to ``READ_TIMEOUT_SECONDS`` (so a silent
server costs a second, not a minute).

A pull must then exit 0, 4, 5 or 6 (``oamd models pull --help``) within ``MAX_SECONDS``, with no
traceback, one stderr line naming the URL when it fails, the model's path alone on stdout when it
succeeds; leave no temporary file, no ``NAME.gguf`` unless it succeeded (with the known digest,
when one was known), no ``.part`` unless it kept one to resume (exit 4 or 6); and never hold more
bytes on disk (watched while it runs) than the known size. The script prints the seed, the cases
per exit code and every violation with the behaviour that caused it, and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import re
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import orjson

READ_TIMEOUT_SECONDS = 0.5
STALL_SECONDS = 0.9
"""A silent server's silence: longer than the pull's read timeout."""
MAX_SECONDS = 30.0
"""A pull's bound: five attempts, each stalled, and room for a slow machine."""
SEND_BYTES = 64 * 1024
HEAD_LIMIT = 64 * 1024
EXITS = (0, 4, 5, 6)
CASES_VARIABLE = "OAMD_FUZZ_PULLS"
PATH = "/m.gguf"
NAME = "m"
CATALOG_NAME = "smollm2-360m-instruct"
CATALOG_PATH = (
    "/HuggingFaceTB/SmolLM2-360M-Instruct-GGUF/resolve/main/smollm2-360m-instruct-q8_0.gguf"
)
"""A catalog model that pins no digest, pulled by name from the server as its mirror."""
MIB = 1024 * 1024
LAUNCH = (
    "import sys\n"
    "from oamd.models import download\n"
    f"download.READ_TIMEOUT_SECONDS = {READ_TIMEOUT_SECONDS}\n"
    "download.CONNECT_TIMEOUT_SECONDS = 5.0\n"
    "from oamd.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
"""``python -m oamd`` with the read timeout cut short (nothing else of the pull changed)."""


def gguf(size: int, rng: random.Random) -> bytes:
    """``size`` bytes starting with a GGUF v3 header."""
    return (b"GGUF" + (3).to_bytes(4, "little") + rng.randbytes(size))[:size]


@dataclass
class Reply:
    head: bytes
    body: bytes = b""
    drip_seconds: float = 0.0
    """A pause before each send of ``send_bytes``."""
    send_bytes: int = SEND_BYTES
    stall_after: int | None = None
    """Go silent for ``STALL_SECONDS`` after this many body bytes, then close."""
    stall_before: bool = False
    """Go silent before the status line."""


Responder = Callable[[int, str, int | None], Reply]
"""``(request number, path, Range start or None) -> Reply``."""


def head(
    status: int | bytes, headers: list[tuple[str, str | bytes]], reason: bytes = b"X"
) -> bytes:
    line = status if isinstance(status, bytes) else b"HTTP/1.1 %d %s" % (status, reason)
    lines = [line]
    for key, value in headers:
        lines.append(key.encode() + b": " + (value if isinstance(value, bytes) else value.encode()))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def honest(truth: bytes, start: int | None) -> Reply:
    if start is None:
        return Reply(head(200, [("Content-Length", str(len(truth)))]), truth)
    if start >= len(truth):
        return Reply(
            head(416, [("Content-Range", f"bytes */{len(truth)}"), ("Content-Length", "0")])
        )
    rest = truth[start:]
    cr = f"bytes {start}-{len(truth) - 1}/{len(truth)}"
    return Reply(head(206, [("Content-Range", cr), ("Content-Length", str(len(rest)))]), rest)


def _long_body(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    extra = rng.choice([1, 1000, SEND_BYTES, 4 * MIB, 8 * MIB])
    form = rng.choice(["no-length", "length", "range-total"])
    junk = rng.randbytes(min(extra, 4096)) * (extra // 4096 + 1)

    def respond(index: int, path: str, start: int | None) -> Reply:
        offset = (start or 0) if form == "range-total" else 0
        body = truth[offset:] + junk[:extra]
        if form == "no-length":
            return Reply(head(200, [("Connection", "close")]), body)
        if form == "length":
            return Reply(head(200, [("Content-Length", str(len(body)))]), body)
        cr = f"bytes {offset}-{len(truth) - 1}/{len(truth)}"
        return Reply(head(206, [("Content-Range", cr), ("Content-Length", str(len(body)))]), body)

    return f"long body ({form}, {extra} bytes too many)", respond


def _short_length(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    said = rng.randrange(1, len(truth))

    def respond(index: int, path: str, start: int | None) -> Reply:
        return Reply(head(200, [("Content-Length", str(said))]), truth)

    return f"Content-Length {said} for {len(truth)} bytes", respond


def _truncated(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    cut = rng.randrange(0, len(truth))
    cuts = rng.choice([1, 2, 3, 100])

    def respond(index: int, path: str, start: int | None) -> Reply:
        reply = honest(truth, start)
        if index < cuts:
            reply.body = reply.body[: max(0, cut - (start or 0))]
        return reply

    return f"body cut at {cut}, {cuts} times", respond


def _refuse_416(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    size = len(truth)
    header = rng.choice(
        [None, f"bytes */{size}", "bytes */0", f"bytes */{size * 2}", "bytes */x", "bytes */"]
    )
    when = rng.choice(["always", "plain", "ranged"])

    def respond(index: int, path: str, start: int | None) -> Reply:
        if when == "always" or (when == "plain") == (start is None):
            headers = [("Content-Length", "0")] + ([("Content-Range", header)] if header else [])
            return Reply(head(416, headers))
        return honest(truth, start)

    return f"416 ({when}, Content-Range {header})", respond


def _redirects(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    form = rng.choice(["self", "ping-pong", "chain", "ftp", "bad-url", "empty", "none", "refused"])
    status = rng.choice([301, 302, 303, 307, 308])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]

    def respond(index: int, path: str, start: int | None) -> Reply:
        target = {
            "self": path,
            "ping-pong": "/b" if path == PATH else PATH,
            "chain": f"/hop/{index}",
            "ftp": "ftp://127.0.0.1/m.gguf",
            "bad-url": "http://[::1",
            "empty": "",
            "refused": f"http://127.0.0.1:{closed_port}/m.gguf",
        }.get(form)
        headers = [("Content-Length", "0")] + ([("Location", target)] if target is not None else [])
        return Reply(head(status, headers))

    return f"redirect {status} ({form})", respond


def _slow(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    form = rng.choice(["silent-head", "stall", "drip", "stall-once"])
    point = rng.randrange(0, len(truth))

    def respond(index: int, path: str, start: int | None) -> Reply:
        reply = honest(truth, start)
        if form == "silent-head":
            reply.stall_before = True
        elif form == "stall" or (form == "stall-once" and index == 0):
            reply.stall_after = max(0, point - (start or 0))
        elif form == "drip":
            reply.send_bytes = max(1, len(reply.body) // 8)
            reply.drip_seconds = 0.1
        return reply

    return f"slow ({form} at {point})", respond


GARBAGE_HEADS = [
    b"garbage\r\n\r\n",
    b"HTTP/1.1 2OO OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999999\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Length: 20\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Junk: a\x00b\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Name: \xe9\xff\xfe\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/2.0 200 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\nContent-Length: 3\n\n",
    b"\x00\xff\xfe\xfd\r\n\r\n",
    b"",
    b"HTTP/1.1 200 OK\r\nContent-Range: bytes \xb2-\xb3/\xb9\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
]


def _garbage_head(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    raw = rng.choice(GARBAGE_HEADS)

    def respond(index: int, path: str, start: int | None) -> Reply:
        return Reply(raw, truth)

    return f"garbage head {raw[:60]!r}", respond


def _huge_head(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    form = rng.choice(["one", "many"])
    size = rng.choice([50_000, 200_000, 1_000_000])

    def respond(index: int, path: str, start: int | None) -> Reply:
        reply = honest(truth, start)
        status, _, rest = reply.head.partition(b"\r\n")
        extra = (
            b"X-Big: " + b"a" * size if form == "one" else b"\r\n".join([b"X-A: b"] * (size // 8))
        )
        reply.head = status + b"\r\n" + extra + b"\r\n" + rest
        return reply

    return f"huge head ({form}, {size} bytes)", respond


def _content_range(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    size = len(truth)
    form = rng.choice(
        ["start+1", "start-1", "to-plain-get", "small-total", "huge-total", "garbage", "on-200"]
    )
    garbage = rng.choice(
        [
            "bytes \xb2-5/10",
            "bytes 0-5/\xb2\xb3",
            "bytes 0-5/-3",
            f"items 0-{size - 1}/{size}",
            "bytes */*",
            "bytes 0-5/",
            "",
            "bytes 1-0/0",
        ]
    )

    def respond(index: int, path: str, start: int | None) -> Reply:
        offset = start or 0
        rest = truth[offset:]
        total = size
        first = offset
        if form == "start+1":
            first = offset + 1
        elif form == "start-1":
            first = max(0, offset - 1) if offset else 1
        elif form == "small-total":
            total = max(1, size // 2)
        elif form == "huge-total":
            total = 10**30
        cr = f"bytes {first}-{size - 1}/{total}"
        if form == "garbage":
            cr = garbage
        status = 200 if form == "on-200" else 206
        if form == "to-plain-get" and start is None:
            cr = f"bytes 0-{size - 1}/{size}"
        headers = [("Content-Range", cr.encode("latin-1")), ("Content-Length", str(len(rest)))]
        return Reply(head(status, headers), rest)

    return f"Content-Range ({form}{' ' + repr(garbage) if form == 'garbage' else ''})", respond


def _status_zoo(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    status = rng.choice([100, 101, 199, 204, 205, 299, 304, 399, 418, 600, 999])
    length = rng.choice([None, 0, len(truth)])

    def respond(index: int, path: str, start: int | None) -> Reply:
        headers = [] if length is None else [("Content-Length", str(length))]
        return Reply(head(status, headers), truth[: length or 0] if length else truth)

    return f"status {status} (Content-Length {length})", respond


def _chunked(rng: random.Random, truth: bytes) -> tuple[str, Responder]:
    form = rng.choice(["long", "bad-size", "cut", "extension"])
    extra = rng.choice([1, 4 * MIB])
    junk = (rng.randbytes(4096) * (extra // 4096 + 1))[:extra]

    def respond(index: int, path: str, start: int | None) -> Reply:
        body = truth + junk if form == "long" else truth
        chunks = [body[i : i + SEND_BYTES] for i in range(0, len(body), SEND_BYTES)]
        encoded = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
        if form == "bad-size":
            encoded = b"fffffffffffffffffff\r\n" + encoded
        elif form == "cut":
            encoded = encoded[: len(encoded) // 2]
        elif form == "extension":
            encoded = b"".join(b"%x;\x01junk=\xff\r\n%s\r\n" % (len(c), c) for c in chunks)
        if form != "cut":
            encoded += b"0\r\n\r\n"
        return Reply(head(200, [("Transfer-Encoding", "chunked")]), encoded)

    return f"chunked ({form}{f', {extra} bytes too many' if form == 'long' else ''})", respond


BEHAVIOURS = [
    _long_body,
    _short_length,
    _truncated,
    _refuse_416,
    _redirects,
    _slow,
    _garbage_head,
    _huge_head,
    _content_range,
    _status_zoo,
    _chunked,
]


@dataclass
class Case:
    number: int
    truth: bytes
    behaviour: str
    respond: Responder
    known: bool
    part: bytes | None
    progress: str
    catalog: bool

    @property
    def name(self) -> str:
        return CATALOG_NAME if self.catalog else NAME

    @property
    def path(self) -> str:
        return CATALOG_PATH if self.catalog else PATH


def make_case(seed: int, number: int) -> Case:
    rng = random.Random(f"{seed}:{number}")
    truth = gguf(rng.choice([1024, 40_000, 200_000, 1 * MIB]), rng)
    make = rng.choice(BEHAVIOURS)
    behaviour, respond = make(rng, truth)
    known = rng.random() < 0.5
    part = truth[: rng.randrange(1, len(truth) + 1)] if rng.random() < 0.3 else None
    progress = rng.choice(["json", "none"])
    catalog = rng.random() < 0.2
    return Case(number, truth, behaviour, respond, known, part, progress, catalog)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _serve(case: Case) -> _Server:
    lock = threading.Lock()
    counter = [0]

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            with contextlib.suppress(OSError):  # the pull hung up first: it gave up
                self._handle()

        def _handle(self) -> None:
            sock: socket.socket = self.request
            sock.settimeout(MAX_SECONDS)
            asked = b""
            while b"\r\n\r\n" not in asked and len(asked) < HEAD_LIMIT:
                data = sock.recv(4096)
                if not data:
                    return
                asked += data
            lines = asked.split(b"\r\n")
            path = lines[0].split(b" ")[1].decode("latin-1") if b" " in lines[0] else PATH
            found = re.search(rb"(?im)^range:\s*bytes=(\d+)-", asked)
            start = int(found.group(1)) if found else None
            with lock:
                index = counter[0]
                counter[0] += 1
            reply = case.respond(index, path, start)
            if reply.stall_before:
                time.sleep(STALL_SECONDS)
            sock.sendall(reply.head)
            sent = 0
            while sent < len(reply.body):
                if reply.stall_after is not None and sent >= reply.stall_after:
                    time.sleep(STALL_SECONDS)
                    break
                if reply.drip_seconds:
                    time.sleep(reply.drip_seconds)
                step = reply.send_bytes
                if reply.stall_after is not None:
                    step = min(step, reply.stall_after - sent)
                sock.sendall(reply.body[sent : sent + step])
                sent += step
            sock.shutdown(socket.SHUT_WR)

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Pulled:
    number: int
    behaviour: str
    exit: int | None
    seconds: float
    problems: list[str] = field(default_factory=list)


def _largest(store: Path) -> int:
    largest = 0
    try:
        for entry in os.scandir(store):
            if entry.name.endswith((".gguf", ".part")):
                try:
                    largest = max(largest, entry.stat().st_size)
                except OSError:
                    continue
    except OSError:
        pass
    return largest


def _prepare(case: Case, store: Path, url: str) -> None:
    store.mkdir(parents=True)
    if case.known:
        digest = hashlib.sha256(case.truth).hexdigest()
        known = {url: {"sha256": digest, "size": len(case.truth)}}
        (store / "digests.json").write_bytes(orjson.dumps(known))
    if case.part is not None:
        (store / f"{case.name}.gguf.part").write_bytes(case.part)


def _check(case: Case, store: Path, url: str, ran: subprocess.CompletedProcess[str]) -> list[str]:
    problems = []
    code = ran.returncode
    said = [line for line in ran.stderr.splitlines() if not line.startswith("{")]
    files = {p.name for p in store.iterdir()}
    model, part = f"{case.name}.gguf", f"{case.name}.gguf.part"
    if code not in EXITS:
        problems.append(f"exit {code}")
    if "Traceback" in ran.stderr:
        problems.append("a traceback: " + ran.stderr.strip().splitlines()[-1][:300])
    elif code != 0 and (len(said) != 1 or url not in said[0] or ran.stdout):
        problems.append(f"exit {code} without one line naming the URL: {ran.stderr[-300:]!r}")
    if code == 0:
        if ran.stdout != f"{store / model}\n":
            problems.append(f"stdout {ran.stdout[:200]!r}")
        if part in files or model not in files:
            problems.append(f"exit 0 leaving {sorted(files)}")
        elif case.known and (store / model).read_bytes() != case.truth:
            problems.append("exit 0 with other bytes than the known digest's")
    elif model in files:
        problems.append(f"exit {code} with {model} in the store")
    if part in files and code not in (4, 6):
        problems.append(f"exit {code} leaving {part}")
    left = [name for name in files if name.endswith(".tmp")]
    if left:
        problems.append(f"temporary files left: {left}")
    return problems


def pull(case: Case, where: Path) -> Pulled:
    server = _serve(case)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    url = base + case.path
    store = where / f"case-{case.number}"
    _prepare(case, store, url)
    largest = [_largest(store)]
    running = threading.Event()
    running.set()

    def watch() -> None:
        while running.is_set():
            largest[0] = max(largest[0], _largest(store))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    wanted = case.name if case.catalog else url
    argv = [sys.executable, "-c", LAUNCH, "models", "pull", wanted, "--progress", case.progress]
    try:
        ran = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=MAX_SECONDS,
            check=False,
            env={**os.environ, "OAMD_MODELS": str(store), "OAMD_CATALOG_BASE_URL": base},
        )
    except subprocess.TimeoutExpired:
        return Pulled(
            case.number, case.behaviour, None, MAX_SECONDS, [f"running after {MAX_SECONDS:g} s"]
        )
    finally:
        running.clear()
        watcher.join()
        server.shutdown()
        server.server_close()
    seconds = time.monotonic() - started
    problems = _check(case, store, url, ran)
    largest[0] = max(largest[0], _largest(store))
    if case.known and largest[0] > len(case.truth):
        problems.append(f"{largest[0]} bytes on disk, {len(case.truth)} known")
    return Pulled(case.number, case.behaviour, ran.returncode, seconds, problems)


def run(seed: int, cases: int, jobs: int = 2) -> list[Pulled]:
    with tempfile.TemporaryDirectory(prefix="oamd-hostile-http-") as where:
        made = [make_case(seed, n) for n in range(cases)]
        with ThreadPoolExecutor(jobs) as pool:
            return list(pool.map(lambda case: pull(case, Path(where)), made))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--cases", type=int, default=int(os.environ.get(CASES_VARIABLE) or 200))
    parser.add_argument("--jobs", type=int, default=2, help="pulls at once")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    print(f"hostile_http: seed {seed}, {args.cases} pulls", flush=True)
    started = time.monotonic()
    pulled = run(seed, args.cases, args.jobs)
    exits = Counter(p.exit for p in pulled)
    violations = [p for p in pulled if p.problems]
    slowest = max((p.seconds for p in pulled), default=0.0)
    print(
        f"{len(pulled)} pulls in {time.monotonic() - started:.0f} s (slowest {slowest:.1f} s): "
        + ", ".join(f"exit {code}: {count}" for code, count in sorted(exits.items(), key=str))
    )
    for p in violations:
        print(f"VIOLATION: case {p.number}, {p.behaviour}: {'; '.join(p.problems)}")
    print(f"{len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

"""A real headless Chromium for the inspector's page test, driven over the DevTools protocol on
``--remote-debugging-pipe`` (fd 3 in, fd 4 out, one JSON message per NUL): no websocket client,
no extra package. Each call waits for its reply under a deadline; a page is waited on by an
expression whose promise the browser itself resolves (``Page.wait_for``), never by a sleep here.
"""

from __future__ import annotations

import base64
import itertools
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

REPLY_SECONDS = 30.0
"""A cold Chromium can take a while on a busy CI machine."""

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium process; ``open`` gives a page attached to the protocol."""

    def __init__(self, executable: str, profile: str) -> None:
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def wire_pipes() -> None:  # the child's fd 3 reads commands, fd 4 writes replies
            # copied out of the way first: either end may itself be fd 3 or 4 (close-on-exec)
            read, write = os.dup(commands_read), os.dup(replies_write)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",  # CI runs as root, where the sandbox refuses to start
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes,
            close_fds=False,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._ids = itertools.count(1)
        self._buffer = b""
        self._messages: list[dict[str, Any]] = []

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = REPLY_SECONDS,
    ) -> dict[str, Any]:
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, orjson.dumps(message) + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            for n, reply in enumerate(self._messages):
                if reply.get("id") == msg_id:
                    del self._messages[n]
                    if "error" in reply:
                        raise BrowserError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            self._messages = [m for m in self._messages if "id" in m]  # events: not needed
            self._read(deadline, method)

    def _read(self, deadline: float, waiting_for: str) -> None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self._replies], [], [], left)[0]:
            raise BrowserError(f"no reply to {waiting_for} within the deadline")
        chunk = os.read(self._replies, 1 << 20)
        if not chunk:
            raise BrowserError(f"chromium exited (status {self.process.poll()})")
        self._buffer += chunk
        *whole, self._buffer = self._buffer.split(b"\0")
        self._messages.extend(orjson.loads(m) for m in whole if m)

    def open(self, url: str, width: int, height: int) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session)
        page.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        page.call("Page.navigate", {"url": url})
        return page

    def close(self) -> None:
        try:
            os.write(self._commands, orjson.dumps({"id": 0, "method": "Browser.close"}) + b"\0")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._commands)
            os.close(self._replies)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self._browser = browser
        self._session = session

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return self._browser.call(method, params, self._session, **kw)

    def evaluate(self, expression: str, timeout: float = REPLY_SECONDS) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}…: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, condition: str, seconds: float = 10.0) -> str:
        """The page's HTML once the JavaScript ``condition`` holds (the browser checks it every
        50 ms and gives up after ``seconds``, rejecting the promise)."""
        limit = int(seconds * 1000)
        expression = (
            "new Promise((resolve, reject) => { const t0 = Date.now(); (function check() {"
            f" let ok = false; try {{ ok = Boolean({condition}); }} catch (e) {{}}"
            " if (ok) resolve(document.documentElement.outerHTML);"
            f" else if (Date.now() - t0 > {limit}) reject(new Error('timed out: ' + "
            f"{orjson.dumps(condition).decode()}));"
            " else setTimeout(check, 50); })(); })"
        )
        return self.evaluate(expression, timeout=seconds + REPLY_SECONDS)

    def screenshot(self, path: str) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))


@contextmanager
def browser(executable: str) -> Iterator[Browser]:
    profile = tempfile.mkdtemp(prefix="oamd-chromium-")
    b = Browser(executable, profile)
    try:
        yield b
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)

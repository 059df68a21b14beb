"""liboamd_ffi for the tests (``ffi/``): builds it with ``make ffi``, loads it with ctypes and declares
the six functions of open-apple-models' C ABI, and wraps one handle in a ``Bridge`` that records
every callback line and lets a test wait for lines by id (a handshake on a condition, never a
sleep). ``daemon_script`` writes the executable the library spawns: ``python -m oamd`` of this
checkout, or a stand-in that only reads its input, for the cheap create/destroy cycles."""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILT_LIBRARY = (
    ROOT / "dist" / "ffi" / ("liboamd_ffi.dylib" if sys.platform == "darwin" else "liboamd_ffi.so")
)
LIBRARY = Path(os.environ.get("OAMD_FFI_LIBRARY") or BUILT_LIBRARY)
"""The library under test: ``make ffi``'s, or a sanitizer build ``make ffi-sanitize`` names."""
SANITIZER_PRELOAD = os.environ.pop("LD_PRELOAD", "") if LIBRARY != BUILT_LIBRARY else ""
"""The sanitizer runtime ``make ffi-sanitize`` preloads into this process, for the library alone:
it is taken out of the environment the library spawns oamd with (a shell under TSan crashes), and
given back to a Python subprocess that loads the library (``library_environment``)."""


def library_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a subprocess that loads the library under test."""
    return {**env, "LD_PRELOAD": SANITIZER_PRELOAD} if SANITIZER_PRELOAD else env


WAIT_SECONDS = 10
"""Longest wait for a line: a cold interpreter importing oamd on a busy CI machine."""
BUILD_SECONDS = 120

CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)


def build_library() -> Path:
    """``make ffi`` (a second; nothing when it is up to date), or a skip without a C compiler;
    nothing when ``OAMD_FFI_LIBRARY`` names a library built otherwise."""
    if LIBRARY != BUILT_LIBRARY:
        assert LIBRARY.is_file(), f"OAMD_FFI_LIBRARY={LIBRARY} does not exist"
        return LIBRARY
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) to build liboamd_ffi")
    result = subprocess.run(
        ["make", "-s", "ffi"], cwd=ROOT, capture_output=True, text=True, timeout=BUILD_SECONDS
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return LIBRARY


def load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.oam_bridge_create.argtypes = [CALLBACK, ctypes.c_void_p]
    lib.oam_bridge_create.restype = ctypes.c_void_p
    lib.oam_bridge_send.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.oam_bridge_send.restype = ctypes.c_int
    lib.oam_bridge_destroy.argtypes = [ctypes.c_void_p]
    lib.oam_bridge_destroy.restype = None
    lib.oam_version.argtypes = []
    lib.oam_version.restype = ctypes.c_char_p
    lib.oam_call_blocking.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.oam_call_blocking.restype = ctypes.c_void_p  # the raw pointer, for oam_string_free
    lib.oam_string_free.argtypes = [ctypes.c_void_p]
    lib.oam_string_free.restype = None
    return lib


def daemon_script(folder: Path, name: str = "oamd") -> Path:
    """An executable that runs this checkout's ``python -m oamd`` with the arguments it is given."""
    script = folder / name
    script.write_text(
        f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -m oamd "$@"\n'
    )
    script.chmod(0o755)
    return script


def reading_stand_in(folder: Path) -> Path:
    """An executable that reads its input until end of input and prints nothing. Its stdout stays
    open (``sed -n d``, not ``cat >/dev/null``): the bridge reads a closed stdout as a dead daemon."""
    script = folder / "reads-until-eof"
    script.write_text("#!/bin/sh\nexec sed -n d\n")
    script.chmod(0o755)
    return script


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


def child_pids() -> list[int]:
    """The processes whose parent is this one (Linux /proc)."""
    me = str(os.getpid())
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me:
            pids.append(int(entry.name))
    return pids


def descriptor_targets(pid: int | str) -> dict[int, str]:
    """What each open descriptor of process ``pid`` ("self" for this one) names, e.g. ``pipe:[42]``."""
    folder = Path(f"/proc/{pid}/fd")
    targets = {}
    for entry in folder.iterdir():
        try:
            targets[int(entry.name)] = os.readlink(entry)
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
    return targets


def wait_gone(pid: int, seconds: float) -> bool:
    """True once process ``pid`` has exited (or was reaped) within ``seconds``: a pidfd becomes
    readable when its process ends, so this waits without polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], seconds)[0])
    finally:
        os.close(fd)


class Bridge:
    """One ``oam_bridge``: ``lines`` holds every callback line, parsed, in arrival order.

    ``on_line`` (if set) runs inside the callback, on the bridge's thread, with the parsed line.
    ``pid`` is the daemon the handle started (unless ``find_pid`` is false): the one child that
    is new, so that an earlier bridge's daemon still being reaped is not taken for it."""

    def __init__(
        self,
        lib: ctypes.CDLL,
        on_line: Callable[[Bridge, dict[str, Any]], None] | None = None,
        find_pid: bool = True,
    ):
        self.lib = lib
        self.on_line = on_line
        self.lines: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        """Every callback line as the library passed it, for byte-exact checks."""
        self.callback_threads: set[int] = set()
        self.changed = threading.Condition()
        self._callback = CALLBACK(self._receive)  # kept alive as long as the handle
        children_before = set(child_pids()) if find_pid else set()
        handle = lib.oam_bridge_create(self._callback, None)
        assert handle, "oam_bridge_create returned NULL"
        self.handle = ctypes.c_void_p(handle)
        self.destroyed = False
        self.pid = 0
        if find_pid:
            (self.pid,) = set(child_pids()) - children_before

    def _receive(self, line: bytes, _user_data: Any) -> None:
        message = json.loads(line.decode())
        with self.changed:
            self.raw.append(line)
            self.lines.append(message)
            self.callback_threads.add(threading.get_ident())
            self.changed.notify_all()
        if self.on_line is not None:
            self.on_line(self, message)

    def send(self, message: dict[str, Any] | bytes) -> int:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        return self.lib.oam_bridge_send(self.handle, line)

    def call(
        self, message: dict[str, Any] | bytes, timeout_ms: int = WAIT_SECONDS * 1000
    ) -> dict[str, Any]:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        raw = self.lib.oam_call_blocking(self.handle, line, timeout_ms)
        assert raw, "oam_call_blocking returned NULL"
        try:
            return json.loads(ctypes.string_at(raw).decode())
        finally:
            self.lib.oam_string_free(raw)

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + WAIT_SECONDS
        with self.changed:
            while not predicate(self.lines):
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; lines so far: {self.lines}"
                self.changed.wait(left)
            return list(self.lines)

    def response(self, request_id: Any) -> dict[str, Any]:
        """Waits for the response with ``request_id`` and returns it."""

        def answered(lines: list[dict[str, Any]]) -> bool:
            return any("method" not in m and m.get("id") == request_id for m in lines)

        lines = self.wait_for(answered)
        return next(m for m in lines if "method" not in m and m.get("id") == request_id)

    def destroy(self) -> None:
        if not self.destroyed:
            self.destroyed = True
            self.lib.oam_bridge_destroy(self.handle)

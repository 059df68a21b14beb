"""``requantize=q8_0|q4_0``: a Q4_1 file gets a copy of that type made once in the store's
``fast/`` folder, kept only when it measured faster, with the verdict remembered; other types
load as they are, and the default (``off``) loads the file as it is. On the packaged SmolLM2
(Q4_1), with llama.cpp's own quantiser, and through ``oamd stdio``."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from backends.llama_server import missing_reason
from model_server import small_gguf

from oamd.backends.llamacpp import fast_form as _llama_fast_form
from oamd.backends.llamacpp.fast_form import fast_form
from oamd.backends.llamacpp.gguf_header import gguf_file_type
from oamd.backends.llamacpp.packaged_model import packaged_model_path

LLAMA = pytest.mark.skipif(
    missing_reason(server=False) is not None, reason=str(missing_reason(server=False))
)
Q4_0, Q4_1, Q8_0, Q4_K_M = 2, 3, 7, 15


def gguf_with(file_type: int) -> bytes:
    """A GGUF v3 header with a string, a string array (a vocabulary) and then
    ``general.file_type``: the reader must walk past the first two."""

    def string(text: bytes) -> bytes:
        return struct.pack("<Q", len(text)) + text

    kvs = string(b"general.name") + struct.pack("<I", 8) + string(b"tiny")
    kvs += string(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3)
    kvs += b"".join(string(t) for t in (b"a", b"bc", b"def"))
    kvs += string(b"general.file_type") + struct.pack("<II", 4, file_type)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 3) + kvs


def test_the_header_says_what_a_file_is_quantised_as(tmp_path):
    file = tmp_path / "m.gguf"
    file.write_bytes(gguf_with(Q4_K_M))
    assert gguf_file_type(file) == Q4_K_M


@pytest.mark.parametrize(
    "data",
    [small_gguf(64), b"not a gguf file at all", gguf_with(Q4_1)[:40], b"GGUF" + bytes(4), b""],
    ids=["no-metadata", "not-gguf", "cut-short", "version-0", "empty"],
)
def test_a_file_whose_header_says_nothing_readable_has_no_type(tmp_path, data):
    file = tmp_path / "m.gguf"
    file.write_bytes(data)
    assert gguf_file_type(file) is None


def test_a_header_claiming_a_huge_string_is_not_read_further(tmp_path):
    file = tmp_path / "m.gguf"
    file.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 60))
    assert gguf_file_type(file) is None


def test_a_type_with_repacked_kernels_or_no_folder_loads_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(_llama_fast_form, "_quantize", _never)
    file = tmp_path / "m.gguf"
    file.write_bytes(gguf_with(Q4_K_M))
    assert fast_form(file, tmp_path / "fast", 2, "q8_0").path == file
    file.write_bytes(gguf_with(Q4_1))
    assert fast_form(file, None, 2, "q8_0").path == file
    assert fast_form(file, tmp_path / "fast", 2, "off").path == file
    assert not (tmp_path / "fast").exists()


def _never(*args):
    raise AssertionError("no copy should be made")


@pytest.fixture
def smollm2() -> Path:
    path = packaged_model_path()
    if path is None:
        pytest.skip("the packaged SmolLM2 model is not installed")
    return path


@LLAMA
def test_the_packaged_model_is_q4_1(smollm2):
    assert gguf_file_type(smollm2) == Q4_1


@LLAMA
@pytest.mark.parametrize(("target", "file_type"), [("q8_0", Q8_0), ("q4_0", Q4_0)])
def test_a_copy_that_measures_faster_is_made_once_kept_and_loaded(
    tmp_path, smollm2, monkeypatch, target, file_type
):
    monkeypatch.setattr(_llama_fast_form, "_measure", lambda s, c, t: (200.0, 290.0))
    first = fast_form(smollm2, tmp_path, 2, target)
    assert first.path.parent == tmp_path and first.path != smollm2
    assert gguf_file_type(first.path) == file_type
    verdicts = list(tmp_path.glob("*.json"))
    assert len(verdicts) == 1
    verdict = orjson.loads(verdicts[0].read_bytes())
    assert verdict["kept"] is True and verdict["source_type"] == "Q4_1"
    assert verdict["target"] == target.upper()
    assert not list(tmp_path.glob("*.part"))
    monkeypatch.setattr(_llama_fast_form, "_quantize", _never)
    monkeypatch.setattr(_llama_fast_form, "_measure", _never)
    assert fast_form(smollm2, tmp_path, 2, target).path == first.path  # the verdict, read


@LLAMA
def test_a_copy_that_is_not_faster_is_removed_and_not_made_again(tmp_path, smollm2, monkeypatch):
    monkeypatch.setattr(_llama_fast_form, "_measure", lambda s, c, t: (200.0, 210.0))
    assert fast_form(smollm2, tmp_path, 2, "q8_0").path == smollm2
    assert not list(tmp_path.glob("*.gguf"))
    monkeypatch.setattr(_llama_fast_form, "_quantize", _never)
    assert fast_form(smollm2, tmp_path, 2, "q8_0").path == smollm2


def test_a_folder_that_cannot_be_written_loads_the_file_as_it_is(tmp_path):
    file = tmp_path / "m.gguf"
    file.write_bytes(gguf_with(Q4_1))
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder should be")
    assert fast_form(file, blocked / "fast", 2, "q8_0").path == file


def _stdio_turn(spec: str, store: Path) -> list[dict]:
    """One NPC-less turn on ``oamd stdio --model SPEC``; the daemon's log records."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/create", "params": {"session": "s"}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/respond",
            "params": {"session": "s", "prompt": "Say hello."},
        },
    ]
    done = subprocess.run(
        [sys.executable, "-m", "oamd", "stdio", "--model", spec, "--log-level", "info"],
        input=b"".join(orjson.dumps(line) + b"\n" for line in lines),
        capture_output=True,
        env={**os.environ, "OAMD_MODELS": str(store)},
        timeout=240,
        check=True,
    )
    answers = sorted(
        (orjson.loads(line) for line in done.stdout.splitlines()), key=lambda a: a["id"]
    )
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert isinstance(answers[2]["result"]["text"], str), answers[2]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert all(line.startswith(b"{") for line in lines), lines[:5]  # structured records only
    return [orjson.loads(line) for line in lines]


@LLAMA
def test_oamd_stdio_loads_the_form_its_measurement_chose_and_remembers_it(tmp_path, smollm2):
    records = _stdio_turn("llamacpp?requantize=q8_0", tmp_path)
    made = next(r for r in records if r.get("event") == "model_fast_form")
    loaded = next(r for r in records if r.get("event") == "model_loaded")
    assert made["source"] == str(smollm2)
    assert made["source_prefill"] > 0 and made["copy_prefill"] > 0
    if made["kept"]:
        assert Path(loaded["loaded"]).parent == tmp_path / "fast"
        assert gguf_file_type(Path(loaded["loaded"])) == Q8_0
    else:
        assert loaded["loaded"] == str(smollm2)
    again = _stdio_turn("llamacpp?requantize=q8_0", tmp_path)
    assert not any(r.get("event") == "model_fast_form" for r in again)  # decided once
    assert next(r for r in again if r.get("event") == "model_loaded")["loaded"] == loaded["loaded"]


@LLAMA
@pytest.mark.parametrize("spec", ["llamacpp", "llamacpp?requantize=off"])
def test_by_default_or_off_the_file_loads_as_it_is(tmp_path, smollm2, spec):
    records = _stdio_turn(spec, tmp_path)
    assert next(r for r in records if r.get("event") == "model_loaded")["loaded"] == str(smollm2)
    assert not (tmp_path / "fast").exists()

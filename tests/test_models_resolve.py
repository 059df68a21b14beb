"""Named models through the daemon, as a user names them: a catalog model not pulled yet is
``downloadable`` and names its pull command, one being pulled reports ``downloading`` with the
pull's progress and loads once the pull lands (the same daemon), and models Ollama pulled or
the Hugging Face cache holds load where they lie (the packaged SmolLM2, linked into fake
layouts, so every load is real). Also: where the store folder is on each platform."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import anyio
import anyio.to_thread
import orjson
import pytest
from backends.llama_server import missing_reason
from model_server import Route, serving, sha256

from oamd.backends.llamacpp.packaged_model import packaged_model_path
from oamd.client import connect_stdio
from oamd.models.resolve import locator
from oamd.models.store import Store, check_name, name_from_url, store_folder

OAMD = [sys.executable, "-m", "oamd"]
RUN_SECONDS = 60
WAIT_SECONDS = 40
"""Bound of a test's waits: under pytest's own timeout, so a stuck wait fails with its place."""
LLAMA_MISSING = missing_reason(server=False)
needs_llama = pytest.mark.skipif(LLAMA_MISSING is not None, reason=str(LLAMA_MISSING))
EXIT_UNAVAILABLE = 3
HOME = Path("/home/ada")


@pytest.mark.parametrize(
    ("platform", "environ", "expected"),
    [
        ("linux", {}, HOME / ".local/share/oamd/models"),
        ("linux", {"XDG_DATA_HOME": "/data"}, Path("/data/oamd/models")),
        ("linux", {"XDG_DATA_HOME": "relative"}, HOME / ".local/share/oamd/models"),
        ("darwin", {}, HOME / "Library/Application Support/oamd/models"),
        (
            "win32",
            {"LOCALAPPDATA": "C:/Users/ada/AppData/Local"},
            Path("C:/Users/ada/AppData/Local/oamd/models"),
        ),
        ("win32", {"OAMD_MODELS": "/elsewhere"}, Path("/elsewhere")),
        ("linux", {"OAMD_MODELS": "/elsewhere", "XDG_DATA_HOME": "/data"}, Path("/elsewhere")),
    ],
)
def test_the_store_folder_follows_the_platforms_convention_unless_oamd_models_moves_it(
    platform, environ, expected
):
    assert store_folder(environ, platform, HOME) == expected


def check(*argv: str, env: dict[str, str]) -> tuple[int, dict]:
    done = subprocess.run(
        [*OAMD, "check", *argv],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env={**os.environ, **env},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, orjson.loads(done.stdout)


def smollm2() -> Path:
    path = packaged_model_path()
    assert path is not None
    return path


def test_a_name_no_catalog_or_store_knows_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [*OAMD, "check", "--model", "llamacpp:no-such-model"],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env={**os.environ, "OAMD_MODELS": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "no model 'no-such-model'" in done.stderr and "oamd models list" in done.stderr


@needs_llama
@pytest.mark.anyio
async def test_a_catalog_model_not_pulled_is_downloadable_and_names_its_pull(tmp_path, monkeypatch):
    monkeypatch.setenv("OAMD_MODELS", str(tmp_path))
    args = ["--model", "llamacpp:qwen2.5-0.5b-instruct"]
    async with connect_stdio(args=args) as client:
        with anyio.fail_after(WAIT_SECONDS):
            init = await client.request("initialize", {"protocolVersion": "1.0"})
            asked = await client.request("model/availability", {})
    for model in (init["model"], asked):
        assert model["available"] is False and model["status"] == "downloadable"
        assert model["reason"] == "model_not_ready"
        assert "oamd models pull qwen2.5-0.5b-instruct" in model["detail"]


@needs_llama
@pytest.mark.anyio
async def test_a_running_pull_reports_downloading_and_the_model_loads_once_it_lands(
    tmp_path, monkeypatch
):
    body = smollm2().read_bytes()
    paused_at = len(body) // 4
    route = Route(body, pause_after=paused_at)
    monkeypatch.setenv("OAMD_MODELS", str(tmp_path))
    with serving({"/SmolLM2-135M-Instruct.Q4_1.gguf": route}) as server:
        url = server.url("/SmolLM2-135M-Instruct.Q4_1.gguf")
        with anyio.fail_after(WAIT_SECONDS):
            pull = await anyio.open_process(
                [*OAMD, "models", "pull", url, "--progress", "json"], env=dict(os.environ)
            )
            assert pull.stderr is not None
            said = b""
            while b"pull_started" not in said:  # written once the pull has announced itself
                said += await pull.stderr.receive()
            await anyio.to_thread.run_sync(route.paused.wait)
            args = ["--model", "llamacpp:smollm2-135m-instruct.q4_1"]
            async with connect_stdio(args=args) as client:
                await client.request("initialize", {"protocolVersion": "1.0"})
                during = await client.request("model/availability", {})
                # the bytes sent before the pause may still be on their way to the part file:
                # ask again, as an engine polls while a model downloads
                while during.get("bytesDownloaded") != paused_at:
                    during = await client.request("model/availability", {})
                route.release.set()
                await pull.wait()
                after = await client.request("model/availability", {})
    assert pull.returncode == 0
    assert during["status"] == "downloading" and during["available"] is False
    assert during["bytesDownloaded"] == paused_at and during["totalBytes"] == len(body)
    assert "oamd models pull smollm2-135m-instruct.q4_1" in during["detail"]
    assert after["available"] is True and after["status"] == "available"
    assert sha256((tmp_path / "smollm2-135m-instruct.q4_1.gguf").read_bytes()) == sha256(body)


def fake_ollama(root: Path, name: str, tag: str, model: Path) -> None:
    """Ollama's layout: a manifest naming the model layer, the blob named by its digest."""
    digest = sha256(model.read_bytes())
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / f"sha256-{digest}").symlink_to(model)
    (root / "blobs" / "sha256-template").write_text("{{ .Prompt }}")
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / name / tag
    manifest.parent.mkdir(parents=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:template"},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"},
    ]
    manifest.write_bytes(orjson.dumps({"schemaVersion": 2, "layers": layers}))


@needs_llama
def test_a_model_ollama_pulled_loads_from_its_blob_without_a_copy(tmp_path):
    fake_ollama(tmp_path, "smollm2", "135m", smollm2())
    code, model = check("--model", "ollama:smollm2:135m", env={"OLLAMA_MODELS": str(tmp_path)})
    assert code == 0, model
    assert model["available"] is True
    assert str(tmp_path / "blobs") in model["detail"]
    assert [p.name for p in tmp_path.rglob("*.gguf")] == []


@needs_llama
def test_a_model_ollama_has_not_pulled_is_unavailable_and_names_ollama_pull(tmp_path):
    fake_ollama(tmp_path, "smollm2", "135m", smollm2())
    code, model = check("--model", "ollama:qwen2.5", env={"OLLAMA_MODELS": str(tmp_path)})
    assert code == EXIT_UNAVAILABLE
    assert model["status"] == "unavailable"
    assert "ollama pull qwen2.5:latest" in model["detail"]


def fake_hf_cache(hub: Path, repo: str, file: str, model: Path) -> None:
    """The hub cache's layout: a blob by digest, a snapshot linking to it, ``refs/main``."""
    folder = hub / f"models--{repo.replace('/', '--')}"
    revision = "0123456789abcdef0123456789abcdef01234567"
    (folder / "blobs").mkdir(parents=True)
    blob = folder / "blobs" / sha256(model.read_bytes())
    blob.symlink_to(model)
    (folder / "snapshots" / revision).mkdir(parents=True)
    (folder / "snapshots" / revision / file).symlink_to(blob)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(revision)


@needs_llama
def test_a_hugging_face_cache_file_loads_where_it_lies(tmp_path):
    fake_hf_cache(tmp_path / "hub", "HuggingFaceTB/SmolLM2-135M", "smol.Q4_1.gguf", smollm2())
    code, model = check(
        "--model",
        "llamacpp:hf:HuggingFaceTB/SmolLM2-135M/smol.Q4_1.gguf",
        env={"HF_HOME": str(tmp_path), "HF_HUB_CACHE": ""},
    )
    assert code == 0, model
    assert model["available"] is True and "snapshots" in model["detail"]


@needs_llama
def test_a_file_the_hugging_face_cache_lacks_names_the_download_command(tmp_path):
    code, model = check(
        "--model",
        "llamacpp:hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf",
        env={"HF_HOME": str(tmp_path), "HF_HUB_CACHE": ""},
    )
    assert code == EXIT_UNAVAILABLE
    assert "huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct-GGUF" in model["detail"]


MODEL_LAYER = "application/vnd.ollama.image.model"
HOSTILE_MANIFESTS = [
    b'{"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": null}]}',
    b'{"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": 5}]}',
    b'{"layers": [{"mediaType": "application/vnd.ollama.image.model"}]}',
    b'{"layers": 5}',
    b'{"layers": "sha256:0"}',
    b'{"layers": {"mediaType": "application/vnd.ollama.image.model"}}',
    b'{"layers": [null, 5, "x", [1]]}',
    b'{"layers": [{"mediaType": ["x"], "digest": {}}]}',
    b"[1, 2]",
    b"null",
    b"\xff\xfe not UTF-8",
]
"""Manifests someone else's Ollama folder may hold: wrong JSON types where a layer list, a
layer or a digest should be, or no JSON at all."""


def hostile_ollama(root: Path, manifest: bytes) -> None:
    folder = root / "manifests" / "registry.ollama.ai" / "library" / "smollm2"
    folder.mkdir(parents=True)
    (folder / "135m").write_bytes(manifest)
    (folder / "latest").symlink_to(root / "nowhere")  # a dangling manifest


def hostile_hf_cache(hub: Path, odd: tuple[str, ...] = ("dangling", "refs")) -> None:
    """A repo folder whose ``snapshots/`` holds a file and an empty snapshot, and (``odd``) a
    dangling symlink, a ``refs/main`` that is not UTF-8."""
    folder = hub / "models--HuggingFaceTB--SmolLM2-135M"
    (folder / "snapshots" / "0123").mkdir(parents=True)
    (folder / "snapshots" / "a-file").write_text("not a snapshot")
    if "dangling" in odd:
        (folder / "snapshots" / "dangling").symlink_to(folder / "gone")
    if "refs" in odd:
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_bytes(b"\xff\xfe")


@pytest.mark.parametrize("manifest", HOSTILE_MANIFESTS)
def test_a_hostile_ollama_manifest_is_skipped_by_oamd_check(tmp_path, manifest):
    hostile_ollama(tmp_path, manifest)
    for name in ("ollama:smollm2:135m", "ollama:smollm2"):
        code, model = check("--model", name, env={"OLLAMA_MODELS": str(tmp_path)})
        assert code == EXIT_UNAVAILABLE, model
        assert model["status"] == "unavailable" and "ollama pull smollm2" in model["detail"]


@pytest.mark.parametrize("odd", [("dangling",), ("refs",), ("dangling", "refs")])
def test_a_hostile_hugging_face_cache_is_skipped_by_oamd_check(tmp_path, odd):
    hostile_hf_cache(tmp_path / "hub", odd)
    code, model = check(
        "--model",
        "llamacpp:hf:HuggingFaceTB/SmolLM2-135M/smol.Q4_1.gguf",
        env={"HF_HOME": str(tmp_path), "HF_HUB_CACHE": ""},
    )
    assert code == EXIT_UNAVAILABLE, model
    assert "huggingface-cli download HuggingFaceTB/SmolLM2-135M smol.Q4_1.gguf" in model["detail"]


@needs_llama
def test_a_good_snapshot_beside_a_dangling_link_still_loads(tmp_path):
    hub = tmp_path / "hub"
    hostile_hf_cache(hub)
    snapshot = hub / "models--HuggingFaceTB--SmolLM2-135M" / "snapshots" / "0123"
    (snapshot / "smol.Q4_1.gguf").symlink_to(smollm2())
    code, model = check(
        "--model",
        "llamacpp:hf:HuggingFaceTB/SmolLM2-135M/smol.Q4_1.gguf",
        env={"HF_HOME": str(tmp_path), "HF_HUB_CACHE": ""},
    )
    assert code == 0, model
    assert model["available"] is True


@pytest.mark.anyio
async def test_hostile_caches_are_unavailable_models_through_the_protocol(tmp_path, monkeypatch):
    hostile_ollama(tmp_path / "ollama", HOSTILE_MANIFESTS[0])
    hostile_hf_cache(tmp_path / "hf" / "hub")
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    for spec in ("ollama:smollm2:135m", "llamacpp:hf:HuggingFaceTB/SmolLM2-135M/smol.Q4_1.gguf"):
        async with connect_stdio(args=["--model", spec]) as client:
            with anyio.fail_after(WAIT_SECONDS):
                init = await client.request("initialize", {"protocolVersion": "1.0"})
                asked = await client.request("model/availability", {})
        for model in (init["model"], asked):
            assert model["available"] is False and model["status"] == "unavailable", model


@pytest.mark.parametrize(
    ("kind", "reference"),
    [
        ("hf", "HuggingFaceTB/SmolLM2-135M/smol.Q4_1.gguf\n"),
        ("hf", "HuggingFaceTB/SmolLM2-135M\n/smol.Q4_1.gguf"),
        ("ollama", "smollm2:135m\n"),
        ("ollama", "smollm2\n:135m"),
        ("ollama", "library/smollm2\n"),
        ("store", "qwen2.5-0.5b-instruct\n"),
    ],
)
def test_a_reference_with_a_line_break_is_refused(tmp_path, kind, reference):
    with pytest.raises(ValueError, match=r"expected|not a model name"):
        locator(kind, reference, store=Store(tmp_path), environ={"OLLAMA_MODELS": str(tmp_path)})


@pytest.mark.parametrize(
    "spec",
    ["llamacpp:hf:HuggingFaceTB/SmolLM2-135M\n/smol.Q4_1.gguf", "ollama:smollm2\n:135m"],
)
def test_a_model_spec_with_a_line_break_inside_is_a_usage_error(tmp_path, spec):
    """(One at the end is stripped with the spec's other surrounding blanks.)"""
    done = subprocess.run(
        [*OAMD, "check", "--model", spec],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env={**os.environ, "OAMD_MODELS": str(tmp_path), "OLLAMA_MODELS": str(tmp_path)},
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["m\n", "m\n\n", "\nm"])
def test_a_store_name_ending_in_a_line_break_is_refused(name):
    with pytest.raises(ValueError, match="not a model name"):
        check_name(name)
    with pytest.raises(ValueError, match="cannot name a model"):
        name_from_url(f"https://example.com/{quote(name)}.gguf")

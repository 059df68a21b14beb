"""The model ``make dist-llama MODEL=…`` bundles (``oamd.models.bundle``, called by the
PyInstaller spec): SmolLM2 by default, a pulled model by its name, any GGUF by its path, and a
clear refusal for anything else, before a build starts."""

from __future__ import annotations

import pytest
from model_server import small_gguf

from oamd.models.bundle import model_to_bundle
from oamd.models.store import Store


@pytest.mark.parametrize("choice", ["", "llamacpp", "llamacpp?choices=generation"])
def test_the_default_choice_bundles_the_packaged_model(tmp_path, choice):
    assert model_to_bundle(choice, Store(tmp_path)) is None


def test_a_pulled_name_or_a_path_bundles_that_file(tmp_path):
    store = Store(tmp_path / "store")
    store.folder.mkdir()
    pulled = store.folder / "mine.gguf"
    pulled.write_bytes(small_gguf(64))
    elsewhere = tmp_path / "Other.Q4_K_M.gguf"
    elsewhere.write_bytes(small_gguf(64, seed=1))
    assert model_to_bundle("mine", store) == pulled
    assert model_to_bundle("llamacpp:mine", store) == pulled
    assert model_to_bundle(str(elsewhere), store) == elsewhere


def test_a_name_not_pulled_is_refused_naming_the_pull(tmp_path):
    with pytest.raises(ValueError, match=r"oamd models pull qwen3-0\.6b"):
        model_to_bundle("qwen3-0.6b", Store(tmp_path))


def test_a_file_that_is_not_a_gguf_is_refused(tmp_path):
    page = tmp_path / "page.gguf"
    page.write_bytes(b"<html>sign in</html>")
    with pytest.raises(ValueError, match="not a GGUF file"):
        model_to_bundle(str(page), Store(tmp_path))

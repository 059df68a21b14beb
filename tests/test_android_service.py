"""The p4a service entry's serving options (``android_host/service/main.py``), without a phone."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ENTRY = Path(__file__).resolve().parents[1] / "android_host" / "service" / "main.py"


@pytest.fixture(scope="module")
def entry() -> ModuleType:
    spec = importlib.util.spec_from_file_location("oamd_service_main", ENTRY)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_games_get_two_abstract_sockets(entry, tmp_path):
    one = entry.serve_options({}, "com.studio.first", tmp_path)
    two = entry.serve_options({}, "com.studio.second", tmp_path)
    assert one.abstract == ["com.studio.first.oamd"]
    assert two.abstract == ["com.studio.second.oamd"]


def test_a_chosen_abstract_name_stays_under_the_package(entry, tmp_path):
    options = entry.serve_options({"abstract": "npc"}, "com.studio.first", tmp_path)
    assert options.abstract == ["com.studio.first.npc"]


def test_the_service_runs_one_generation_at_a_time(entry, tmp_path):
    options = entry.serve_options({"tcp": "127.0.0.1:0"}, "com.studio.first", tmp_path)
    assert options.max_generations == 1
    assert options.tcp == ["127.0.0.1:0"]
    assert options.token_file == str(tmp_path / "token")
    assert options.ready_file == str(tmp_path / "ready.json")

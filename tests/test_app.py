"""Start-up wiring: ``oamd stdio`` loads only what ``initialize`` needs, lists every method anyway,
loads a namespace with its first call, and a namespace that cannot load answers a clear error
while every other method keeps working."""

from __future__ import annotations

import importlib
import subprocess
import sys

import anyio
import pytest
from conftest import memory_daemon

from oamd.bridge.extensions import EXTENSIONS, TESTING
from oamd.client import RpcError
from oamd.daemon import build_registry, default_config
from oamd.rpc import Registry

pytestmark = pytest.mark.anyio

HEAVY = (
    "oamd.bridge.session.methods",
    "oamd.bridge.game.npc.methods",
    "oamd.bridge.game.world.methods",
    "oamd.bridge.game.decision.methods",
    "oamd.agent.session",
    "oamd.agent.schema",
    "oamd.agent.run_turn",
    "oamd.game.npc",
    "oamd.backends.scripted.model",
    "oamd.serve",
    "oamd.recording",
    "structlog",
    "pydantic",
    "jsonschema",
    "httpx",
)


@pytest.mark.parametrize(
    "namespace",
    [n for extension in (*EXTENSIONS, TESTING) for n in extension.namespaces],
    ids=lambda n: n.name,
)
def test_each_namespace_registers_exactly_what_the_table_lists(namespace):
    registry = Registry()
    importlib.import_module(f"oamd.bridge.{namespace.module}").register(registry)
    assert sorted(registry.methods) == sorted(namespace.methods)
    assert registry.notifications == list(namespace.notifications)
    assert registry.client_requests == list(namespace.client_requests)


def test_answering_initialize_over_stdio_loads_no_namespace_model_or_logging_library():
    probe = (
        "import sys, anyio\n"
        "from oamd.cli import main\n"
        "code = main(['stdio'])\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    line = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1.0"}}\n'
    done = subprocess.run(
        [sys.executable, "-c", probe], input=line, capture_output=True, timeout=30, check=True
    )
    assert b'"methods":[' in done.stdout and b"npc/talk" in done.stdout
    assert done.stderr.decode().strip().splitlines()[-1] == "[]"


async def test_a_namespace_loads_with_its_first_call_and_initialize_lists_it_before():
    registry = build_registry(default_config(test_methods=True))
    stand_in = registry.get("world/create")
    async with memory_daemon(registry=registry) as client:
        with anyio.fail_after(5):
            methods = (await client.request("initialize", {}))["capabilities"]["methods"]
            assert "world/create" in methods and registry.get("world/create") is stand_in
            created = await client.request("world/create", {"world": "w"})
    assert created["world"] == "w"
    assert registry.get("world/create") is not stand_in
    assert registry.get("world/get") is not stand_in  # the whole namespace came with it


async def test_a_namespace_that_cannot_load_fails_its_call_and_nothing_else(monkeypatch):
    real_import = importlib.import_module

    def broken(name: str, *args):
        if name == "oamd.bridge.game.decision.methods":
            raise ImportError("no module named 'oamd.bridge.game.decision.methods' (simulated)")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", broken)
    async with memory_daemon() as client:
        with anyio.fail_after(5):
            with pytest.raises(RpcError) as info:
                await client.request("decision/decide", {"question": "?", "options": ["a"]})
            assert info.value.code == -32603
            assert info.value.message == (
                "The decision methods could not be loaded "
                "(ImportError: no module named 'oamd.bridge.game.decision.methods' (simulated))."
            )
            assert await client.request("ping") == {}
            assert (await client.request("world/create", {}))["world"]
            monkeypatch.setattr(importlib, "import_module", real_import)  # fixed: tried again
            with pytest.raises(RpcError) as again:
                await client.request("decision/decide", {"question": "?"})
    assert again.value.name == "invalid_params"

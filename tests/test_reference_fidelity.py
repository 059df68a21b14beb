"""Checks taken from the references' own tests, through the protocol: a client tool named
``respond`` is refused as open-android-models refuses it (the text-only loop's model answers
``{"action": "respond"}`` to reply, so such a tool would make every answer ambiguous), and a blank
``userLabel`` or ``assistantLabel`` is refused as its ``session/create`` refuses it."""

from __future__ import annotations

from typing import Any

import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

RESPOND_TOOL = {
    "name": "respond",
    "description": "Says something.",
    "parameters": {"type": "object"},
}
RESERVED = "'tools[1].name' 'respond' is reserved for the model's reply step; choose another name."
LOOK = {"name": "look", "description": "Looks.", "parameters": {"type": "object"}}
MODELS = {
    "native loop": {"type": "scripted", "steps": [{"text": "Hi."}]},
    "envelope loop": {
        "type": "scripted",
        "style": "envelope",
        "steps": [{"raw": '{"action": "respond"}'}, {"raw": "Hi."}],
    },
}


async def refusal(client, method: str, params: dict[str, Any]) -> tuple[int, str, str]:
    with pytest.raises(RpcError) as caught:
        await client.request(method, params)
    return caught.value.code, caught.value.name, caught.value.message


@pytest.mark.parametrize("loop", list(MODELS))
async def test_a_client_tool_named_respond_is_refused_on_either_loop(client, loop):
    params = {"session": "s", "model": MODELS[loop], "tools": [LOOK, RESPOND_TOOL]}
    assert await refusal(client, "session/create", params) == (-32602, "invalid_params", RESERVED)
    await client.request("session/create", {"session": "s", "model": MODELS[loop], "tools": [LOOK]})
    set_tools = {"session": "s", "tools": [LOOK, RESPOND_TOOL]}
    assert await refusal(client, "session/setTools", set_tools) == (
        -32602,
        "invalid_params",
        RESERVED,
    )
    reply = await client.request("session/respond", {"session": "s", "prompt": "Hello."})
    assert reply["text"] == "Hi."  # the session kept its tools and still answers


async def test_tools_validate_refuses_a_tool_named_respond(client):
    assert await refusal(client, "tools/validate", {"tools": [LOOK, RESPOND_TOOL]}) == (
        -32602,
        "invalid_params",
        RESERVED,
    )


@pytest.mark.parametrize("label", ["userLabel", "assistantLabel"])
@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
async def test_a_blank_prompt_label_is_refused(client, label, blank):
    params = {"session": "s", "options": {label: blank}}
    assert await refusal(client, "session/create", params) == (
        -32602,
        "invalid_params",
        f"Parameter 'options.{label}' must not be blank.",
    )
    listed = await client.request("session/list")
    assert listed["sessions"] == []

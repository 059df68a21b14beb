"""The ``initialize`` handshake, written once for every way a connection opens: the socket
connectors send it (with the daemon's token) before handing the client out, and
``Bridge.initialize`` sends it over a spawned or an already open client."""

from __future__ import annotations

from typing import Any

from oamd.client._client import Client

__all__ = ["CLIENT_NAME", "PROTOCOL_VERSION", "initialize"]

PROTOCOL_VERSION = "1.0"
CLIENT_NAME = "oamd.client"


async def initialize(
    client: Client,
    client_name: str = CLIENT_NAME,
    *,
    token: str | None = None,
    timeout: float | None = None,
) -> Any:
    """Sends ``initialize`` (with ``token`` as ``auth`` when given) and returns its result as
    the daemon sent it; checking its shape is the typed layer's business (``InitializeResult``).

    Raises:
        RpcError: the daemon refused it (``invalid_message``: token missing or wrong).
    """
    params: dict[str, Any] = {"protocolVersion": PROTOCOL_VERSION, "client": {"name": client_name}}
    if token is not None:
        params["auth"] = token
    return await client.request("initialize", params, timeout=timeout)

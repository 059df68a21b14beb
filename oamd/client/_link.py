"""``BridgeLink``: what a session, NPC or world handle needs of the bridge that made it (its
client and its tool box), so that those modules import nothing of ``_bridge`` at any level."""

from __future__ import annotations

from typing import Protocol

from oamd.client._client import Client
from oamd.client._tools import ToolBox

__all__ = ["BridgeLink"]


class BridgeLink(Protocol):
    client: Client
    tools: ToolBox

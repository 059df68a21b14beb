"""``make demo``: a short scripted exchange with a real ``oamd stdio`` subprocess, printed readably."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import orjson

from oamd.client import connect_stdio

__all__ = ["main"]


def show(direction: str, message: dict[str, Any]) -> None:
    text = f"{direction} {orjson.dumps(message).decode()}"
    print(text if len(text) <= 160 else text[:157] + " …")


async def run() -> None:
    async with connect_stdio(
        [sys.executable, "-m", "oamd", "stdio"],
        on_message=lambda m: show("←", m),
    ) as client:
        init = await client.request(
            "initialize", {"client": {"name": "demo", "version": "1.0"}, "protocolVersion": "1.0"}
        )
        print(f"\nserver {init['server']['name']} {init['server']['version']}; ")
        print(f"methods: {', '.join(init['capabilities']['methods'])}")
        await client.request("ping")
        availability = await client.request("model/availability")
        print(f"system model available: {availability['available']}\n")
        await client.request("shutdown")


def main() -> None:
    anyio.run(run)


if __name__ == "__main__":
    main()

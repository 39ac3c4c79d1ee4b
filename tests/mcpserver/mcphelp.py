"""Helpers for the MCP tests: the SDK's own stdio client driving ``python -m mailslot mcp``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from mailslot.mcpserver.config import ServerConfig, load_config


@dataclass
class Setup:
    """Where everything a server can serve lives."""

    root: Path
    chats: Path
    bus: Path
    keys: Path

    def args(self, agent: str, *, only_exchange: bool = False) -> list[str]:
        """``mailslot mcp`` arguments serving every channel as ``agent``."""
        out = ["--root", str(self.root), "--as", agent]
        if not only_exchange:
            out += ["--chat-dir", str(self.chats), "--bus", str(self.bus), "--keys", str(self.keys)]
        return out


# Generous: a loaded 2-core machine takes seconds to import the SDK in a fresh process.
CALL_TIMEOUT = 120.0
# An idle check is what an agent polls most: its whole result stays this small.
IDLE_MAX_BYTES = 200


def config(setup: Setup, agent: str = "claude") -> ServerConfig:
    """The server's configuration for ``agent`` serving every channel of ``setup``."""
    return load_config(agent, root=setup.root, chat_dir=setup.chats, bus=setup.bus, keys=setup.keys)


def server_env() -> dict[str, str]:
    """What a spawned server needs from the test's environment (the SDK passes few variables)."""
    keep = ("XDG_STATE_HOME", "MAILSLOT_STATE_DIR", "PATH", "HOME")
    return {k: os.environ[k] for k in keep if k in os.environ}


@asynccontextmanager
async def server(*args: str) -> AsyncIterator[ClientSession]:
    """A running ``mailslot mcp ARGS`` server and an initialised client session to it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mailslot", "mcp", *args], env=server_env()
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, **arguments: Any) -> tuple[bool, str]:
    """``(is_error, text)`` of one tool call."""
    res = await session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT)
    assert len(res.content) == 1
    return res.is_error, res.content[0].text  # type: ignore[union-attr]


async def call_json_size(session: ClientSession, name: str, **arguments: Any) -> tuple[str, int]:
    """The text of a result and the size in bytes of the whole result as JSON."""
    res = await session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT)
    raw = res.model_dump_json(by_alias=True, exclude_none=True)
    return res.content[0].text, len(raw.encode())  # type: ignore[union-attr]


def tools_json(tools: Any) -> str:
    """The JSON of a listed tool set (names, descriptions, input schemas, annotations)."""
    return json.dumps(
        [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools.tools]
    )

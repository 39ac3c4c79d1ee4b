"""What one MCP server serves and as whom, fixed when it starts.

Identity comes from the transport: the host that starts ``mailslot mcp --as olu`` decides who the
agent is, exactly as the Unix user decides which folder a CLI agent can write. No tool takes a
sender, side or agent argument, so a model cannot act as someone else by filling one in.

Each channel is served only when it is configured, and everything is checked at start: a root
that is not an exchange, an agent that is not one of its members, a chat directory or bus that
does not exist stops the server with one line before any tool is listed (a host shows a server
that failed to start; it does not show a tool that can only fail).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailslot.core.errors import InvalidValue, MissingAgent, NotFound
from mailslot.core.names import validate_agent

__all__ = ["ServerConfig", "load_config"]


@dataclass(frozen=True)
class ServerConfig:
    """The agent and the channels one server exposes (``None``: not served)."""

    agent: str
    exchange: Any = None  # mailslot.exchange.layout.Exchange
    chat_dir: Path | None = None
    bus: Path | None = None
    keys: Path | None = None
    waking_id: str | None = None
    search: bool = False  # serve the search tool over the roots above

    @property
    def side(self) -> str | None:
        """The agent's side of the exchange, when one is served."""
        return None if self.exchange is None else str(self.exchange.side_of(self.agent))

    def argv(self) -> list[str]:
        """The ``mailslot mcp`` arguments that start this same server (for onboarding)."""
        out = ["mcp"]
        if self.exchange is not None:
            out += ["--root", str(self.exchange.root)]
        out += ["--as", self.agent]
        if self.chat_dir is not None:
            out += ["--chat-dir", str(self.chat_dir)]
        if self.bus is not None:
            out += ["--bus", str(self.bus)]
        if self.keys is not None:
            out += ["--keys", str(self.keys)]
        if self.search:
            out.append("--search")
        return out


def load_config(
    agent: str | None,
    *,
    root: Path | None = None,
    chat_dir: Path | None = None,
    bus: Path | None = None,
    keys: Path | None = None,
    waking_id: str | None = None,
    search: bool = False,
) -> ServerConfig:
    """Check and load what a server will serve; ``MailslotError`` (one line) for anything wrong.

    ``Conflict`` when ``agent`` is not a member of the exchange (the message lists the members),
    ``NotFound`` for a missing exchange, chat directory, bus or keys file, ``InvalidName``.
    """
    if not agent:
        raise MissingAgent("who is the agent? pass --as NAME or set MAILSLOT_AGENT")
    validate_agent(agent)
    ex = None
    if root is not None:
        from mailslot.exchange.layout import load_exchange

        ex = load_exchange(root)
        ex.side_of(agent)
    if chat_dir is not None:
        chat_dir = chat_dir.expanduser().absolute()
        if not chat_dir.is_dir():
            raise NotFound("no such chat directory", path=chat_dir)
    if bus is not None:
        from mailslot.bus.layout import Layout

        bus = Layout.at(bus.expanduser()).root
    if keys is not None:
        from mailslot.web.auth import load_keys

        keys = keys.expanduser().absolute()
        if not keys.is_file():
            raise NotFound("no such keys file (add a peer with `mailslot peer add`)", path=keys)
        load_keys(keys)
    if ex is None and chat_dir is None and bus is None and keys is None:
        raise InvalidValue(
            "nothing to serve: give --root EXCHANGE (or MAILSLOT_ROOT), --chat-dir DIR, "
            "--bus DIR or --keys FILE"
        )
    if search and ex is None and chat_dir is None and bus is None:
        raise InvalidValue("--search searches --root, --chat-dir and --bus: give one of them")
    return ServerConfig(agent, ex, chat_dir, bus, keys, waking_id or None, search)


def env_waking() -> str | None:
    """``$MAILSLOT_WAKING``: the host's id of this run, passed to ``log append``."""
    return os.environ.get("MAILSLOT_WAKING") or None

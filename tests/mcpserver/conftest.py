"""MCP fixtures: an exchange (claude/olu), a chat directory, a bus and a peer keys file."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcphelp import Setup

from mailslot.bus import layout
from mailslot.exchange.create import create_exchange
from mailslot.web.auth import add_key


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    """An exchange claude/olu (no git), an empty chat dir, a bus, a keys file naming beacon."""
    root = tmp_path / "x"
    create_exchange(root, ["claude", "olu"], git=False)
    chats = tmp_path / "chats"
    chats.mkdir()
    bus = tmp_path / "shared"
    layout.init(bus, consumer="beacon")
    keys = tmp_path / "keys.json"
    add_key(keys, "beacon", "http://127.0.0.1:9/", "mst_not-a-real-token")
    return Setup(root, chats, bus, keys)

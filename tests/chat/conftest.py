"""Chat fixtures: a fresh chat file opened by alice, in its own directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot import chat


@pytest.fixture
def chat_file(tmp_path: Path) -> Path:
    """A new chat created by ``alice`` in ``tmp_path/room``."""
    room = tmp_path / "room"
    room.mkdir()
    return chat.new_chat("ship the parser", room, "alice", "kick-off", cwd=room).path

"""A command that fails has written nothing: a full state dir fails a join or a new chat whole.

The joiner's name and cursor live in the state dir; they are stored before the joining block is
appended, so a state dir that cannot take them leaves the chat untouched and the name free, and
``new`` takes back the file it made. The state dir here is a real 16 KiB tmpfs, filled up.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailslot import chat
from mailslot.cli import cli
from mailslot.core.errors import NoSpace


@pytest.fixture
def small_disk_size() -> str:
    return "16k"


@pytest.fixture
def full_state(small_disk: Path, fill_disk, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``XDG_STATE_HOME`` on a 16 KiB tmpfs filled to the last byte; yields the filler file
    (remove it to make room)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(small_disk))
    filler = fill_disk(small_disk)
    with pytest.raises(OSError) as full:  # nothing more fits, not even an empty file
        (small_disk / "probe").mkdir()
        (small_disk / "probe" / "x").write_bytes(b"x")
    assert full.value.errno == errno.ENOSPC
    yield filler


@pytest.fixture
def shared_chat(tmp_path: Path) -> Path:
    """A chat made by alice before the state dir filled up (its state lives elsewhere)."""
    room = tmp_path / "room"
    room.mkdir()
    return chat.new_chat("t", room, "alice", state=tmp_path / "alice-state").path


def test_a_join_on_a_full_state_dir_writes_nothing(shared_chat: Path, full_state: Path) -> None:
    before = shared_chat.read_bytes()
    with pytest.raises(NoSpace) as failed:
        chat.join(shared_chat, "bob")
    assert shared_chat.read_bytes() == before
    assert "nothing was written to the chat" in str(failed.value)
    with pytest.raises(NoSpace, match="nothing was written"):
        chat.join(shared_chat)  # a generated name: the same
    assert shared_chat.read_bytes() == before
    full_state.unlink()  # room again: the name was never taken
    assert chat.join(shared_chat, "bob").name == "bob"
    assert chat.status(shared_chat).participants == ["alice", "bob"]


def test_the_cli_join_reports_one_line_and_writes_nothing(
    shared_chat: Path, full_state: Path
) -> None:
    from click.testing import CliRunner

    before = shared_chat.read_bytes()
    r = CliRunner().invoke(cli, ["chat", "join", str(shared_chat), "--as", "bob"])
    assert r.exit_code == 1 and shared_chat.read_bytes() == before
    assert r.stderr.startswith("mailslot: error:") and r.stderr.count("\n") == 1
    assert "no space left" in r.stderr and "nothing was written" in r.stderr


def test_a_new_chat_on_a_full_state_dir_leaves_no_file(tmp_path: Path, full_state: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    with pytest.raises(NoSpace) as failed:
        chat.new_chat("t", room, "alice")
    assert list(room.iterdir()) == []
    assert "no chat was created" in str(failed.value)


def test_a_state_dir_that_fills_midway_keeps_nothing_of_the_join(
    shared_chat: Path, full_state: Path
) -> None:
    state = full_state.parent / "mailslot" / "cursors"
    (state / "chat").mkdir(parents=True)  # directories take no pages on a tmpfs
    (state / "chat-names").mkdir()
    os.truncate(full_state, full_state.stat().st_size - 4096)  # room for one small file
    before = shared_chat.read_bytes()
    with pytest.raises(NoSpace, match="nothing was written"):
        chat.join(shared_chat, "bob")  # the cursor fits, the remembered name does not
    assert shared_chat.read_bytes() == before
    assert list((state / "chat").iterdir()) == [] and list((state / "chat-names").iterdir()) == []

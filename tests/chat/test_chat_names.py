"""A chat name belongs to the caller that first wrote it: no second ``bob`` from elsewhere.

Two writers under one name break the chat for both: each one's ``wait`` drops the other's
messages as its own echo, and either one's accept counts for both in the end handshake. So a
join or a write under a name already seen as ``FROM`` in the file is refused unless this caller
(``$MAILSLOT_SESSION``, else the working directory) holds that name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import chat
from mailslot.cli import cli
from mailslot.core.errors import Conflict


def test_a_second_caller_cannot_join_or_speak_as_a_taken_name(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-one")
    chat.join(chat_file, "bob")
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-two")
    size = chat_file.stat().st_size
    with pytest.raises(Conflict, match=r"'bob' already speaks in this chat.*--as"):
        chat.join(chat_file, "bob")
    with pytest.raises(Conflict, match="'bob' already speaks"):
        chat.say(chat_file, "I am bob too", "bob")
    with pytest.raises(Conflict, match="'bob' already speaks"):
        chat.end(chat_file, "request", name="bob")
    with pytest.raises(Conflict, match="'alice' already speaks"):
        chat.say(chat_file, "I am alice", "alice")
    assert chat_file.stat().st_size == size  # nothing written
    assert chat.join(chat_file, "carol").name == "carol"  # another name is fine
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-one")
    assert chat.say(chat_file, "still me", "bob").sender == "bob"  # the holder goes on


def test_a_name_written_by_hand_is_taken_too(chat_file: Path) -> None:
    with chat_file.open("a") as f:  # a seed-002 bash agent, unknown to this state dir
        f.write("\n---MSG---\nFROM: dave\nTIME: 2026-11-30T01:00:00Z\n---\nhi\n")
    with pytest.raises(Conflict, match="'dave' already speaks"):
        chat.join(chat_file, "dave")
    with pytest.raises(Conflict, match="'dave' already speaks"):
        chat.say(chat_file, "hi", "dave")


def test_a_body_line_that_says_from_does_not_take_a_name(chat_file: Path) -> None:
    with chat_file.open("a") as f:  # a hand-written body line "FROM: erin" is no header
        f.write("\n---MSG---\nFROM: dave\nTIME: 2026-11-30T01:00:00Z\n---\nFROM: erin\n")
    assert chat.join(chat_file, "erin").name == "erin"


def test_the_cli_refuses_a_duplicate_join_with_one_line(chat_file: Path, monkeypatch) -> None:
    monkeypatch.setenv("MAILSLOT_SESSION", "first")
    assert CliRunner().invoke(cli, ["chat", "join", str(chat_file), "--as", "bob"]).exit_code == 0
    monkeypatch.setenv("MAILSLOT_SESSION", "second")
    r = CliRunner().invoke(cli, ["chat", "join", str(chat_file), "--as", "bob"])
    assert r.exit_code == 1
    assert r.stderr.startswith("mailslot: error:") and "'bob' already speaks" in r.stderr
    assert r.stderr.count("\n") == 1


def test_another_caller_cannot_move_a_held_names_cursor(chat_file: Path, monkeypatch) -> None:
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-one")
    chat.join(chat_file, "bob")
    monkeypatch.delenv("MAILSLOT_SESSION")  # alice's caller: the fixture's directory
    chat.say(chat_file, "for bob", "alice")
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-two")
    with pytest.raises(Conflict, match="'bob' already speaks"):
        chat.wait(chat_file, "bob", timeout=0)  # would take bob-one's messages off its cursor
    peek = chat.wait(chat_file, "bob", timeout=0, cursor=0)  # an explicit cursor stores nothing
    assert "for bob" in [m.body for m in peek.messages]
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-one")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["for bob"]

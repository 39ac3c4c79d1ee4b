"""Chat operations: new, join, say and the human check (waiting, names, ending: their own files)."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chat_helpers import bash_create
from click.testing import CliRunner

from mailslot import chat
from mailslot.chat.format import parse_messages
from mailslot.cli import cli
from mailslot.core import clock
from mailslot.core.errors import (
    Conflict,
    FormatError,
    LimitExceeded,
    WaitTimeout,
)


def bodies(path: Path) -> list[str]:
    return [m.body for m in parse_messages(path.read_bytes())[0]]


def test_new_writes_the_opening_message(tmp_path: Path) -> None:
    joined = chat.new_chat("monolith or microservices?", tmp_path, cwd=tmp_path)
    assert re.fullmatch(r"chat-\d{4}-\d{2}-\d{2}-\d{6}\.txt", joined.path.name)
    assert joined.path.is_absolute() and joined.path.parent == tmp_path
    assert re.fullmatch(r"[a-z]+-\d{5}", joined.name)  # generated <firstname>-<5 digits>
    [opening] = parse_messages(joined.path.read_bytes())[0]
    assert opening.sender == joined.name
    lines = opening.body.splitlines()
    assert lines[0] == "TOPIC: monolith or microservices?"
    assert lines[1] == f"CWD: {tmp_path.resolve()}"
    assert "may contain unrelated files" in lines[2]
    assert chat.status(joined.path).topic == "monolith or microservices?"


def test_two_chats_in_the_same_second_do_not_collide(tmp_path: Path) -> None:
    fixed = datetime(2026, 11, 29, 18, 14, 0, tzinfo=UTC)
    clock.set_clock(lambda: fixed)
    paths = [chat.new_chat("t", tmp_path, "alice").path for _ in range(3)]
    assert [p.name for p in paths] == [
        "chat-2026-11-29-181400.txt",
        "chat-2026-11-29-181400-2.txt",
        "chat-2026-11-29-181400-3.txt",
    ]
    assert all(len(parse_messages(p.read_bytes())[0]) == 1 for p in paths)


def test_bad_topic_is_refused_and_nothing_written(tmp_path: Path) -> None:
    with pytest.raises(LimitExceeded):
        chat.new_chat("two\nlines", tmp_path, "alice")
    with pytest.raises(LimitExceeded):
        chat.new_chat("x" * 201, tmp_path, "alice")
    assert os.listdir(tmp_path) == []


def test_join_shows_history_and_sets_cursor_to_the_end(chat_file: Path, tmp_path: Path) -> None:
    chat.say(chat_file, "first point", "alice")
    joined = chat.join(chat_file, "bob", "hello all", cwd=tmp_path)
    assert [m.sender for m in joined.history] == ["alice", "alice", "bob"]
    body = joined.history[-1].body
    assert "bob" in body and f"CWD: {tmp_path.resolve()}" in body
    assert "unrelated files" in body and body.endswith("hello all")
    assert joined.cursor == chat_file.stat().st_size
    # bob's next wait delivers only what comes after his join
    with pytest.raises(WaitTimeout):
        chat.wait(chat_file, "bob", timeout=0)
    chat.say(chat_file, "welcome bob", "alice")
    batch = chat.wait(chat_file, "bob", timeout=5)
    assert [m.body for m in batch.messages] == ["welcome bob"]


def test_say_refuses_protocol_markers_and_limits(chat_file: Path) -> None:
    before = chat_file.read_bytes()
    with pytest.raises(FormatError, match="chat end"):
        chat.say(chat_file, "---END-ACCEPT---", "alice")
    with pytest.raises(LimitExceeded):
        chat.say(chat_file, "x" * (64 * 1024 + 1), "alice")
    with pytest.raises(LimitExceeded):
        chat.say(chat_file, "\n\n", "alice")
    assert chat_file.read_bytes() == before  # refused whole, nothing written
    assert not Path(f"{chat_file}.lock").exists()  # and the mkdir lock was released


def test_human_check_is_open_until_its_author_approves(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    st = chat.check(chat_file, "I take the lexer, bob the parser?", name="alice")
    assert st.human_check is not None
    assert st.human_check["from"] == "alice"
    assert st.human_check["text"] == "I take the lexer, bob the parser?"
    with pytest.raises(Conflict, match="no open human check"):
        chat.approve(chat_file, "yes", name="bob")
    st = chat.approve(chat_file, "Approved by my human.", name="alice")
    assert st.human_check is None
    assert bodies(chat_file)[-1] == "---HUMAN-APPROVED---\nApproved by my human."


def test_the_topic_line_counts_wherever_it_stands_in_the_opening_message(tmp_path: Path) -> None:
    path = bash_create(tmp_path, "kiran-48291", "split the parser work")  # greeting, then TOPIC:
    assert chat.status(path).topic == "split the parser work"
    joined = chat.join(path, "zara")
    assert joined.topic == "split the parser work"
    chat.say(path, "TOPIC: something else entirely", "zara")  # not the opening message
    assert chat.status(path).topic == "split the parser work"
    r = CliRunner().invoke(cli, ["chat", "join", str(path), "--as", "neel"])
    assert r.exit_code == 0 and r.output.splitlines()[1] == "TOPIC: split the parser work"

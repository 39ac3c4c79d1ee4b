"""Chat operations: new, join, say, wait (cursor, own messages, timeout, removal), end, checks."""

from __future__ import annotations

import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chat_helpers import seed_create
from click.testing import CliRunner

from mailslot import chat
from mailslot.chat.format import parse_messages
from mailslot.cli import cli
from mailslot.core import clock
from mailslot.core.errors import (
    Conflict,
    FormatError,
    Gone,
    LimitExceeded,
    MailslotError,
    NotFound,
    WaitTimeout,
)


def bodies(path: Path) -> list[str]:
    return [m.body for m in parse_messages(path.read_bytes())[0]]


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


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


def test_wait_filters_own_messages_and_persists_the_cursor(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.say(chat_file, "mine", "bob")
    chat.say(chat_file, "theirs", "alice")
    chat.say(chat_file, "mine again", "bob")
    batch = chat.wait(chat_file, "bob", timeout=5)
    assert [(m.sender, m.body) for m in batch.messages] == [("alice", "theirs")]
    assert batch.cursor == chat_file.stat().st_size
    with pytest.raises(WaitTimeout):  # the cursor moved: nothing is delivered twice
        chat.wait(chat_file, "bob", timeout=0.05)


def test_explicit_cursor_is_not_persisted(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.say(chat_file, "one", "alice")
    batch = chat.wait(chat_file, "bob", timeout=5, cursor=0)
    assert [m.body for m in batch.messages][-1] == "one"
    assert "kick-off" in batch.messages[0].body  # from byte 0: alice's opening too
    again = chat.wait(chat_file, "bob", timeout=5)  # the stored cursor did not move
    assert [m.body for m in again.messages] == ["one"]


def test_a_message_written_while_composing_is_not_skipped(chat_file: Path) -> None:
    """Seed 002 sets CUR=$(wc -c) after its own write, skipping anything that landed between."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "question?", "alice")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["question?"]
    chat.say(chat_file, "and another thing", "alice")  # lands while bob composes
    chat.say(chat_file, "answer", "bob")  # bob's write does not move his cursor
    batch = chat.wait(chat_file, "bob", timeout=5)
    assert [m.body for m in batch.messages] == ["and another thing"]


def test_a_blocked_waiter_wakes_for_a_write(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    for i in range(20):
        t, box = in_thread(chat.wait, chat_file, "bob", timeout=30)
        chat.say(chat_file, f"msg {i}", "alice")  # before, during or after bob blocks
        t.join(30)
        assert [m.body for m in box["result"].messages] == [f"msg {i}"], box


def test_wait_times_out_with_nothing_new(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    with pytest.raises(WaitTimeout, match="no message from another participant"):
        chat.wait(chat_file, "bob", timeout=0.1)


def test_removing_the_file_ends_a_blocked_wait_with_gone(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    t, box = in_thread(chat.wait, chat_file, "bob", timeout=60)
    t.join(0.2)
    chat_file.unlink()
    t.join(30)
    assert isinstance(box.get("error"), Gone), box
    assert box["error"].exit_code == 4 and "removed" in str(box["error"])
    with pytest.raises(Gone):
        chat.wait(chat_file, "bob", timeout=1)
    with pytest.raises(NotFound):  # and a say does not recreate it
        chat.say(chat_file, "anyone?", "bob")
    assert not chat_file.exists()


def test_say_refuses_protocol_markers_and_limits(chat_file: Path) -> None:
    before = chat_file.read_bytes()
    with pytest.raises(FormatError, match="chat end"):
        chat.say(chat_file, "---END-ACCEPT---", "alice")
    with pytest.raises(LimitExceeded):
        chat.say(chat_file, "x" * (64 * 1024 + 1), "alice")
    with pytest.raises(LimitExceeded):
        chat.say(chat_file, "\n\n", "alice")
    assert chat_file.read_bytes() == before  # refused whole, nothing written
    assert not Path(f"{chat_file}.lock").exists()  # and the seed lock was released


def test_end_handshake_with_three_participants_and_a_reject(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.join(chat_file, "carol")
    with pytest.raises(Conflict, match="no end request"):
        chat.end(chat_file, "accept", name="bob")
    st = chat.end(chat_file, "request", "we agreed", name="alice")
    assert st.end_request is not None and st.end_request["waiting_for"] == ["bob", "carol"]
    with pytest.raises(Conflict, match="own end request"):
        chat.end(chat_file, "accept", name="alice")
    with pytest.raises(Conflict, match="pending"):
        chat.end(chat_file, "request", name="bob")
    st = chat.end(chat_file, "accept", name="bob")
    assert not st.ended and st.end_request and st.end_request["waiting_for"] == ["carol"]
    with pytest.raises(Conflict, match="already accepted"):
        chat.end(chat_file, "accept", name="bob")
    st = chat.end(chat_file, "reject", "one more question", name="carol")
    assert not st.ended and st.end_request is None
    assert st.last_rejection == {
        "from": "carol",
        "time": st.last_rejection["time"],
        "reason": "one more question",
    }
    chat.say(chat_file, "the question", "carol")
    st = chat.end(chat_file, "request", name="carol")
    st = chat.end(chat_file, "accept", name="alice")
    assert not st.ended  # bob's accept of the old request does not count
    st = chat.end(chat_file, "accept", name="bob")
    assert st.ended and st.participants == ["alice", "bob", "carol"]
    with pytest.raises(Conflict, match="ended"):
        chat.say(chat_file, "wait!", "alice")
    batch = chat.wait(chat_file, "carol", timeout=5)  # carol sees the final accepts...
    assert batch.ended and [m.kind for m in batch.messages][-2:] == ["end-accept", "end-accept"]
    with pytest.raises(Gone, match="ended"):  # ...and then the chat is over
        chat.wait(chat_file, "carol", timeout=5)


def test_a_participant_who_joins_during_a_request_must_accept_too(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.end(chat_file, "request", name="alice")
    chat.join(chat_file, "dave")
    st = chat.end(chat_file, "accept", name="bob")
    assert not st.ended and st.end_request and st.end_request["waiting_for"] == ["dave"]
    assert chat.end(chat_file, "accept", name="dave").ended


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


def test_generated_name_is_remembered_per_caller(chat_file: Path, monkeypatch) -> None:
    monkeypatch.setenv("MAILSLOT_SESSION", "session-one")
    joined = chat.join(chat_file)
    msg = chat.say(chat_file, "no --as needed")
    assert msg.sender == joined.name
    with pytest.raises(Conflict, match=f"--as {joined.name}"):
        chat.join(chat_file)  # a second session here must not silently share the name
    monkeypatch.setenv("MAILSLOT_SESSION", "session-two")
    with pytest.raises(MailslotError, match="who is speaking"):
        chat.say(chat_file, "who am I?")
    other = chat.join(chat_file)
    assert other.name != joined.name
    assert chat.say(chat_file, "me").sender == other.name
    assert chat.status(chat_file).participants == ["alice", joined.name, other.name]


def test_the_creators_generated_name_is_remembered(tmp_path: Path) -> None:
    joined = chat.new_chat("t", tmp_path)
    assert chat.say(joined.path, "hi").sender == joined.name


def test_bad_names_are_refused(chat_file: Path) -> None:
    with pytest.raises(MailslotError, match="invalid chat name"):
        chat.say(chat_file, "hi", "Bad Name")


def test_a_refused_join_remembers_no_name(chat_file: Path, monkeypatch) -> None:
    chat.join(chat_file, "bob")
    chat.end(chat_file, "request", name="alice")
    chat.end(chat_file, "accept", name="bob")
    monkeypatch.setenv("MAILSLOT_SESSION", "late")
    assert chat.status(chat_file).ended
    with pytest.raises(Conflict, match="ended"):
        chat.join(chat_file)
    assert chat.NameBook().recall(chat_file) is None


def test_the_topic_line_counts_wherever_it_stands_in_the_opening_message(tmp_path: Path) -> None:
    path = seed_create(tmp_path, "kiran-48291", "split the parser work")  # greeting, then TOPIC:
    assert chat.status(path).topic == "split the parser work"
    joined = chat.join(path, "zara")
    assert joined.topic == "split the parser work"
    chat.say(path, "TOPIC: something else entirely", "zara")  # not the opening message
    assert chat.status(path).topic == "split the parser work"
    r = CliRunner().invoke(cli, ["chat", "join", str(path), "--as", "neel"])
    assert r.exit_code == 0 and r.output.splitlines()[1] == "TOPIC: split the parser work"

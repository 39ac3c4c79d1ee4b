"""A chat name belongs to a session, not a directory, and a chat is its file's real path.

An explicit ``--as NAME`` acts as that speaker from any directory and any session (a shared
chat file is full trust), and every process acting as one name shares that speaker's cursor.
Only a new speaker can collide: a join (or a generated name) under a name that already speaks
is refused, since two joins as one name would be two agents each dropping the other's messages.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chat_helpers import bash_create, bash_read, bash_write
from click.testing import CliRunner

from mailslot import chat
from mailslot.cli import cli
from mailslot.core.cursor import ByteCursor, CursorStore
from mailslot.core.errors import (
    Conflict,
    MailslotError,
    WaitTimeout,
)


def test_an_explicit_name_speaks_from_any_directory_and_session(
    chat_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = tmp_path / "room" / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)  # the creator cd'd into a subfolder
    assert chat.say(chat_file, "still me", "alice").sender == "alice"
    monkeypatch.setenv("MAILSLOT_SESSION", "another-terminal")
    chat.join(chat_file, "bob")
    assert chat.say(chat_file, "from my second terminal", "alice").sender == "alice"
    assert chat.end(chat_file, "request", name="alice").end_request is not None
    assert chat.status(chat_file).participants == ["alice", "bob"]


def test_a_joining_name_that_already_speaks_is_refused(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-one")
    chat.join(chat_file, "bob")
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-two")
    size = chat_file.stat().st_size
    with pytest.raises(Conflict, match=r"'bob' already speaks in this chat.*--as bob"):
        chat.join(chat_file, "bob")
    assert chat_file.stat().st_size == size  # nothing written
    assert chat.join(chat_file, "carol").name == "carol"  # another name is fine
    assert chat.say(chat_file, "bob acting from bob-two", "bob").sender == "bob"


def test_a_name_written_by_hand_cannot_be_joined_but_can_be_acted_as(chat_file: Path) -> None:
    bash_write(chat_file, "dave", "hi, I follow the protocol by hand")
    bash_write(chat_file, "Kiran-48291", "so do I, with the protocol's capital letter")
    with pytest.raises(Conflict, match="'dave' already speaks"):
        chat.join(chat_file, "dave")
    with pytest.raises(Conflict, match="'Kiran-48291' already speaks"):
        chat.join(chat_file, "kiran-48291")  # one speaker whatever the case
    assert chat.say(chat_file, "dave, now through mailslot", "dave").sender == "dave"


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


def test_processes_acting_as_one_name_share_its_cursor(chat_file: Path, monkeypatch) -> None:
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-one")
    chat.join(chat_file, "bob")
    monkeypatch.delenv("MAILSLOT_SESSION")
    chat.say(chat_file, "for bob", "alice")
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-two")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["for bob"]
    monkeypatch.setenv("MAILSLOT_SESSION", "bob-one")
    with pytest.raises(WaitTimeout):  # one speaker: what bob-two took, bob-one has seen
        chat.wait(chat_file, "bob", timeout=0)


def test_every_spelling_of_the_path_is_one_chat(
    chat_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = chat_file.parent
    (room / "sub").mkdir()
    link = tmp_path / "link"
    link.symlink_to(room, target_is_directory=True)
    dotted = room / "sub" / ".." / chat_file.name
    via_link = link / chat_file.name
    monkeypatch.setenv("MAILSLOT_SESSION", "zara")
    joined = chat.join(dotted)  # a generated name, remembered for this session
    assert joined.path == chat_file.resolve()
    assert chat.say(via_link, "no --as needed").sender == joined.name
    monkeypatch.chdir(room / "sub")  # a session's name follows it from directory to directory
    assert chat.say(chat_file, "nor here").sender == joined.name
    with pytest.raises(Conflict, match=f"already speaks in this chat as '{joined.name}'"):
        chat.join(via_link)  # the same chat: no second identity for this session
    chat.say(chat_file, "for zara", "alice")
    got = chat.wait(via_link, timeout=5)  # the cursor stored by the join, found by real path
    assert [m.body for m in got.messages] == ["for zara"]
    assert chat.status(dotted).participants == ["alice", joined.name]


def test_state_kept_under_an_older_spelling_is_still_found(
    chat_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = tmp_path / "link"
    link.symlink_to(chat_file.parent, target_is_directory=True)
    spelled = link / chat_file.name
    monkeypatch.setenv("MAILSLOT_SESSION", "old")
    # What earlier releases stored: keys made of the path as the caller spelled it.
    CursorStore("chat-names").save(f"{spelled}\0session:old", {"name": "olga"})
    chat.say(chat_file, "olga joined.", "olga")
    mark = chat_file.stat().st_size
    CursorStore("chat").save_bytes(f"{spelled}\0olga", ByteCursor(mark, chat_file.stat().st_ino))
    chat.say(chat_file, "after olga's cursor", "alice")
    assert chat.say(spelled, "remembered").sender == "olga"
    assert [m.body for m in chat.wait(spelled, timeout=5).messages] == ["after olga's cursor"]


def test_without_a_name_the_error_says_to_pass_as(
    chat_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    joined = chat.join(chat_file)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # no session: a remembered name stays in its directory
    with pytest.raises(MailslotError, match=r"pass --as NAME.*any directory"):
        chat.say(chat_file, "who am I?")
    assert chat.say(chat_file, "me", joined.name).sender == joined.name


def test_a_human_in_a_second_terminal_speaks_with_as(tmp_path: Path, run_cli) -> None:
    home, elsewhere = tmp_path / "proj", tmp_path / "other"
    home.mkdir()
    elsewhere.mkdir()
    path = bash_create(home, "kiran-48291", "split the parser")  # a hand-run agent
    mark = path.stat().st_size
    r = run_cli("chat", "say", str(path), "human here", "--as", "kiran-48291", cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    r = run_cli("chat", "say", str(path), "and from a subfolder", "--as", "kiran-48291", cwd=home)
    assert r.returncode == 0, r.stderr
    seen = bash_read(path, mark)  # what the hand-run agent's loop reads next
    assert seen.count("FROM: kiran-48291") == 2 and "human here" in seen
    r = run_cli("chat", "say", str(path), "who?", cwd=elsewhere, env={"MAILSLOT_AGENT": ""})
    assert r.returncode == 2 and "--as" in r.stderr and r.stderr.count("\n") == 1
    assert os.path.getsize(path) == mark + len(seen.encode())


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

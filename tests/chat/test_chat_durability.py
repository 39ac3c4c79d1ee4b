"""A message is in the chat whole or not at all, and a say that fails never leads to it twice.

A writer SIGKILLed inside its append leaves no message: the fragment is cut out into ``.torn``,
not delivered. The kill is real: a ``mailslot chat say`` process dies by SIGKILL in the middle of
writing its block, leaving half of it in the file (and its ``FILE.lock`` directory behind, which
the human removes as the lock error says).

A full disk fails before anything is written, so the retry writes the message once. Whatever the
caller keeps on another disk (the state directory) either is not needed to speak or, when that
disk is full, fails the say with nothing in the chat. A block already written whose fsync fails
is reported as written, so nobody sends it again.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from chat_helpers import bash_write, bash_write_started

from mailslot import chat
from mailslot.chat import room
from mailslot.chat.format import render_message
from mailslot.core.clock import now
from mailslot.core.errors import MailslotError, WaitTimeout
from shared_helpers import names_left

BIG = "the long plan, " * 2000  # a 30 KB message: its write is the first large one
SAID = "Hand-run agent, waiting on the lock."  # what a hand-run bash agent appends


def test_a_message_torn_by_a_kill_is_never_delivered(
    chat_file: Path, killed_in_write, run_cli
) -> None:
    chat.join(chat_file, "bob")
    before = chat_file.stat().st_size
    killed_in_write("chat", "say", str(chat_file), BIG, "--as", "alice", at_bytes=16384)
    assert chat_file.stat().st_size > before  # half of alice's block is in the file
    assert Path(f"{chat_file}.lock", "owner").is_file()  # the dead writer's lock, with its record

    # meanwhile readers see the chat as it was before the torn block
    assert [m.sender for m in chat.read(chat_file).messages] == ["alice", "bob"]

    # the next writer's block follows the fragment: it must not complete it into a message
    r = run_cli("chat", "say", str(chat_file), "after the crash", "--as", "bob")
    assert r.returncode == 0, r.stderr  # and breaks the dead writer's lock to do it
    assert not Path(f"{chat_file}.lock").exists()
    got = json.loads(run_cli("chat", "read", str(chat_file), "--json").stdout)["messages"]
    assert [(m["from"], m["body"]) for m in got][1:] == [
        ("bob", got[1]["body"]),
        ("bob", "after the crash"),
    ]
    assert not any(BIG[:100] in m["body"] for m in got)

    # the fragment is kept aside and the status names it
    torn = Path(f"{chat_file}.torn")
    assert BIG[:1000] in torn.read_text()
    st = json.loads(run_cli("chat", "status", str(chat_file), "--json").stdout)
    assert st["torn"] == {"path": str(torn), "size": torn.stat().st_size}
    text = run_cli("chat", "status", str(chat_file)).stdout
    assert f"TORN: {torn.stat().st_size} bytes" in text and str(torn) in text
    # no intent is left once repaired
    assert [n for n in names_left(chat_file.parent) if n.endswith(".intent")] == []


def test_a_whole_message_leaves_no_intent_and_no_torn_file(chat_file: Path) -> None:
    chat.say(chat_file, BIG, "alice")
    assert names_left(chat_file.parent) == [chat_file.name]
    assert chat.status(chat_file).torn is None


def test_a_bash_agent_that_was_waiting_on_the_dead_writers_lock_keeps_its_message(
    chat_file: Path, killed_in_write, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat.join(chat_file, "bob")
    killed_in_write("chat", "say", str(chat_file), BIG, "--as", "alice", at_bytes=16384)
    agent = bash_write_started(chat_file, "Kiran-48291", SAID)  # spins on the dead lock

    monkeypatch.setattr(room, "LOCK_WAIT_SECONDS", 5.0)
    # the next mailslot writer repairs, then breaks the lock its record proves dead
    chat.say(chat_file, "anyone?", "carol")
    assert agent.wait(timeout=60) == 0  # the waiting agent goes once it is free

    said = SAID
    bodies = [m.body for m in chat.read(chat_file).messages]
    assert sorted(bodies[-2:]) == sorted([said, "anyone?"])  # readers see both
    chat.say(chat_file, "after the crash", "bob")
    bodies = [m.body for m in chat.read(chat_file).messages]
    assert bodies[-1] == "after the crash" and bodies.count(said) == 1
    torn = Path(f"{chat_file}.torn").read_text()
    assert BIG[:1000] in torn and said not in torn  # only the fragment is kept aside


@pytest.mark.parametrize("next_one", ["read", "say"])
def test_messages_bash_agents_append_after_a_torn_block_are_kept(
    chat_file: Path, killed_in_write, run_cli, next_one: str
) -> None:
    chat.join(chat_file, "bob")
    killed_in_write("chat", "say", str(chat_file), BIG, "--as", "alice", at_bytes=16384)
    shutil.rmtree(f"{chat_file}.lock")  # the dead writer's mkdir lock, removed by hand
    for _ in range(2):  # two hand-run agents follow the procedure before any mailslot writer
        bash_write(chat_file, "Kiran-48291", SAID)

    said = SAID
    if next_one == "say":
        r = run_cli("chat", "say", str(chat_file), "after the crash", "--as", "bob")
        assert r.returncode == 0, r.stderr
    got = json.loads(run_cli("chat", "read", str(chat_file), "--json").stdout)["messages"]
    bodies = [(m["from"], m["body"]) for m in got][2:]
    expected = [("Kiran-48291", said)] * 2
    assert bodies == expected + ([("bob", "after the crash")] if next_one == "say" else [])
    torn = Path(f"{chat_file}.torn").read_text()
    assert BIG[:1000] in torn and said not in torn and torn.count("--- torn append") == 1
    assert [n for n in names_left(chat_file.parent) if n.endswith((".intent", ".repair"))] == []


def test_a_new_speaker_on_a_full_state_disk_writes_once_or_not_at_all(
    chat_file: Path, small_disk: Path, fill_disk
) -> None:
    state = small_disk / "state"
    before = chat_file.read_bytes()
    filler = fill_disk(small_disk)
    try:
        chat.say(chat_file, "hello from bob", "bob", state=state)
    except (OSError, MailslotError) as e:  # refused: then nothing may be in the chat
        assert "no space" in str(e).lower()
        assert chat_file.read_bytes() == before
        filler.unlink()  # room again: the retry is accepted and writes the message once
        chat.say(chat_file, "hello from bob", "bob", state=state)
    bodies = [m.body for m in chat.read(chat_file).messages]
    assert bodies.count("hello from bob") == 1


def test_a_say_on_a_full_disk_names_the_chat_and_writes_nothing(
    small_disk: Path, fill_disk, run_cli
) -> None:
    path = chat.new_chat("full", small_disk, "alice", cwd=small_disk).path
    before = path.read_bytes()
    filler = fill_disk(small_disk)
    r = run_cli("chat", "say", str(path), "x" * 20000, "--as", "alice")
    filler.unlink()
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"mailslot: error: {path}: no space left"), r.stderr
    assert "nothing was written" in r.stderr
    assert path.read_bytes() == before


def test_a_message_the_disk_does_not_confirm_is_reported_as_written(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(MailslotError, match=r"WAS written.*do not send it again"):
        chat.say(chat_file, "said once", "alice")
    monkeypatch.undo()
    assert [m.body for m in chat.read(chat_file).messages].count("said once") == 1


def test_a_waiter_holding_its_place_never_returns_a_block_torn_by_a_kill(
    chat_file: Path, killed_in_write
) -> None:
    """A Waiter reads through a file it keeps open: a block whose writer was SIGKILLed mid-write
    is not returned, its place stays before the fragment, and once the next writer cuts the
    fragment out (the bytes after the place change under it) only whole messages come."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "before the crash", "alice")
    with chat.Waiter(chat_file, "bob") as w:
        assert [m.body for m in w.wait(5).messages] == ["before the crash"]
        killed_in_write("chat", "say", str(chat_file), BIG, "--as", "alice", at_bytes=16384)
        with pytest.raises(WaitTimeout):
            w.wait(0.2)
        chat.say(chat_file, "after the crash", "alice")  # breaks the dead writer's lock
        got = w.wait(5).messages
    assert [(m.sender, m.body) for m in got] == [("alice", "after the crash")]


def test_a_waiter_follows_the_intent_sidecar_at_its_name_not_the_one_it_read_before(
    chat_file: Path, killed_in_write
) -> None:
    """A Waiter keeps the intent sidecar it read open between waits: when another file takes
    the sidecar's name (the old one moved aside, still whole and clear), a dead writer's intent
    in the new one still holds the torn block back -- here one cut just after a line, which
    reads as a whole block."""
    bodies = ("a" * n + "\n" + "plan\n" * 8000 for n in range(1, 12))
    body = next(b for b in bodies if _half_ends_a_line(b))
    chat.join(chat_file, "bob")
    chat.say(chat_file, "before the crash", "alice")
    sidecar = chat_file.parent / f".{chat_file.name}.intent"
    with chat.Waiter(chat_file, "bob") as w:
        assert [m.body for m in w.wait(5).messages] == ["before the crash"]
        os.rename(sidecar, chat_file.parent / "moved-aside")
        killed_in_write("chat", "say", str(chat_file), body, "--as", "alice", at_bytes=16384)
        assert chat_file.read_bytes().endswith(b"plan\n")  # torn where a block may end
        assert sidecar.exists()  # the dead writer's own, holding its intent
        with pytest.raises(WaitTimeout):
            w.wait(0.2)
        chat.say(chat_file, "after the crash", "alice")
        got = w.wait(5).messages
    assert [(m.sender, m.body) for m in got] == [("alice", "after the crash")]


def _half_ends_a_line(body: str) -> bool:
    """Whether the first half of ``body``'s block (what a writer killed in its write leaves)
    ends just after a newline."""
    block = render_message("alice", now(), body).encode()
    return block[len(block) // 2 - 1 : len(block) // 2] == b"\n"


def test_a_fresh_reader_killed_while_it_waits_leaves_no_cursor_behind(tmp_path: Path) -> None:
    """A reader with no cursor yet and nothing from others to read, SIGKILLed while blocked:
    nothing was stored (not even an empty file a later wait would refuse as damaged)."""
    import subprocess
    import sys
    import time

    from mailslot.core.cursor import CursorStore

    path = chat.new_chat("alone", tmp_path, "bob", cwd=tmp_path).path
    (cursor_file,) = CursorStore("chat").dir.glob("*bob*")
    cursor_file.unlink()
    wait = ["chat", "wait", str(path), "--as", "bob", "--timeout", "60"]
    proc = subprocess.Popen([sys.executable, "-m", "mailslot", *wait])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        wchan = Path(f"/proc/{proc.pid}/wchan").read_text()
        if "poll" in wchan or "select" in wchan:
            break  # blocked in its wait, past everything done before it
        time.sleep(0.02)
    assert proc.poll() is None  # still waiting: bob has nothing from others
    proc.kill()
    proc.communicate(timeout=30)
    assert not cursor_file.exists()
    with pytest.raises(WaitTimeout):  # read as a fresh reader, not refused as damaged
        chat.wait(path, "bob", timeout=0)

"""Ending a chat: the end handshake, leaving, and marking a silent participant gone.

An end request needs every other present participant to accept it, and someone else to exist: a
lone participant cannot end a chat (otherwise the creator's ``chat end F request`` right after
``chat new`` reads as "ended by mutual agreement" and everyone about to join is refused).

Without leaving and marking gone, a ghost -- an agent that crashed, or one that switched to
another name -- is a participant forever and no end request can ever complete. ``---LEAVE---``
and ``---GONE--- NAME`` are ordinary blocks in the file, readable by a hand-run bash agent; a
later message from the named participant brings it back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chat_helpers import bash_read, bash_write, later
from click.testing import CliRunner

from mailslot import chat
from mailslot.chat.room import GONE_AFTER_SECONDS
from mailslot.cli import cli
from mailslot.core.errors import (
    Conflict,
    Gone,
)


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


def test_a_lone_participant_cannot_request_the_end(chat_file: Path) -> None:
    size = chat_file.stat().st_size
    with pytest.raises(Conflict, match="no other participant"):
        chat.end(chat_file, "request", name="alice")
    assert chat_file.stat().st_size == size  # nothing written
    assert not chat.status(chat_file).ended
    assert chat.join(chat_file, "bob").name == "bob"  # joiners are welcome
    st = chat.end(chat_file, "request", name="alice")
    assert st.end_request is not None and st.end_request["waiting_for"] == ["bob"]
    assert chat.end(chat_file, "accept", name="bob").ended


def test_a_hand_written_lone_request_waits_for_someone_to_accept(chat_file: Path) -> None:
    with chat_file.open("a") as f:  # written by hand: the rule in `end` was never asked
        f.write("\n---MSG---\nFROM: alice\nTIME: 2026-11-30T01:00:00Z\n---\n---END-REQUEST---\n")
    st = chat.status(chat_file)
    assert not st.ended and st.end_request is not None and st.end_request["waiting_for"] == []
    chat.join(chat_file, "bob")
    assert chat.status(chat_file).end_request["waiting_for"] == ["bob"]
    assert chat.end(chat_file, "accept", name="bob").ended


def test_the_cli_refuses_with_one_line(chat_file: Path) -> None:
    r = CliRunner().invoke(cli, ["chat", "end", str(chat_file), "request", "--as", "alice"])
    assert r.exit_code == 1 and r.stderr.startswith("mailslot: error:")
    assert "no other participant" in r.stderr and r.stderr.count("\n") == 1


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_participant_who_leaves_is_no_longer_waited_for(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.join(chat_file, "carol")
    st = chat.leave(chat_file, "my part is done", "carol")
    assert list(st.left) == ["carol"]
    assert st.present == ["alice", "bob"] and st.participants == ["alice", "bob", "carol"]
    chat.end(chat_file, "request", name="alice")
    assert chat.end(chat_file, "accept", name="bob").ended
    block = chat_file.read_text().rsplit("---MSG---", 3)[1]  # carol's, as the file shows it
    assert "FROM: carol" in block and "---LEAVE--- my part is done\n" in block
    assert "no longer waits for carol" in block


def test_the_last_awaited_participant_leaving_ends_the_chat(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.join(chat_file, "carol")
    chat.end(chat_file, "request", name="alice")
    chat.end(chat_file, "accept", name="bob")
    chat.wait(chat_file, "alice", timeout=5)  # alice has seen everything so far
    chat.leave(chat_file, name="carol")
    batch = chat.wait(chat_file, "alice", timeout=5)
    assert [m.kind for m in batch.messages] == ["leave"] and batch.ended
    with pytest.raises(Gone, match="ended"):
        chat.wait(chat_file, "bob", timeout=5, cursor=chat_file.stat().st_size)


def test_a_crashed_bash_agent_can_be_marked_gone_after_the_silence(chat_file: Path) -> None:
    bash_write(chat_file, "dave", "hi, I follow the protocol by hand")  # ...and then it crashed
    chat.join(chat_file, "bob")
    chat.end(chat_file, "request", name="alice")
    assert not chat.end(chat_file, "accept", name="bob").ended  # waiting for dave, forever
    with pytest.raises(Conflict, match=r"'dave' last wrote .* ago; .* after 1h 00m of silence"):
        chat.mark_gone(chat_file, "dave", name="bob")
    mark = chat_file.stat().st_size
    later(GONE_AFTER_SECONDS + 60)
    st = chat.mark_gone(chat_file, "dave", "no answer since the deploy", "bob")
    assert st.ended and st.gone["dave"]["by"] == "bob"
    seen = bash_read(chat_file, mark)  # what dave's loop would read, were it alive
    assert "FROM: bob" in seen and "---GONE--- dave\n" in seen
    assert "dave has written nothing since" in seen and "(1h 01m)" in seen
    assert "no longer waits for dave" in seen and "reason: no answer since the deploy" in seen


def test_a_participant_marked_gone_who_writes_again_is_back(chat_file: Path) -> None:
    bash_write(chat_file, "dave", "hi")
    chat.join(chat_file, "bob")
    later(GONE_AFTER_SECONDS + 1)
    assert "dave" in chat.mark_gone(chat_file, "dave", name="alice").gone
    bash_write(chat_file, "dave", "sorry, my human was away")
    st = chat.status(chat_file)
    assert st.gone == {} and st.present == ["alice", "dave", "bob"]
    chat.end(chat_file, "request", name="alice")
    st = chat.end(chat_file, "accept", name="bob")
    assert not st.ended and st.end_request and st.end_request["waiting_for"] == ["dave"]


def test_the_human_marks_gone_at_once_and_is_no_participant(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.join(chat_file, "ghost")  # the name an agent abandoned when told to pick another
    r = run("chat", "gone", str(chat_file), "ghost", "switched names", "--human", "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.output)
    assert st["gone"][0]["name"] == "ghost" and st["gone"][0]["by"] == "human"
    assert st["participants"] == ["alice", "bob", "ghost"] and st["present"] == ["alice", "bob"]
    assert "marked gone by the human" in chat_file.read_text()
    chat.end(chat_file, "request", name="alice")
    assert chat.end(chat_file, "accept", name="bob").ended  # nobody waits for "human"


def test_the_silence_bound_is_a_flag(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    r = run("chat", "gone", str(chat_file), "bob", "--as", "alice")
    assert r.exit_code == 1 and "of silence" in r.stderr and r.stderr.count("\n") == 1
    r = run("chat", "gone", str(chat_file), "bob", "--as", "alice", "--silence", "0", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["gone"][0]["name"] == "bob"
    assert f"default: {GONE_AFTER_SECONDS:g}" in run("chat", "gone", "--help").output


def test_what_cannot_be_left_or_marked(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    later(GONE_AFTER_SECONDS + 1)
    with pytest.raises(Conflict, match="yourself"):
        chat.mark_gone(chat_file, "alice", name="alice")
    with pytest.raises(Conflict, match="no participant 'zed'"):
        chat.mark_gone(chat_file, "zed", name="alice")
    with pytest.raises(Conflict, match="not present in this chat"):
        chat.mark_gone(chat_file, "bob", name="mallory")
    with pytest.raises(Conflict, match="not in this chat"):
        chat.leave(chat_file, name="mallory")
    chat.leave(chat_file, name="bob")
    with pytest.raises(Conflict, match="already left"):
        chat.leave(chat_file, name="bob")
    with pytest.raises(Conflict, match="already left"):
        chat.mark_gone(chat_file, "bob", name="alice")
    size = chat_file.stat().st_size
    with pytest.raises(Exception, match="protocol"):
        chat.say(chat_file, "---LEAVE--- by hand", "alice")
    assert chat_file.stat().st_size == size
    assert chat.join(chat_file, "bob").name == "bob"  # a name that left may come back
    assert chat.status(chat_file).present == ["alice", "bob"]


def test_status_shows_who_left_and_who_is_gone(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.join(chat_file, "carol")
    chat.leave(chat_file, "bye for now", name="carol")
    later(GONE_AFTER_SECONDS + 1)
    chat.mark_gone(chat_file, "bob", name="alice")
    st = json.loads(run("chat", "status", str(chat_file), "--json").output)
    assert [(p["name"], p["reason"]) for p in st["left"]] == [("carol", "bye for now")]
    assert [(p["name"], p["by"]) for p in st["gone"]] == [("bob", "alice")]
    assert st["present"] == ["alice"]
    text = run("chat", "status", str(chat_file)).output
    assert "left: carol at " in text and "gone: bob, marked by alice at " in text

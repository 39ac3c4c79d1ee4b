"""``chat.wait``: what another participant wrote after your cursor, each message once.

Own messages are filtered out, the stored cursor moves past what was delivered (an explicit cursor
stores nothing, a caller that gave up leaves it where it was), a write wakes a blocked waiter, a
message written while its reader composes is never skipped, and a removed file ends the wait.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chat_helpers import bash_write

from mailslot import chat
from mailslot.chat import join, new_chat, say, wait
from mailslot.core.errors import (
    Gone,
    NotFound,
    WaitTimeout,
)
from shared_helpers import in_thread


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
    """A reader that sets its cursor to the file size after its own write would skip this."""
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


def test_a_refused_keep_leaves_the_message_for_the_next_wait(tmp_path: Path) -> None:
    path = new_chat("t", tmp_path, "kiran").path
    join(path, "zara")
    assert [m.sender for m in wait(path, "kiran", timeout=5).messages] == ["zara"]
    say(path, "are you there?", "zara")
    given_up = wait(path, "kiran", timeout=5, keep_cursor=lambda: False)
    assert [m.body for m in given_up.messages] == ["are you there?"]
    again = wait(path, "kiran", timeout=5, keep_cursor=lambda: True)
    assert [m.body for m in again.messages] == ["are you there?"]  # not skipped
    with pytest.raises(WaitTimeout):
        wait(path, "kiran", timeout=0)  # now it moved


@pytest.mark.parametrize("raw", [b'{"offset": "abc"}\n', b'{"offset": -50}\n', b"[" * 100_000])
def test_a_damaged_stored_cursor_is_refused_naming_its_file(chat_file: Path, raw: bytes) -> None:
    from mailslot.core.cursor import CursorStore
    from mailslot.core.errors import FormatError

    chat.join(chat_file, "bob")
    chat.say(chat_file, "theirs", "alice")
    chat.wait(chat_file, "bob", timeout=5)
    (cursor_file,) = CursorStore("chat").dir.glob("*bob*")
    cursor_file.write_bytes(raw)
    with pytest.raises(FormatError, match="corrupt cursor") as e:
        chat.wait(chat_file, "bob", timeout=0.05)
    assert e.value.path == cursor_file


def test_a_file_cut_short_under_a_blocked_waiter_is_read_again_from_its_start(
    chat_file: Path,
) -> None:
    """A hand agent's `cat >` where `>>` was meant: what is written after the cut reaches the
    waiter, and its next wait does not skip it either."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "a long enough message to put bob's cursor far into the file", "alice")
    assert chat.wait(chat_file, "bob", timeout=5).messages
    t, box = in_thread(chat.wait, chat_file, "bob", timeout=30)
    t.join(0.2)
    chat_file.write_bytes(b"")
    bash_write(chat_file, "zara", "after the cut")
    t.join(30)
    assert [m.body for m in box["result"].messages] == ["after the cut"], box
    bash_write(chat_file, "zara", "and one more")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["and one more"]


def test_a_file_replaced_under_a_blocked_waiter_is_read_again_from_its_start(
    chat_file: Path,
) -> None:
    """An editor saves by writing a new file and renaming it over the chat: the waiter reads
    the new file from its start (seen messages again, the safe direction), never from an offset
    into a file it has not read."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "read before the edit", "alice")
    assert chat.wait(chat_file, "bob", timeout=5).messages
    t, box = in_thread(chat.wait, chat_file, "bob", timeout=30)
    t.join(0.2)
    saved = chat_file.with_name(".edit.txt")
    saved.write_bytes(b"\n---MSG---\nFROM: zara\nTIME: 2026-12-02T01:00:00Z\n---\nthe new file\n")
    saved.replace(chat_file)
    t.join(30)
    assert [m.body for m in box["result"].messages] == ["the new file"], box

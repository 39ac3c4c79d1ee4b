"""``chat.wait``: what another participant wrote after your cursor, each message once.

Own messages are filtered out, the stored cursor moves past what was delivered (an explicit cursor
stores nothing, a caller that gave up leaves it where it was), a write wakes a blocked waiter, a
message written while its reader composes is never skipped, and a removed file ends the wait. A
``Waiter`` keeps its place between waits only while the file is the one it was taken in (not
replaced, cut shorter or rewritten in place), never returns a block still being written, gives
again what its caller was not given, and shares its cursor with other processes of its name; a
cursor that is not a file is a warning and a fresh reader.
"""

from __future__ import annotations

import json
import os
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
from shared_helpers import blocked_in_poll, in_thread


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
    blocked_in_poll(t)
    chat_file.unlink()
    t.join(30)
    assert isinstance(box.get("error"), Gone), box
    assert box["error"].exit_code == 4 and "removed" in str(box["error"])
    with pytest.raises(Gone):
        chat.wait(chat_file, "bob", timeout=1)
    with pytest.raises(NotFound):  # and a say does not recreate it
        chat.say(chat_file, "anyone?", "bob")
    assert not chat_file.exists()


def test_a_wait_after_the_chat_file_was_replaced_wakes_for_a_write_to_the_new_one(
    chat_file: Path,
) -> None:
    """Each wait may reuse the kernel instance the last one kept, which watched the file the
    name held then: the new wait arms the file the name holds now."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "one", "alice")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["one"]
    data = chat_file.read_bytes()  # an editor's save that keeps the old file as its backup:
    chat_file.rename(chat_file.with_name(chat_file.name + "~"))  # the old inode lives on
    chat_file.write_bytes(data)  # the same bytes in a new file
    t, box = in_thread(chat.wait, chat_file, "bob", timeout=60)
    t.join(0.3)  # blocked in its wait
    bash_write(chat_file, "zara", "after the save")
    t.join(20)  # woken by the write, long before the wait's own timeout
    assert not t.is_alive(), "the write to the new file did not wake the wait"
    assert [m.body for m in box["result"].messages] == ["after the save"], box


def test_an_editors_save_that_renames_the_file_away_first_does_not_end_a_wait(
    chat_file: Path,
) -> None:
    """A save that keeps a backup moves the file away, then creates the new one: for that moment
    the name holds nothing, and a wait woken by the move must not take it for a removal."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "one", "alice")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["one"]
    t, box = in_thread(chat.wait, chat_file, "bob", timeout=60)
    t.join(0.3)  # blocked in its wait
    data = chat_file.read_bytes()
    chat_file.rename(chat_file.with_name(chat_file.name + "~"))  # wakes the wait
    t.join(0.1)  # the editor writing: no file at the name yet
    chat_file.write_bytes(data)
    bash_write(chat_file, "zara", "after the save")
    t.join(20)
    assert not t.is_alive() and "error" not in box, box
    assert [m.body for m in box["result"].messages] == ["after the save"], box


def _held(path: Path) -> int:
    """How many of this process's descriptors hold ``path``."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path.resolve()))


def test_each_wait_closes_the_one_before_so_a_loop_holds_one_set_of_descriptors(
    chat_file: Path,
) -> None:
    """A wait leaves its closing to the next call (off the way from the wake to the return):
    waiting in a loop holds the chat open once, however many waits it makes."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc")
    chat.join(chat_file, "bob")
    before = _held(chat_file)
    for i in range(5):
        chat.say(chat_file, f"m{i}", "alice")
        assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == [f"m{i}"]
        assert _held(chat_file) == before + 1
    with pytest.raises(WaitTimeout):
        chat.wait(chat_file, "bob", timeout=0)
    assert _held(chat_file) == before + 1


def test_a_forked_child_never_takes_over_its_parents_last_wait(chat_file: Path) -> None:
    """The child must not close the parent's waiter (handing the parent's inotify instance to
    itself for reuse): its own wait hears its own events."""
    from mailslot.chat import waiter

    chat.join(chat_file, "bob")
    chat.say(chat_file, "one", "alice")
    assert chat.wait(chat_file, "bob", timeout=5).messages
    [parents] = waiter._finished
    kernel = parents._watch._kernel  # its inotify instance
    pid = os.fork()
    if pid == 0:
        try:
            chat.wait(chat_file, "bob", timeout=0)
        except WaitTimeout:
            pass
        [mine] = waiter._finished
        os._exit(0 if mine._watch._kernel is not kernel else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


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


def test_a_byte_identical_editor_save_keeps_every_readers_place(chat_file: Path, run_cli) -> None:
    """``sed -i`` writes a new file with the same bytes and renames it over the chat: nothing a
    reader was given is given again, in a new process or in a waiter that stays."""
    import shutil
    import subprocess

    chat.join(chat_file, "bob")
    bash_write(chat_file, "Kiran-48291", "one")
    wait_bob = ("chat", "wait", str(chat_file), "--as", "bob", "--timeout", "0.5", "--json")
    got = json.loads(run_cli(*wait_bob).stdout)["messages"]
    assert [m["body"] for m in got] == ["one"]
    with chat.Waiter(chat_file, "carol") as w:
        assert w.wait(5).messages[-1].body == "one"
        ino = chat_file.stat().st_ino
        subprocess.run(
            [shutil.which("sed") or "sed", "-i", "s/one/one/", str(chat_file)], check=True
        )
        assert chat_file.stat().st_ino != ino  # a new file, the same bytes
        r = run_cli(*wait_bob)
        assert r.returncode == 3 and json.loads(r.stdout)["messages"] == [], r.stdout  # nothing new
        with pytest.raises(WaitTimeout):
            w.wait(0.3)
        bash_write(chat_file, "Kiran-48291", "two")
        assert [m.body for m in w.wait(5).messages] == ["two"]
    assert [m["body"] for m in json.loads(run_cli(*wait_bob).stdout)["messages"]] == ["two"]


def test_a_save_that_changed_the_bytes_before_the_place_is_read_from_its_start(
    chat_file: Path,
) -> None:
    chat.join(chat_file, "bob")
    bash_write(chat_file, "Kiran-48291", "one")
    assert [m.body for m in wait(chat_file, "bob", timeout=5).messages] == ["one"]
    saved = chat_file.with_name(".edit.txt")
    saved.write_bytes(chat_file.read_bytes().replace(b"\none\n", b"\nONE\n"))  # same length
    saved.replace(chat_file)
    again = [m.sender for m in wait(chat_file, "bob", timeout=5).messages]
    assert again == ["alice", "Kiran-48291"]  # everything from others, from the start


# -- a Waiter: one reader waiting again and again, its watch and place kept --------------------


def test_a_waiter_returns_each_message_once_and_shares_its_cursor(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    with chat.Waiter(chat_file, "bob") as w:
        for i in range(3):
            t, box = in_thread(w.wait, 30)
            chat.say(chat_file, f"msg {i}", "alice")
            t.join(30)
            assert [m.body for m in box["result"].messages] == [f"msg {i}"], box
        with pytest.raises(WaitTimeout):
            w.wait(0.05)
    chat.say(chat_file, "after", "alice")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["after"]


def test_a_batch_not_shown_is_returned_again_by_the_same_waiter(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.say(chat_file, "one", "alice")

    def broken(_: chat.Batch) -> None:
        raise BrokenPipeError

    with chat.Waiter(chat_file, "bob") as w:
        with pytest.raises(BrokenPipeError):
            w.wait(5, show=broken)
        assert [m.body for m in w.wait(5, keep_cursor=lambda: False).messages] == ["one"]
        assert [m.body for m in w.wait(5).messages] == ["one"]
        with pytest.raises(WaitTimeout):
            w.wait(0)


def test_a_torn_trailing_message_is_returned_only_once_whole(chat_file: Path) -> None:
    """A hand writer's block part-way through its `cat >>` (a header cut short, a body without
    its final newline): nothing is returned and the place stays before it, so the rest of it
    arrives as one whole message."""
    chat.join(chat_file, "bob")
    block = b"\n---MSG---\nFROM: zara\nTIME: 2026-12-02T01:00:00Z\n---\nline one\nline two\n"
    with chat.Waiter(chat_file, "bob") as w, open(chat_file, "ab") as f:
        done = 0
        for cut in (block.index(b"ara"), block.index(b"one"), len(block) - 1):
            f.write(block[done:cut])
            f.flush()
            done = cut
            with pytest.raises(WaitTimeout):
                w.wait(0.1)
        f.write(block[done:])
        f.flush()
        assert [m.body for m in w.wait(5).messages] == ["line one\nline two"]


def test_a_chat_cut_shorter_between_waits_is_read_again_from_its_start(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.say(chat_file, "a long enough message to put bob's place far into the file", "alice")
    with chat.Waiter(chat_file, "bob") as w:
        assert w.wait(5).messages
        chat_file.write_bytes(b"")
        bash_write(chat_file, "zara", "after the cut")
        assert [m.body for m in w.wait(5).messages] == ["after the cut"]


def test_a_chat_rewritten_in_place_between_waits_is_read_again_from_its_start(
    chat_file: Path,
) -> None:
    """Same inode, no shorter, the bytes before the place changed: the place means nothing now,
    so everything is read again (seen messages again, never a skip)."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "before the edit", "alice")
    with chat.Waiter(chat_file, "bob") as w:
        assert [m.body for m in w.wait(5).messages] == ["before the edit"]
        old = chat_file.read_bytes()
        new = old.replace(b"before the edit", b"BEFORE THE EDIT")
        assert len(new) == len(old)
        with open(chat_file, "r+b") as f:  # in place: the inode stays
            f.write(new)
        bash_write(chat_file, "zara", "after the edit")
        got = [m.body for m in w.wait(5).messages]
    assert got[-2:] == ["BEFORE THE EDIT", "after the edit"]
    assert "kick-off" in got[0]  # from the start


def test_a_chat_replaced_between_waits_is_read_again_from_its_start(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.say(chat_file, "read before the save", "alice")
    with chat.Waiter(chat_file, "bob") as w:
        assert w.wait(5).messages
        saved = chat_file.with_name(".edit.txt")
        saved.write_bytes(b"\n---MSG---\nFROM: zara\nTIME: 2026-12-02T01:00:00Z\n---\nnew file\n")
        saved.replace(chat_file)
        assert [m.body for m in w.wait(5).messages] == ["new file"]
        t, box = in_thread(w.wait, 30)  # armed on the new file
        t.join(0.2)
        bash_write(chat_file, "zara", "while blocked")
        t.join(30)
    assert [m.body for m in box["result"].messages] == ["while blocked"], box


def test_a_waiter_takes_the_cursor_another_process_of_its_name_moved(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    with chat.Waiter(chat_file, "bob") as w:
        chat.say(chat_file, "one", "alice")
        assert [m.body for m in w.wait(5).messages] == ["one"]
        chat.say(chat_file, "two", "alice")
        assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["two"]
        with pytest.raises(WaitTimeout):  # "two" was given to bob already
            w.wait(0.05)
        chat.say(chat_file, "three", "alice")
        assert [m.body for m in w.wait(5).messages] == ["three"]


def test_a_directory_at_the_cursor_path_is_a_warning_and_a_fresh_reader(
    chat_file: Path, run_cli
) -> None:
    from mailslot.core.cursor import CursorStore

    chat.join(chat_file, "bob")
    chat.say(chat_file, "theirs", "alice")
    (cursor_file,) = CursorStore("chat").dir.glob("*bob*")
    cursor_file.unlink()
    cursor_file.mkdir()
    with chat.Waiter(chat_file, "bob") as w:
        batch = w.wait(5)
        assert [m.sender for m in batch.messages] == ["alice", "alice"]  # from the start
        assert any(str(cursor_file) in x and "fresh reader" in x for x in batch.warnings)
        assert any("cannot be stored" in x for x in batch.warnings)
    r = run_cli("chat", "wait", str(chat_file), "--as", "bob", "--timeout", "5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [m["body"] for m in out["messages"]][-1] == "theirs"
    assert out["warnings"] and "fresh reader" in out["warnings"][0]
    lines = r.stderr.splitlines()
    assert lines and all(x.startswith("mailslot: warning: cursor ") for x in lines), r.stderr
    assert ".tmp" not in r.stderr and "Traceback" not in r.stderr
    assert cursor_file.is_dir()  # the user's to remove: never removed for them


def test_a_chat_edited_in_place_before_a_stored_cursor_is_read_again_not_skipped(
    chat_file: Path,
) -> None:
    """An editor that saves in place (same inode) took four bytes out of an old message, then a
    new one was appended: the stored offset now points into the new block. A wait in a fresh
    process (``chat.wait``) sees the bytes before its offset changed and reads from the start --
    everything again, never the new message skipped as a half block."""
    chat.join(chat_file, "bob")
    chat.say(chat_file, "before the edit", "alice")
    assert [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages] == ["before the edit"]
    edited = chat_file.read_bytes().replace(b"before the edit", b"before edit")
    with open(chat_file, "r+b") as f:
        f.write(edited)
        f.truncate()
    bash_write(chat_file, "zara", "after the edit")
    got = [m.body for m in chat.wait(chat_file, "bob", timeout=5).messages]
    assert got[-2:] == ["before edit", "after the edit"]

"""A ``Waiter``'s common wake read in one pass (``Waiter._quick``) gives what the general path
(``quick = False``) gives: the same batch, field by field, and the same stored cursor; every
unusual wake (two blocks, one cut short, the caller's own, a marker, an escaped line, CRLF, bytes
that are not UTF-8, a replaced file, a dead writer's fragment) is left to the general path.

Each case runs two waiters of one name, one per path, each with its own state dir, blocked on
one chat file at once; the write comes while both are blocked, so each reads it after a wake.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from chat_helpers import bash_write

from mailslot import chat
from mailslot.chat.format import ChatMessage, _parse, parse_one, render_message
from mailslot.chat.room import _cursor_key
from mailslot.core.clock import now
from mailslot.core.cursor import CursorStore
from mailslot.core.errors import WaitTimeout
from shared_helpers import blocked_in_poll, in_thread


def _block(sender: str, body: str) -> bytes:
    return render_message(sender, now(), body).encode()


def _append(path: Path, *parts: bytes, pause: float = 0.0) -> None:
    """Append ``parts`` as a hand agent holding the chat's ``flock`` does, one write each,
    ``pause`` seconds apart (the lock held throughout)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for i, part in enumerate(parts):
            if i:
                time.sleep(pause)
            os.write(fd, part)
    finally:
        os.close(fd)


class _Side:
    """One waiter and what its ``_quick`` answered, wake by wake (True: it read the wake)."""

    def __init__(self, path: Path, state: Path, quick: bool, monkeypatch: Any) -> None:
        self.state = state
        self.w = chat.Waiter(path, "bob", state=state)
        self.w.quick = quick
        self.took: list[bool] = []
        real = self.w._quick

        def spy() -> ChatMessage | None:
            got = real()
            self.took.append(got is not None)
            return got

        monkeypatch.setattr(self.w, "_quick", spy)
        self.w.wait(5)  # the history: bob's place is now the end of the file

    def stored(self) -> dict[str, Any] | None:
        return CursorStore("chat", self.state).load(_cursor_key(self.w.path, "bob"))


@contextmanager
def _pair(chat_file: Path, tmp_path: Path, monkeypatch: Any) -> Iterator[tuple[_Side, _Side]]:
    quick = _Side(chat_file, tmp_path / "state-quick", True, monkeypatch)
    general = _Side(chat_file, tmp_path / "state-general", False, monkeypatch)
    try:
        yield quick, general
    finally:
        quick.w.close()
        general.w.close()


def _both(sides: tuple[_Side, _Side], write: Callable[[], object], timeout: float = 10) -> list:
    """Block both waiters, ``write``, and return what each wait gave (a batch or its error)."""
    runs = [in_thread(s.w.wait, timeout) for s in sides]
    for t, _ in runs:
        blocked_in_poll(t)
    write()
    out = []
    for t, box in runs:
        t.join(30)
        assert not t.is_alive()
        out.append(box.get("result", box.get("error")))
    return out


def _same(sides: tuple[_Side, _Side], got: list) -> None:
    quick, general = got
    if isinstance(general, BaseException):
        assert type(quick) is type(general), (quick, general)
    else:
        assert quick == general
    assert sides[0].stored() == sides[1].stored()
    assert sides[0].w._shown == sides[1].w._shown
    assert sides[1].took == []  # the forced general path never tries the quick one


# -- the common wake: read in one pass, the same as the general path --------------------------

COMMON = {
    "a say": lambda p: chat.say(p, "hello bob", "alice"),
    "a hand agent's locked append": lambda p: _append(p, _block("alice", "by hand")),
    "a bash agent's cat >>": lambda p: bash_write(p, "alice", "from bash\nTIME: 10am works"),
    "a body that is not ASCII": lambda p: chat.say(p, "zoë says ☕\n\n  two", "alice"),
    "a huge hand-written body": lambda p: _append(
        p,
        b"\n---MSG---\nFROM: alice\nTIME: 2026-12-03T10:00:00Z\n---\n" + b"plan " * 60_000 + b"\n",
    ),
    "a block split in two writes under the lock": lambda p: _append(
        p, *_split(_block("alice", "line one\nline two"), b"one\n"), pause=0.2
    ),
}


def _split(block: bytes, after: bytes) -> tuple[bytes, bytes]:
    cut = block.index(after) + len(after)
    return block[:cut], block[cut:]


@pytest.mark.parametrize("case", list(COMMON))
def test_the_common_wake_is_read_in_one_pass_as_the_general_path_reads_it(
    case: str, chat_file: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    with _pair(chat_file, tmp_path, monkeypatch) as sides:
        got = _both(sides, lambda: COMMON[case](chat_file))
        _same(sides, got)
        assert sides[0].took == [True]
        assert [m.sender for m in got[0].messages] == ["alice"]
        assert got[0].cursor == chat_file.stat().st_size
        assert sides[0].stored()["offset"] == chat_file.stat().st_size
        if case.startswith("a block split"):  # woken by the first write, read after the last
            assert got[0].messages[0].body == "line one\nline two"


# -- every other wake: left to the general path, with the same result -------------------------

UNUSUAL = {
    "two blocks in one write": lambda p: _append(p, _block("alice", "a") + _block("carol", "b")),
    "the caller's own block": lambda p: _append(p, _block("bob", "mine")),
    "an end request": lambda p: chat.end(p, "request", "done?", "alice"),
    "a body holding ---": lambda p: chat.say(p, "a --- b", "alice"),
    "an escaped line": lambda p: chat.say(p, "FROM: someone else", "alice"),
    "a CRLF block": lambda p: _append(p, _block("alice", "crlf").replace(b"\n", b"\r\n")),
    "bytes that are not UTF-8": lambda p: _append(
        p, _block("alice", "café").replace("café".encode(), b"caf\xe9")
    ),
    "a header off the rendered form": lambda p: _append(
        p, b"\n---MSG---\nFROM: alice\nTIME: now\n--- \nspaced rule\n"
    ),
    "a block with no final newline": lambda p: _append(p, _block("alice", "unended")[:-1]),
    "a header cut short": lambda p: _append(p, b"\n---MSG---\nFROM: alice\n"),
    "a file replaced by its editor": lambda p: _replaced(p, _block("alice", "saved")),
    "a file cut shorter": lambda p: p.write_bytes(p.read_bytes()[:40]),
    "a file rewritten in place, then grown": lambda p: _rewritten(
        p, p.read_bytes().replace(b"kick-off", b"KICK-OFF") + _block("alice", "edited")
    ),
}


def _rewritten(path: Path, data: bytes) -> None:
    """``data`` written over the file from its start, in one write (no truncation first)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


def _replaced(path: Path, block: bytes) -> None:
    new = path.with_name("saved.tmp")
    new.write_bytes(path.read_bytes() + block)
    os.rename(new, path)


@pytest.mark.parametrize("case", list(UNUSUAL))
def test_every_other_wake_is_left_to_the_general_path(
    case: str, chat_file: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    if case == "an end request":
        chat.join(chat_file, "carol")  # a third speaker: a request does not end the chat
    with _pair(chat_file, tmp_path, monkeypatch) as sides:
        got = _both(sides, lambda: UNUSUAL[case](chat_file), timeout=0.5)
        _same(sides, got)
        assert sides[0].took and not any(sides[0].took)
        # and the next plain message, in whatever file the name now holds, is read in one pass
        got = _both(sides, lambda: chat.say(chat_file, "next", "alice"))
        _same(sides, got)
        assert [m.body for m in got[0].messages][-1:] == ["next"]


def test_a_block_finished_by_a_second_unlocked_write_is_returned_once_whole(
    chat_file: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """A hand writer without the lock, part-way through its block: the first wake is the general
    path's (held back), the wake for the rest is read in one pass, whole."""
    head, rest = _split(_block("alice", "line one\nline two"), b"line ")
    with _pair(chat_file, tmp_path, monkeypatch) as sides:
        runs = [in_thread(s.w.wait, 10) for s in sides]
        for t, _ in runs:
            blocked_in_poll(t)
        with open(chat_file, "ab") as f:
            f.write(head)
            f.flush()
            time.sleep(0.2)
            for t, _ in runs:
                blocked_in_poll(t)  # both looked and hold the partial block back
            f.write(rest)
        for t, _ in runs:
            t.join(30)
        got = [box["result"] for _, box in runs]
        _same(sides, got)
        assert [m.body for m in got[0].messages] == ["line one\nline two"]
        assert sides[0].took == [False, True]


def test_a_block_torn_by_a_kill_under_a_blocked_waiter_is_never_returned(
    chat_file: Path, tmp_path: Path, monkeypatch: Any, killed_in_write
) -> None:
    """A writer SIGKILLed in its append while both wait, its half block ending just after a
    line (it would read as a whole block): the dead writer's intent holds it back on both
    paths, and the next writer's message comes alone."""
    body = next(
        b
        for b in ("a" * n + "\n" + "plan\n" * 8000 for n in range(1, 12))
        if (blk := _block("alice", b))[len(blk) // 2 - 1 : len(blk) // 2] == b"\n"
    )
    with _pair(chat_file, tmp_path, monkeypatch) as sides:
        kill = ("chat", "say", str(chat_file), body, "--as", "alice")
        got = _both(sides, lambda: killed_in_write(*kill, at_bytes=16384), timeout=0.5)
        assert all(isinstance(g, WaitTimeout) for g in got)
        assert not any(sides[0].took)
        got = _both(sides, lambda: chat.say(chat_file, "after the crash", "alice"))
        _same(sides, got)
        assert [(m.sender, m.body) for m in got[0].messages] == [("alice", "after the crash")]


def test_a_cursor_that_cannot_be_stored_is_the_same_warning_on_both_paths(
    chat_file: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """The cursor file replaced by a directory while both wait: the message is returned with
    the warning on either path."""
    with _pair(chat_file, tmp_path, monkeypatch) as sides:

        def write() -> None:
            for s in sides:
                cursor = CursorStore("chat", s.state).path_for(_cursor_key(chat_file, "bob"))
                cursor.unlink()
                cursor.mkdir()
            chat.say(chat_file, "kept?", "alice")

        got = _both(sides, write)
        quick, general = got
        assert (quick.messages, quick.cursor, quick.ended) == (
            general.messages,
            general.cursor,
            general.ended,
        )
        assert [w.replace("state-quick", "S") for w in quick.warnings] == [
            w.replace("state-general", "S") for w in general.warnings
        ]
        assert sides[0].took == [True]
        assert "cannot be stored" in got[0].warnings[0]


# -- the one-block reading itself --------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    ["x", "hello bob", "zoë ☕", "two\nlines", "  indented\n\nwith a gap", "at TIME: 10am", "-- -"],
)
def test_every_plain_rendered_block_is_read_by_the_one_block_reading(body: str) -> None:
    block = _block("alice", body)
    one = parse_one(block, 100)
    assert one is not None
    assert ([one], one.end) == _parse(block, 100)


def test_a_hand_agents_block_is_read_by_the_one_block_reading() -> None:
    """``date -Iseconds`` times and blanks around the names, as a bash agent writes them."""
    block = b"\n---MSG---\nFROM:  Kiran \t\nTIME: 2026-12-03T10:00:00+05:30\n---\n\nhi\n"
    one = parse_one(block, 3)
    assert one is not None
    assert (one.sender, one.time_raw, one.body) == ("Kiran", "2026-12-03T10:00:00+05:30", "hi")
    assert ([one], one.end) == _parse(block, 3)


def test_a_message_made_by_the_one_block_reading_is_a_whole_record() -> None:
    one = parse_one(_block("alice", "hi"))
    assert one is not None
    with pytest.raises(AttributeError):
        one.body = "changed"  # type: ignore[misc]
    assert hash(one) == hash(ChatMessage(one.sender, one.time_raw, "hi", 0, one.end))
    assert repr(one).startswith("ChatMessage(sender='alice'")


def test_a_full_state_disk_is_the_same_warning_on_both_paths(
    chat_file: Path, small_disk: Path, fill_disk, monkeypatch: Any
) -> None:
    """Both state dirs on a disk that is full when the message comes, their cursor files at the
    end of a page (a save must take a new one): the message is returned with the no-space
    warning on either path, and a new reader with room again is given it once more."""
    with _pair(chat_file, small_disk, monkeypatch) as sides:
        cursors = [
            CursorStore("chat", s.state).path_for(_cursor_key(chat_file, "bob")) for s in sides
        ]

        def write() -> None:
            for c in cursors:  # a blank line that ends the file's page: the next needs a new one
                with open(c, "ab") as f:
                    f.write(b" " * (4096 - c.stat().st_size - 1) + b"\n")
            fill_disk(small_disk)
            _use_up(small_disk / "top")  # the page the filler's cut left free too
            chat.say(chat_file, "no room to note it", "alice")

        got = _both(sides, write)
        assert sides[0].took == [True]
        quick, general = got
        assert quick.messages == general.messages and quick.cursor == general.cursor
        assert [w.replace("state-quick", "S") for w in quick.warnings] == [
            w.replace("state-general", "S") for w in general.warnings
        ]
        assert "no space" in quick.warnings[0]
        assert all(c.stat().st_size == 4096 for c in cursors)  # nothing of the line landed
        (small_disk / "filler").unlink()
        (small_disk / "top").unlink()
    for s in sides:  # a new reader of each state: the message was not marked read
        again = chat.wait(chat_file, "bob", state=s.state, timeout=5)
        assert [m.body for m in again.messages][-1:] == ["no room to note it"]


def _use_up(path: Path) -> None:
    """Write to ``path`` until the disk refuses a byte."""
    with open(path, "wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 512):
                pass
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
        try:
            while f.write(b"\0"):
                pass
        except OSError as e:
            assert e.errno == errno.ENOSPC, e

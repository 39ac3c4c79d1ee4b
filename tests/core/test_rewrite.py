"""core.rewrite: compare-and-swap rewrites that keep edits made by writers without a lock."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mailslot.core import rewrite as rw
from mailslot.core.errors import Conflict, FormatError, LimitExceeded, SymlinkRefused
from mailslot.core.rewrite import REWRITE_MAX_BYTES, rewrite


def tick_a(data: bytes) -> bytes:
    return data.replace(b"- [ ] a", b"- [x] a")


@pytest.mark.parametrize(
    ("hand", "expected"),
    [
        # an append while mailslot computes: carried over into the rewrite
        ("- [ ] a\n- [ ] b\n- [ ] c added by hand\n", "- [x] a\n- [ ] b\n- [ ] c added by hand\n"),
        # a line inserted at the top: the edit is redone on the new text
        ("- [ ] z on top\n- [ ] a\n- [ ] b\n", "- [ ] z on top\n- [x] a\n- [ ] b\n"),
    ],
)
def test_hand_edit_between_read_and_write_is_kept(tmp_path: Path, hand: str, expected: str) -> None:
    """The rewrite notices a file edited after it was read and keeps both edits."""
    path = tmp_path / "tasks.md"
    path.write_text("- [ ] a\n- [ ] b\n")
    calls = []

    def tick_a(data: bytes) -> bytes:
        calls.append(data)
        if len(calls) == 1:  # someone saves the file while we compute
            path.write_text(hand)
        return data.replace(b"- [ ] a", b"- [x] a")

    rewrite(path, tick_a, lock=tmp_path / "lock")
    assert len(calls) >= 2
    assert path.read_text() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock", "tasks.md"]


def test_write_into_the_replaced_file_is_recovered(tmp_path: Path, monkeypatch) -> None:
    """A writer that opened the file before the rename and writes after it loses nothing."""
    monkeypatch.setattr(rw, "SETTLE_MAX", 30.0)  # generous on a loaded machine
    path = tmp_path / "tasks.md"
    path.write_text("- [ ] a\n- [ ] b\n")
    late: list[threading.Thread] = []

    def edit(data: bytes) -> bytes:
        if not late:  # the writer opens the file now and writes only after our swap
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)

            def write_later() -> None:
                time.sleep(0.2)
                os.write(fd, b"- [ ] late\n")
                os.close(fd)

            late.append(threading.Thread(target=write_later))
            late[0].start()
        return tick_a(data)

    rewrite(path, edit, lock=tmp_path / "lock")
    late[0].join()
    assert path.read_text() == "- [x] a\n- [ ] b\n- [ ] late\n"


# A hand writer (a shell's `>>`) that opened the file and was descheduled before writing.
STALLED_HAND = r"""
exec 3>>"$1"
exec 4<"$1"  # and something reading it, like `tail -f`, which never writes
echo open
sleep 1.5
echo "- [ ] late by hand" >&3
"""


def test_a_hand_writer_stalled_between_open_and_write_loses_nothing(tmp_path: Path) -> None:
    """The swap waits for writers still holding the replaced file, however briefly they stall."""
    path = tmp_path / "tasks.md"
    path.write_text("- [ ] a\n- [ ] b\n")
    hand = subprocess.Popen(
        ["bash", "-c", STALLED_HAND, "_", str(path)], stdout=subprocess.PIPE, text=True
    )
    assert hand.stdout is not None and hand.stdout.readline() == "open\n"
    rewrite(path, tick_a, lock=tmp_path / "lock")
    assert hand.wait(timeout=60) == 0
    assert path.read_text() == "- [x] a\n- [ ] b\n- [ ] late by hand\n"


def test_no_change_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    path.write_text("- [x] a\n")
    before = path.stat().st_ino
    rewrite(path, tick_a, lock=tmp_path / "lock")
    assert path.stat().st_ino == before


def test_edit_errors_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    path.write_text("x\n")

    def boom(data: bytes) -> bytes:
        raise Conflict("no")

    with pytest.raises(Conflict):
        rewrite(path, boom, lock=tmp_path / "lock")
    assert path.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "f.md",
        "lock",
    ]


def test_gives_up_visibly_when_the_file_never_holds_still(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(rw, "REWRITE_ATTEMPTS", 3)
    path = tmp_path / "f.md"
    path.write_text("- [ ] a\n")
    n = [0]

    def edit(data: bytes) -> bytes:
        n[0] += 1
        path.write_text(f"- [ ] a\nversion {n[0]}\n")  # changed again, never a plain append
        return tick_a(data)

    with pytest.raises(Conflict, match="gave up"):
        rewrite(path, edit, lock=tmp_path / "lock")


def test_a_file_that_is_not_a_plain_file_of_sane_size_is_refused_untouched(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    outside = tmp_path / "outside.md"
    outside.write_text("- [ ] secret\n")
    link = tmp_path / "link.md"
    link.symlink_to(outside)
    with pytest.raises(SymlinkRefused):
        rewrite(link, tick_a, lock=lock)
    assert link.is_symlink() and outside.read_text() == "- [ ] secret\n"

    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    with pytest.raises(FormatError, match="not a regular file"):
        rewrite(fifo, tick_a, lock=lock)  # refused at once, never blocked waiting for a writer

    big = tmp_path / "big.md"
    with big.open("wb") as f:
        f.write(b"- [ ] a\n")
        f.truncate(REWRITE_MAX_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(LimitExceeded, match=r"big\.md"):
        rewrite(big, tick_a, lock=lock)
    assert big.stat().st_size == REWRITE_MAX_BYTES + 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".lock",
        "big.md",
        "fifo.md",
        "link.md",
        "outside.md",
    ]

"""safe_move: never over an existing name, never through a symlink, one winner, whole when killed.

Every test runs twice: with ``renameat2(RENAME_NOREPLACE)`` and with the fallback a system
without it uses (link then unlink for a file, check then rename for a directory).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailslot.core import move
from mailslot.core.errors import Conflict, SymlinkRefused
from mailslot.core.move import safe_move

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


@pytest.fixture(params=["renameat2", "fallback"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "renameat2":
        if move._renameat2 is None:
            pytest.skip("renameat2 is not available here")
    else:
        monkeypatch.setattr(move, "_renameat2", None)
    yield request.param


def test_a_file_and_a_directory_move_whole(tmp_path: Path, way: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "0001-claude.md").write_text("entry\n")
    safe_move(tmp_path / "a" / "0001-claude.md", tmp_path / "b" / "0001-claude.md")
    assert (tmp_path / "b" / "0001-claude.md").read_text() == "entry\n"
    assert not (tmp_path / "a" / "0001-claude.md").exists()
    topic = tmp_path / "a" / "2026-01-01-t"
    topic.mkdir()
    (topic / "0001-olu.md").write_text("x")
    safe_move(topic, tmp_path / "b" / "2026-01-01-t")
    assert (tmp_path / "b" / "2026-01-01-t" / "0001-olu.md").read_text() == "x"
    assert not topic.exists()


def test_an_existing_name_is_never_overwritten(tmp_path: Path, way: str) -> None:
    (tmp_path / "src").write_text("new")
    (tmp_path / "dst").write_text("old")
    with pytest.raises(Conflict, match="never overwrites"):
        safe_move(tmp_path / "src", tmp_path / "dst")
    assert (tmp_path / "src").read_text() == "new"
    assert (tmp_path / "dst").read_text() == "old"
    # an empty directory is what a plain rename replaces without a word
    (tmp_path / "topic").mkdir()
    (tmp_path / "topic" / "0001-a.md").write_text("kept")
    (tmp_path / "done").mkdir()
    with pytest.raises(Conflict):
        safe_move(tmp_path / "topic", tmp_path / "done")
    assert (tmp_path / "topic" / "0001-a.md").read_text() == "kept"
    assert (tmp_path / "done").is_dir() and not os.listdir(tmp_path / "done")


def test_a_symlink_is_never_moved_nor_moved_through(tmp_path: Path, way: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link").symlink_to(outside / "secret")
    with pytest.raises(SymlinkRefused) as e:
        safe_move(tree / "link", tree / "moved")
    assert e.value.path == tree / "link"
    assert (tree / "link").is_symlink() and not (tree / "moved").exists()
    # a planted done/ that points out of the tree: the entry stays where it is
    (tree / "done").symlink_to(outside)
    (tree / "0001-a.md").write_text("entry")
    with pytest.raises(SymlinkRefused):
        safe_move(tree / "0001-a.md", tree / "done" / "0001-a.md")
    assert (tree / "0001-a.md").read_text() == "entry"
    assert sorted(os.listdir(outside)) == ["secret"]
    with pytest.raises(SymlinkRefused):  # nor out of a symlinked directory
        safe_move(tree / "done" / "secret", tree / "taken")
    assert (outside / "secret").exists()


def test_a_missing_source_is_file_not_found(tmp_path: Path, way: str) -> None:
    with pytest.raises(FileNotFoundError):
        safe_move(tmp_path / "gone", tmp_path / "dst")
    assert not (tmp_path / "dst").exists()


_RACER = """
import os, sys
from pathlib import Path
from mailslot.core import move
if sys.argv[3] == "fallback":
    move._renameat2 = None
src, mine = Path(sys.argv[1]), Path(sys.argv[2])
won = 0
for name in sorted(os.listdir(src)):
    try:
        move.safe_move(src / name, mine / name)
        won += 1
    except FileNotFoundError:
        pass
print(won)
"""


def test_two_racers_for_one_source_one_wins(tmp_path: Path, way: str) -> None:
    src = tmp_path / "outbox"
    src.mkdir()
    for i in range(300):
        (src / f"item-{i:04d}").write_text(f"item {i}\n")
    takers = [tmp_path / "a", tmp_path / "b"]
    for t in takers:
        t.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(src), str(t), way],
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for t in takers
    ]
    won = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert sum(won) == 300
    names = [n for t in takers for n in os.listdir(t)]
    assert sorted(names) == [f"item-{i:04d}" for i in range(300)]  # each exactly once
    assert os.listdir(src) == []
    for t in takers:
        for n in os.listdir(t):
            assert (t / n).read_text() == f"item {int(n[5:])}\n"


_SHUTTLE = """
import sys
from pathlib import Path
from mailslot.core import move
if sys.argv[2] == "fallback":
    move._renameat2 = None
a, b = Path(sys.argv[1]) / "a" / "msg", Path(sys.argv[1]) / "b" / "msg"
print("ready", flush=True)
while True:
    move.safe_move(a, b)
    move.safe_move(b, a)
"""


def test_a_move_killed_at_any_instant_leaves_the_message_whole(tmp_path: Path, way: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    body = os.urandom(256 * 1024)
    (tmp_path / "a" / "msg").write_bytes(body)
    rng = random.Random(16)
    for _ in range(25):
        proc = subprocess.Popen(
            [sys.executable, "-c", _SHUTTLE, str(tmp_path), way],
            stdout=subprocess.PIPE,
            env=ENV,
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.03))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        whole = [p for p in (tmp_path / "a" / "msg", tmp_path / "b" / "msg") if p.exists()]
        assert whole, "the message was lost"
        for p in whole:
            assert p.read_bytes() == body
        if way == "renameat2":
            assert len(whole) == 1
        elif len(whole) == 2:  # the fallback's link landed, its unlink did not: one file
            assert os.stat(whole[0]).st_ino == os.stat(whole[1]).st_ino
            os.unlink(whole[1])
        if whole[0].parent.name == "b":  # start the next run from a/
            safe_move(whole[0], tmp_path / "a" / "msg")


# Swaps each pair of names (a real directory and a symlink out of the tree) with
# renameat2(RENAME_EXCHANGE), as fast as it can, until killed: the path a mover checked is, an
# instant later, a link to somewhere else.
_SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pairs = [(os.fsencode(a), os.fsencode(b)) for a, b in zip(sys.argv[1::2], sys.argv[2::2])]
for a, b in pairs:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        sys.exit("RENAME_EXCHANGE: " + os.strerror(ctypes.get_errno()))
print("ready", flush=True)
while True:
    for a, b in pairs:
        libc.renameat2(-100, a, -100, b, 2)
"""


def _swapping(*pairs: tuple[Path, Path]) -> subprocess.Popen[bytes]:
    args = [str(p) for pair in pairs for p in pair]
    proc = subprocess.Popen([sys.executable, "-c", _SWAPPER, *args], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    if proc.stdout.readline() != b"ready\n":
        proc.kill()
        proc.wait()
        pytest.skip("this file system cannot exchange two names (RENAME_EXCHANGE)")
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()


def _the_directory(*names: Path) -> Path:
    (real,) = [p for p in names if not p.is_symlink()]
    return real


def test_a_directory_swapped_for_a_symlink_mid_move_is_never_followed(
    tmp_path: Path, way: str
) -> None:
    # Outside the tree: a folder holding decoys named like the entries, and an empty one.
    decoys, trap = tmp_path / "outside-decoys", tmp_path / "outside-trap"
    decoys.mkdir()
    trap.mkdir()
    count = 400
    for i in range(count):
        (decoys / f"item-{i:04d}").write_text("outside\n")
    tree = tmp_path / "tree"
    (tree / "inbox").mkdir(parents=True)
    (tree / "done").mkdir()
    for i in range(count):
        (tree / "inbox" / f"item-{i:04d}").write_text(f"item {i}\n")
    # The swapper trades the source folder with a link to the decoys, and the destination
    # folder with a link to the trap, over and over while the moves run.
    (tree / "inbox-swap").symlink_to(decoys)
    (tree / "done-swap").symlink_to(trap)
    swapper = _swapping((tree / "inbox", tree / "inbox-swap"), (tree / "done", tree / "done-swap"))
    refused = 0
    try:
        for i in range(count):
            name = f"item-{i:04d}"
            for _ in range(10_000):
                try:
                    safe_move(tree / "inbox" / name, tree / "done" / name)
                    break
                except (SymlinkRefused, FileNotFoundError):
                    refused += 1
    finally:
        _stop(swapper)
    assert sorted(os.listdir(decoys)) == [f"item-{i:04d}" for i in range(count)]
    assert all((decoys / n).read_text() == "outside\n" for n in os.listdir(decoys))
    assert os.listdir(trap) == [], "an entry was moved out of the tree"
    done = _the_directory(tree / "done", tree / "done-swap")
    inbox = _the_directory(tree / "inbox", tree / "inbox-swap")
    assert os.listdir(inbox) == []
    assert sorted(os.listdir(done)) == [f"item-{i:04d}" for i in range(count)]
    for n in os.listdir(done):
        assert (done / n).read_text() == f"item {int(n[5:])}\n"
    assert refused, "the swapper never ran during a move; the race was not exercised"


def test_a_source_swapped_for_a_symlink_mid_move_is_never_followed(
    tmp_path: Path, way: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("secret\n")
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "b").mkdir()
    (tree / "a" / "msg").write_text("entry\n")
    (tree / "a" / "msg-swap").symlink_to(outside / "secret")
    swapper = _swapping((tree / "a" / "msg", tree / "a" / "msg-swap"))
    moved = tree / "b" / "msg"
    try:
        for _ in range(2000):
            with contextlib.suppress(SymlinkRefused):
                safe_move(tree / "a" / "msg", moved)
            if moved.is_symlink():
                break  # the link itself was moved; the swapper has nothing left to trade
            if moved.exists():
                assert moved.read_text() == "entry\n"
                try:
                    safe_move(moved, tree / "a" / "msg")
                except Conflict:
                    break  # the fallback put the link swapped in back: the entry is in b/
    finally:
        _stop(swapper)
    assert os.listdir(outside) == ["secret"]
    assert (outside / "secret").read_text() == "secret\n"
    # The entry is still in the tree, whole, one file; at most the link moved beside it (the
    # fallback's link-then-unlink may leave that one file under two names, as when killed).
    entries = [p for p in (tree / "a").iterdir() if not p.is_symlink()]
    entries += [moved] if moved.exists() and not moved.is_symlink() else []
    assert {p.read_text() for p in entries} == {"entry\n"}
    assert len({os.stat(p).st_ino for p in entries}) == 1

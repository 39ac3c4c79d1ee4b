"""Store primitives, including real processes racing and a writer killed mid-write."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailslot.core.errors import Conflict, LimitExceeded, LockBusy, NotFound
from mailslot.core.fsio import (
    atomic_create,
    atomic_write,
    due,
    file_lock,
    held_temp,
    highest_number,
    locked_append,
    numbered_create,
    publish_temp,
    read_from,
    sweep_temps,
)


def visible(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


def test_atomic_create_writes_and_never_overwrites(tmp_path: Path) -> None:
    p = atomic_create(tmp_path / "a.md", "one")
    assert p.read_text() == "one"
    with pytest.raises(Conflict, match="never overwrites"):
        atomic_create(tmp_path / "a.md", "two")
    assert p.read_text() == "one"
    assert os.listdir(tmp_path) == ["a.md"]  # no temp left behind


def test_atomic_write_replaces(tmp_path: Path) -> None:
    atomic_write(tmp_path / "STATE.md", "status: open\n")
    atomic_write(tmp_path / "STATE.md", "status: done\n")
    assert (tmp_path / "STATE.md").read_text() == "status: done\n"
    assert os.listdir(tmp_path) == ["STATE.md"]


def test_numbered_create_spans_siblings(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "to-olu" / "t", tmp_path / "to-claude" / "t"
    mine.mkdir(parents=True)
    theirs.mkdir(parents=True)
    (theirs / "0007-olu.md").write_text("x")
    n, p = numbered_create(mine, "claude.md", "hi", siblings=[theirs])
    assert (n, p.name) == (8, "0008-claude.md")
    assert highest_number([mine, theirs]) == 8


@pytest.mark.parametrize("longer", [False, True])
@pytest.mark.parametrize("width", [4, 6])
def test_the_highest_number_is_the_greatest_n_of_any_name_n_dash_anything(
    tmp_path: Path, width: int, longer: bool
) -> None:
    """``width`` digits, then a dash; with ``longer``, more digits too, unless zero-padded."""
    import random
    import re

    rng = random.Random(width * 2 + longer)
    pattern = re.compile(rf"^([0-9]{{{width},}})-" if longer else rf"^([0-9]{{{width}}})-")
    alphabet = "0123456789-ab.\uff10\u0660 "
    for round_ in range(40):
        folders = [tmp_path / f"{round_}-{i}" for i in range(3)]
        names: set[str] = set()
        for folder in folders[:2]:  # the third is never made: a folder not there counts none
            folder.mkdir()
            for _ in range(rng.randrange(0, 60)):
                n = rng.randrange(0, 10**width)
                name = rng.choice(
                    [
                        f"{n:0{width}d}-x.md",
                        f"{n:0{width + 1}d}-x.md",
                        f"{n}-x.md",
                        f"{n * 10 ** rng.randrange(1, 3) + 7}-x.md",
                        f"{n:0{width}d}-{n}-x.md",
                        "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, width + 3))),
                    ]
                )
                if name not in names and "/" not in name and name not in (".", ".."):
                    names.add(name)
                    (folder / name).write_text("x")
        found = [m.group(1) for n in names if (m := pattern.match(n)) is not None]
        expected = max((int(d) for d in found if len(d) == width or d[0] != "0"), default=0)
        assert highest_number(folders, width, longer=longer) == expected, sorted(names)


def test_a_numbering_with_no_last_number_goes_on_past_its_width(tmp_path: Path) -> None:
    (tmp_path / "999999-a.md").write_text("x")
    (tmp_path / "0000012-b.md").write_text("x")  # padded past the width: never made so, no 12
    assert highest_number([tmp_path], 6) == 999999
    assert highest_number([tmp_path], 6, longer=True) == 999999
    (tmp_path / "1000000-c.md").write_text("x")
    assert highest_number([tmp_path], 6) == 999999  # six digits, as exchange numbers are kept
    assert highest_number([tmp_path], 6, longer=True) == 1000000


def test_numbered_create_skips_a_name_taken_without_the_lock(tmp_path: Path) -> None:
    (tmp_path / "0001-x.md").write_text("hand-written")
    # Someone raced us to 0002 without the lock: we must move on, not overwrite.
    real_highest = highest_number

    def stale(dirs: object, width: int = 4) -> int:
        (tmp_path / "0002-x.md").write_text("raced") if not (
            tmp_path / "0002-x.md"
        ).exists() else None
        return real_highest([tmp_path], width) - 1

    import mailslot.core.fsio as fsio

    fsio.highest_number = stale  # type: ignore[assignment]
    try:
        n, p = numbered_create(tmp_path, "x.md", "mine")
    finally:
        fsio.highest_number = real_highest
    assert n == 3 and p.read_text() == "mine"
    assert (tmp_path / "0002-x.md").read_text() == "raced"


def _claim(args: tuple[str, str, str, int]) -> list[str]:
    target, sibling, suffix, count = args
    out = []
    for i in range(count):
        _, p = numbered_create(
            Path(target),
            suffix,
            f"{suffix} {i}",
            siblings=[Path(sibling)],
            lock=Path(target).parent.parent / "send.lock",
        )
        out.append(p.name)
    return out


@pytest.mark.slow
def test_many_processes_race_for_numbers(tmp_path: Path) -> None:
    a, b = tmp_path / "to-olu" / "t", tmp_path / "to-claude" / "t"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    jobs = []
    for w in range(10):
        target, sibling = (a, b) if w % 2 else (b, a)
        jobs.append((str(target), str(sibling), f"w{w}.md", 25))
    with mp.get_context("spawn").Pool(10) as pool:
        results = pool.map(_claim, jobs)
    names = [n for r in results for n in r]
    numbers = [int(n[:4]) for n in visible(a) + visible(b)]
    assert len(names) == 250
    assert sorted(numbers) == list(range(1, 251)), "numbers unique across both sides, no gaps"
    for d in (a, b):  # every file holds exactly what its writer wrote
        for name in visible(d):
            suffix = name[5:]
            assert (d / name).read_text().startswith(suffix)


def _append(args: tuple[str, int, int]) -> None:
    path, writer, count = args
    for i in range(count):
        record = f"<{writer}:{i}:" + ("x" * (i * 37 % 5000)) + f":{writer}:{i}>\n"
        locked_append(Path(path), record)


@pytest.mark.slow
def test_concurrent_appenders_never_tear_a_record(tmp_path: Path) -> None:
    log = tmp_path / "LOG.md"
    with mp.get_context("spawn").Pool(8) as pool:
        pool.map(_append, [(str(log), w, 200) for w in range(8)])
    lines = read_from(log).decode().splitlines()
    assert len(lines) == 1600
    for line in lines:
        head, _, tail = line[1:-1].partition(":")
        w, i = head, tail.split(":")[0]
        assert line.endswith(f":{w}:{i}>"), f"torn record: {line[:40]}..."
    assert len(set(lines)) == 1600


def test_locked_append_returns_offsets(tmp_path: Path) -> None:
    log = tmp_path / "log"
    assert locked_append(log, "ab\n") == 0
    assert locked_append(log, "cd\n", fsync=True) == 3
    assert read_from(log, 3) == b"cd\n"
    with pytest.raises(NotFound):
        read_from(tmp_path / "missing")


def test_lock_nonblocking_reports_busy(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with file_lock(lock), pytest.raises(LockBusy), file_lock(lock, blocking=False):
        pass
    with file_lock(lock, blocking=False):
        pass


def test_read_only_lock_file_still_locks(tmp_path: Path) -> None:
    lock = tmp_path / "send.lock"
    lock.touch()
    lock.chmod(0o444)
    with file_lock(lock):
        assert lock.exists()


def test_a_symlink_or_fifo_planted_as_a_lock_file_is_refused_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lock = tmp_path / "send.lock"
    lock.symlink_to(elsewhere / "made-by-the-lock")  # a name that does not exist yet
    with pytest.raises(OSError), file_lock(lock):
        pass
    assert not (elsewhere / "made-by-the-lock").exists()
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(OSError, match="not a regular file"), file_lock(lock):
        pass


KILL_CHILD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import mailslot.core.fsio as fsio
    marker = Path(sys.argv[2])
    real_write = os.write
    def slow_write(fd, data):
        n = real_write(fd, bytes(data[: len(data) // 2]))
        marker.touch()
        time.sleep(60)
        return n
    os.write = slow_write
    if sys.argv[3] == "create":
        fsio.atomic_create(Path(sys.argv[1]) / "0001-claude.md", "x" * 100000)
    else:
        fsio.numbered_create(Path(sys.argv[1]), "claude.md", "x" * 100000)
    """
)


@pytest.mark.parametrize("how", ["create", "numbered"])
def test_kill_9_mid_write_leaves_nothing_visible(tmp_path: Path, how: str) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    marker = tmp_path / "marker"
    child = subprocess.Popen([sys.executable, "-c", KILL_CHILD, str(inbox), str(marker), how])
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "child never reached the write"
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert visible(inbox) == [], "a killed writer must leave no visible file"
    leftovers = os.listdir(inbox)
    assert len(leftovers) == 1 and leftovers[0].startswith(".")
    old = time.time() - 7200
    os.utime(inbox / leftovers[0], (old, old))
    assert len(sweep_temps(inbox)) == 1 and os.listdir(inbox) == []
    # The next writer is not disturbed by the leftover.
    n, p = numbered_create(inbox, "claude.md", "ok")
    assert n == 1 and p.read_text() == "ok"


def test_a_held_temp_is_swept_at_once_when_dead_and_never_while_held(tmp_path: Path) -> None:
    dead = tmp_path / f".new-killed.{os.getpid()}.0123abcd.tmp"  # young, nobody holds it
    dead.write_bytes(b"half a file")
    other = tmp_path / f".record.json.{os.getpid()}.0123abcd.tmp"  # not a held temp: by age
    other.write_bytes(b"{")
    with held_temp(tmp_path, "new-item", [b"whole"]) as tmp:
        # copied, not yet published, and young: alive, whatever another sweep sees
        assert sweep_temps(tmp_path, held="new-") == [dead]
        assert tmp.exists() and other.exists()
        publish_temp(tmp, tmp_path / "item")
    assert sorted(os.listdir(tmp_path)) == [other.name, "item"]
    assert (tmp_path / "item").read_bytes() == b"whole"
    with pytest.raises(LimitExceeded), held_temp(tmp_path, "new-x", _refusing()):
        pass
    assert sorted(os.listdir(tmp_path)) == [other.name, "item"]  # a refused copy leaves no temp


def test_work_due_once_a_while_is_due_for_a_marker_dated_ahead_and_never_touches_a_link(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "swept"
    assert due(marker, 600) and marker.exists()  # none: due, and made
    assert not due(marker, 600)  # just done
    ahead = time.time() + 365 * 86400  # a clock set back after it was touched, or a hand
    os.utime(marker, (ahead, ahead))
    assert due(marker, 600)  # never put off for a year
    assert not due(marker, 600)
    ahead = time.time() + 60  # a file server's clock a minute fast: touched just now
    os.utime(marker, (ahead, ahead))
    assert not due(marker, 600)
    target = tmp_path / "someone-elses"
    target.write_text("x")
    os.utime(target, (1000, 1000))
    marker.unlink()
    marker.symlink_to(target)
    os.utime(marker, (1000, 1000), follow_symlinks=False)  # planted long ago
    assert due(marker, 600)
    assert not due(marker, 600)  # the link's own mtime says when
    assert target.stat().st_mtime == 1000  # what it points to is never touched


def _refusing() -> Iterator[bytes]:
    yield b"part"
    raise LimitExceeded("item", 4, 5, "bytes")


def test_a_directory_where_a_replaced_file_belongs_is_named_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    """``mkdir STATE.md`` by hand: replacing it fails naming STATE.md, not the hidden temp, and
    the temp is gone."""
    (tmp_path / "STATE.md").mkdir()
    with pytest.raises(IsADirectoryError) as e:
        atomic_write(tmp_path / "STATE.md", "status: done\n")
    assert e.value.filename == str(tmp_path / "STATE.md")
    assert "is a directory" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["STATE.md"]

"""``fsync_dir_shared``: concurrent writers share a directory's fsync, and each returns only
after an fsync that began after its own call has ended; a failed fsync fails every writer it
covered."""

from __future__ import annotations

import errno
import itertools
import threading
import time
from pathlib import Path

import pytest

from mailslot.core import fsio


def test_each_caller_is_covered_by_an_fsync_begun_after_its_call(tmp_path, monkeypatch) -> None:
    clock = itertools.count()
    lock = threading.Lock()
    syncs: list[tuple[int, int]] = []
    real = fsio.fsync_dir

    def recorded(directory: Path) -> None:
        with lock:
            began = next(clock)
        time.sleep(0.005)  # a disk's wait: callers pile up behind it
        real(directory)
        with lock:
            syncs.append((began, next(clock)))

    monkeypatch.setattr(fsio, "fsync_dir", recorded)
    calls: list[tuple[int, int]] = []

    def writer() -> None:
        for _ in range(10):
            with lock:
                called = next(clock)
            fsio.fsync_dir_shared(tmp_path)
            with lock:
                calls.append((called, next(clock)))

    threads = [threading.Thread(target=writer) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 160
    for called, returned in calls:
        assert any(called < began and ended < returned for began, ended in syncs)
    assert len(syncs) < len(calls) / 2  # shared: far fewer fsyncs than callers


def _shared_sync(directory: Path, results: list[int | None]) -> None:
    """``fsync_dir_shared(directory)``; its errno, or ``None`` for success, onto ``results``."""
    try:
        fsio.fsync_dir_shared(directory)
    except OSError as e:
        results.append(e.errno)
    else:
        results.append(None)


def test_a_failed_fsync_fails_every_caller_it_covered(tmp_path, monkeypatch) -> None:
    gate = threading.Event()
    failing = True

    def broken(directory: Path) -> None:
        gate.wait(5)
        if failing:
            raise OSError(errno.EIO, "disk gone")

    monkeypatch.setattr(fsio, "fsync_dir", broken)
    errors: list[int | None] = []
    threads = [threading.Thread(target=_shared_sync, args=(tmp_path, errors)) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    gate.set()
    for t in threads:
        t.join()
    assert errors == [errno.EIO] * 8
    failing = False
    fsio.fsync_dir_shared(tmp_path)  # the next one, once the disk is back, succeeds


def test_a_waiter_whose_fsync_failed_fails_though_a_later_one_succeeded(tmp_path) -> None:
    """A waiter needs fsync 2, which fails; fsync 3 (another writer's) succeeds before the
    waiter wakes: it still fails, since what fsync 2 was writing may be gone."""
    syncs = fsio._DirSyncs()
    fsio._dir_syncs[str(tmp_path)] = syncs
    with syncs.cond:  # fsync 1, begun before the waiter's link, is running elsewhere
        syncs.begun, syncs.running = 1, True
    got: list[int | None] = []
    t = threading.Thread(target=_shared_sync, args=(tmp_path, got))
    t.start()
    deadline = time.monotonic() + 5
    while not syncs.cond._waiters:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the waiter never waited"
        time.sleep(0.001)
    with syncs.cond:  # fsync 1 ends; 2 (the waiter's) fails; 3 succeeds; then it wakes
        syncs.begun, syncs.ended, syncs.failed = 3, 3, 2
        syncs.error = OSError(errno.EIO, "disk gone")
        syncs.running = False
        syncs.cond.notify_all()
    t.join(5)
    assert got == [errno.EIO]


def test_atomic_create_for_concurrent_writers_creates_once(tmp_path) -> None:
    p = fsio.atomic_create(tmp_path / "a.json", "one", concurrent=True)
    assert p.read_text() == "one"
    with pytest.raises(fsio.Conflict):
        fsio.atomic_create(tmp_path / "a.json", "two", concurrent=True)
    assert p.read_text() == "one"
    assert [x.name for x in tmp_path.iterdir()] == ["a.json"]


KILLED_MID_WRITE = """
import os, sys, time
from pathlib import Path
import mailslot.core.fsio as fsio
real_write = os.write
def slow_write(fd, data):
    n = real_write(fd, bytes(data[: len(data) // 2]))
    Path(sys.argv[2]).touch()
    time.sleep(60)
    return n
os.write = slow_write
fsio.atomic_create(Path(sys.argv[1]) / "0001-tidal.json", "x" * 100000, concurrent=True)
"""


def test_a_concurrent_writer_killed_mid_write_leaves_nothing_at_all(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    inbox, marker = tmp_path / "inbox", tmp_path / "marker"
    inbox.mkdir()
    child = subprocess.Popen([sys.executable, "-c", KILLED_MID_WRITE, str(inbox), str(marker)])
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the writer never reached its write"
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert os.listdir(inbox) == []  # the file never had a name: no temp to sweep either


def test_without_unnamed_files_a_named_temp_is_used(tmp_path: Path, monkeypatch) -> None:
    import os

    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    p = fsio.atomic_create(tmp_path / "a.json", "one", concurrent=True)
    assert p.read_text() == "one" and os.listdir(tmp_path) == ["a.json"]
    with pytest.raises(fsio.Conflict):
        fsio.atomic_create(tmp_path / "a.json", "two", concurrent=True)

"""Waiting for a lock another process holds: bounded, exclusive, and it says how to clear it.

The holders are real processes: a bash writer's ``mkdir FILE.lock`` and a ``flock`` holder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mailslot.core.errors import LockBusy
from mailslot.core.fsio import file_lock
from mailslot.core.lockwait import mkdir_lock, wait_for

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_wait_for_returns_the_first_hit_and_repairs_once() -> None:
    tries: list[int] = []
    repairs: list[int] = []

    def attempt() -> str | None:
        tries.append(1)
        return "got it" if len(tries) == 4 else None

    assert wait_for(attempt, 30, interval=0.001, on_first_miss=lambda: repairs.append(1)) == (
        "got it"
    )
    assert len(tries) == 4 and repairs == [1]


def test_wait_for_gives_up_at_its_deadline_after_a_last_try() -> None:
    tries: list[int] = []

    def attempt() -> bool:
        tries.append(1)
        return False

    assert wait_for(attempt, 0.1, interval=0.01) is None
    assert len(tries) >= 2
    tries.clear()
    assert wait_for(attempt, 0) is None
    assert len(tries) == 1  # no time to wait: one try


def _hold(argv: list[str], ready: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, env=ENV)
    while not ready.exists():
        assert proc.poll() is None, "the holder ended early"
        time.sleep(0.005)
    return proc


def test_a_stuck_mkdir_lock_fails_loudly_and_a_freed_one_is_taken(tmp_path: Path) -> None:
    lock, ready = tmp_path / "chat.md.lock", tmp_path / "ready"
    holder = _hold(
        ["bash", "-c", f"mkdir {lock} && touch {ready} && sleep 0.5 && rmdir {lock}"], ready
    )
    with pytest.raises(LockBusy, match=f"rmdir {lock}") as e, mkdir_lock(lock, 0.05):
        pass
    assert e.value.path == lock
    with mkdir_lock(lock, 30):  # the bash writer lets go within its half second
        assert lock.is_dir()
    assert not lock.exists()
    assert holder.wait(timeout=30) == 0


def test_a_stuck_lock_says_how_to_clear_what_is_actually_there(tmp_path: Path) -> None:
    lock = tmp_path / "my chat.md.lock"  # a space: the command must still be one argument
    quoted = f"'{lock}'"
    lock.write_text("")
    with pytest.raises(LockBusy, match="regular file") as e, mkdir_lock(lock, 0.05):
        pass
    assert str(e.value).endswith(f"(rm {quoted})") and "rmdir" not in str(e.value)
    subprocess.run(["sh", "-c", str(e.value).rsplit("(", 1)[1][:-1]], check=True)
    assert not lock.exists()

    lock.symlink_to(tmp_path / "anywhere")
    with pytest.raises(LockBusy, match="a symlink") as e, mkdir_lock(lock, 0.05):
        pass
    assert str(e.value).endswith(f"(rm {quoted})")
    lock.unlink()

    lock.mkdir()
    (lock / "notes").write_text("not a lock's")
    with pytest.raises(LockBusy, match="files in it") as e, mkdir_lock(lock, 0.05):
        pass
    assert str(e.value).endswith(f"(rm -r {quoted})")
    (lock / "notes").unlink()

    with pytest.raises(LockBusy) as e, mkdir_lock(lock, 0.05):  # the lock a dead writer left
        pass
    assert str(e.value).endswith(f"(rmdir {quoted})")
    subprocess.run(["sh", "-c", str(e.value).rsplit("(", 1)[1][:-1]], check=True)
    with mkdir_lock(lock, 0.05):  # the advice cleared it
        assert lock.is_dir()


def test_a_lock_tampered_with_while_held_does_not_fail_the_work_done_under_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lock = tmp_path / "chat.md.lock"
    done = []
    with mkdir_lock(lock, 1):
        (lock / "planted").write_text("x")  # someone put a file into the held lock
        done.append(True)
    assert done and "could not free the lock" in caplog.text
    # the next taker is told what is there
    with pytest.raises(LockBusy, match="files in it"), mkdir_lock(lock, 0.05):
        pass


_COUNTER = """
import sys
import time
from pathlib import Path
from mailslot.core.lockwait import mkdir_lock
counter = Path(sys.argv[1])
for _ in range(int(sys.argv[2])):
    with mkdir_lock(Path(str(counter) + ".lock"), 60, interval=0.0005):
        n = int(counter.read_text())
        counter.write_text(str(n + 1))
"""


def test_mkdir_lock_excludes_other_processes(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [
        subprocess.Popen([sys.executable, "-c", _COUNTER, str(counter), "100"], env=ENV)
        for _ in range(3)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert counter.read_text() == "300"  # no increment lost to a racer


def test_a_held_flock_is_waited_for_then_refused_with_the_callers_words(tmp_path: Path) -> None:
    lock, ready = tmp_path / "tick.lock", tmp_path / "ready"
    hold = (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_EX); open(sys.argv[2], 'w').close(); time.sleep(0.5)"
    )
    holder = _hold([sys.executable, "-c", hold, str(lock), str(ready)], ready)
    busy = "another tick has held it"
    with pytest.raises(LockBusy, match=busy), file_lock(lock, timeout=0.05, busy=busy):
        pass
    with pytest.raises(LockBusy, match="held by another process"), file_lock(lock, blocking=False):
        pass
    with file_lock(lock, timeout=30):  # the holder lets go within its half second
        pass
    assert holder.wait(timeout=30) == 0


_HOLD_MKDIR = """
import sys, time
from pathlib import Path
from mailslot.core.lockwait import mkdir_lock
with mkdir_lock(Path(sys.argv[1]), 5):
    open(sys.argv[2], "w").close()
    time.sleep(60)
"""


def test_a_mailslot_lock_whose_owner_was_killed_is_broken_by_the_next_taker(
    tmp_path: Path,
) -> None:
    lock, ready = tmp_path / "chat.md.lock", tmp_path / "ready"
    holder = _hold([sys.executable, "-c", _HOLD_MKDIR, str(lock), str(ready)], ready)
    with pytest.raises(LockBusy, match=f"by process {holder.pid} "), mkdir_lock(lock, 0.2):
        pass  # alive: never broken
    holder.kill()
    holder.wait(timeout=30)
    with mkdir_lock(lock, 5):  # dead, proven by its record: taken well before 30 s
        assert (lock / "owner").read_text().split()[0] == str(os.getpid())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready"]  # nothing left aside


def _planted(lock: Path, pid: int, started: str, boot: str, host: str) -> None:
    lock.mkdir()
    (lock / "owner").write_text(f"{pid} {started} {boot} {host} 0123456789abcdef\n")


def test_only_a_record_proving_its_owner_dead_here_breaks_a_lock(tmp_path: Path) -> None:
    import socket

    from mailslot.core import lockwait

    me, host = os.getpid(), socket.gethostname()
    started, boot = lockwait._start_time(me), lockwait._boot_id()
    assert started is not None
    lock = tmp_path / "chat.md.lock"
    kept = [
        (me, started, boot, host),  # alive
        (me, started, boot, "another-host"),  # cannot be judged from here
    ]
    for pid, st, bt, hs in kept:
        _planted(lock, pid, st, bt, hs)
        with pytest.raises(LockBusy), mkdir_lock(lock, 0.2):
            pass
        assert (lock / "owner").exists()
        (lock / "owner").unlink()
        lock.rmdir()
    broken = [
        (me, str(int(started) + 1), boot, host),  # the pid now belongs to another process
        (me, started, "another-boot", host),  # the machine rebooted since
    ]
    for pid, st, bt, hs in broken:
        _planted(lock, pid, st, bt, hs)
        with mkdir_lock(lock, 5):
            assert (lock / "owner").read_text().split()[:2] == [str(me), started]
        assert not lock.exists()
    lock.mkdir()  # a bash writer's lock: no record, left alone
    with pytest.raises(LockBusy, match="rmdir"), mkdir_lock(lock, 0.2):
        pass
    assert lock.is_dir()


def test_a_lock_mailslot_made_but_left_without_a_record_is_broken_once_it_has_sat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    from mailslot.core import lockwait

    monkeypatch.setattr(lockwait, "ABANDONED_S", 0.3)
    lock = tmp_path / "chat.md.lock"
    with mkdir_lock(lock, 5):
        assert lock.stat().st_mode & stat.S_ISVTX  # how a lock mailslot made is told apart
    # What a taker killed between its mkdir and its record leaves: a sticky directory, empty or
    # holding the owner file it had only created.
    for empty_owner in (False, True):
        os.mkdir(lock, 0o1777)
        if empty_owner:
            (lock / "owner").touch()
        with pytest.raises(LockBusy), mkdir_lock(lock, 0.1):
            pass  # just made: its taker may be about to write its record
        time.sleep(0.4)
        with mkdir_lock(lock, 5):
            assert (lock / "owner").read_text().split()[0] == str(os.getpid())
        assert not lock.exists()
    lock.mkdir()  # a bash writer's lock, just as old: never broken
    time.sleep(0.4)
    with pytest.raises(LockBusy, match="rmdir"), mkdir_lock(lock, 0.2):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.md.lock"]  # nothing aside


def test_waiters_racing_to_break_a_dead_owners_lock_still_exclude_each_other(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    lock = Path(f"{counter}.lock")
    _planted(lock, 4194304 + 1, "1", "-", __import__("socket").gethostname())  # no such pid
    procs = [
        subprocess.Popen([sys.executable, "-c", _COUNTER, str(counter), "100"], env=ENV)
        for _ in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    assert counter.read_text() == "400"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter"]

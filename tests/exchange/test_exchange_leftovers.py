"""What a killed writer leaves behind is recovered by the tick or reported by doctor, by path.

A tick killed inside ``git add`` leaves ``.git/index.lock``; without recovery every later commit
fails while doctor says the repository is fine. The kill here is real: a large file keeps git
inside ``git add -A`` with the index locked, and the whole tick is SIGKILLed there.
Age comes from ``os.utime``, never from sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from exhelp import run

from mailslot.core.git import STALE_AFTER_S
from mailslot.exchange.entries import send
from mailslot.exchange.layout import Exchange


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, read from ``/proc``."""
    found: list[int] = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in map(int, children):
        found += [child, *_descendants(child)]
    return found


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _kill_tick_inside_git_add(ex: Exchange) -> None:
    """Run a real tick whose ``git add -A`` has a large file to hash, so it holds the index lock
    for a while, and SIGKILL the tick and its git while the lock is held."""
    (ex.root / "bulk.bin").write_bytes(os.urandom(48 << 20))  # incompressible: slow to add
    send(ex, "claude", "killed", "fyi", "caught mid-commit\n")
    lock = ex.root / ".git" / "index.lock"
    tick = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "--root", str(ex.root), "exchange", "tick"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while True:  # a hang fails by the test's timeout
        assert tick.poll() is None, "the tick finished before git took the index lock"
        if lock.exists():  # frozen where it stands; kept only if the lock is still held
            family = [tick.pid, *_descendants(tick.pid)]  # its git runs in a session of its own
            _signal_all(family, signal.SIGSTOP)
            if lock.exists():
                break
            _signal_all(family, signal.SIGCONT)  # a brief lock (a status refresh) ended first
        time.sleep(0.002)
    # a service manager's kill takes the whole cgroup: the tick and the git it runs
    family = _descendants(tick.pid)
    os.killpg(tick.pid, signal.SIGKILL)
    for pid in family:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    tick.wait()


def _doctor(ex: Exchange) -> dict[str, dict[str, str]]:
    r = run(ex.root, "exchange", "doctor", "--json", ok=False)
    return {c["check"]: c for c in json.loads(r.stdout)["checks"]}


@pytest.mark.timeout(300)
def test_a_git_lock_left_by_a_killed_tick_is_reported_then_recovered(
    ex: Exchange,
) -> None:
    _kill_tick_inside_git_add(ex)
    lock = ex.root / ".git" / "index.lock"
    assert lock.exists()

    # young: a git may still be running, so it is left in place -- and said, by path
    checks = _doctor(ex)
    assert checks["git:lock"]["status"] == "warn" and str(lock) in checks["git:lock"]["detail"]
    # and the uncommitted entry is not said to await a commit that cannot happen
    assert checks["git"]["status"] == "warn" and "index.lock" in checks["git"]["detail"]
    r = run(ex.root, "exchange", "tick", "--json", ok=False)
    assert r.exit_code == 1 and str(lock) in r.output
    assert lock.exists()

    # old and held by nothing: doctor fails on it, the next tick removes it and commits
    _age(lock, STALE_AFTER_S + 60)
    checks = _doctor(ex)
    assert checks["git:lock"]["status"] == "fail" and "stale" in checks["git:lock"]["detail"]
    r = run(ex.root, "exchange", "tick", "--json")
    out = json.loads(r.stdout)
    assert out["cleaned"] == [".git/index.lock"] and out["commit"]
    assert not lock.exists()
    assert "git:lock" not in _doctor(ex)
    log = subprocess.run(
        ["git", "-C", str(ex.root), "log", "--name-only", "--format="],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "0001-claude.md" in log


@pytest.mark.timeout(120)
def test_an_old_lock_a_live_git_holds_open_is_never_removed(ex: Exchange) -> None:
    lock = ex.root / ".git" / "index.lock"
    lock.write_bytes(b"")
    _age(lock, STALE_AFTER_S + 60)
    # a process that is not git but holds the lock open (git itself keeps its fd while writing)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"f = open({str(lock)!r}, 'rb'); import time; time.sleep(600)"],
        stdout=subprocess.DEVNULL,
    )
    try:
        while not any(
            os.readlink(f"/proc/{holder.pid}/fd/{fd}") == str(lock)
            for fd in os.listdir(f"/proc/{holder.pid}/fd")
        ):
            time.sleep(0.05)
        send(ex, "claude", "held", "fyi", "x\n")
        r = run(ex.root, "exchange", "tick", "--json", ok=False)
        assert r.exit_code == 1 and f"process {holder.pid}" in r.output
        assert lock.exists()
        assert _doctor(ex)["git:lock"]["status"] == "fail"
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.timeout(120)
def test_an_old_held_lock_is_never_removed_through_a_symlinked_root(
    ex: Exchange, tmp_path: Path
) -> None:
    from mailslot.core.git import clear_stale_index_lock

    lock = ex.root / ".git" / "index.lock"
    lock.write_bytes(b"")
    _age(lock, STALE_AFTER_S + 60)
    holder = subprocess.Popen(  # not git, working elsewhere, holding the lock open
        [sys.executable, "-c", f"f = open({str(lock)!r}, 'rb'); import time; time.sleep(600)"],
        stdout=subprocess.DEVNULL,
        cwd="/",
    )
    try:
        while not any(
            os.readlink(f"/proc/{holder.pid}/fd/{fd}") == str(lock)
            for fd in os.listdir(f"/proc/{holder.pid}/fd")
        ):
            time.sleep(0.05)
        link = tmp_path / "exchange-link"  # the root as a config or --root names it
        link.symlink_to(ex.root)
        found = clear_stale_index_lock(link)
        assert found is not None and not found.stale and f"process {holder.pid}" in found.describe()
        assert lock.exists()
    finally:
        holder.kill()
        holder.wait()


# -- killed senders, refused sends, a full disk ---------------------------------------------------

_STALL_FSYNC = """
import os, runpy, stat, sys, time
mark = sys.argv.pop(1)
real = os.fsync
def stall(fd):
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        return real(fd)
    open(mark, "w").close()  # the temp is written; the sender stops here
    time.sleep(600)
os.fsync = stall
sys.argv[0] = "mailslot"
runpy.run_module("mailslot", run_name="__main__")
"""


def _kill_sender_mid_write(ex: Exchange, tmp_path: Path, topic: str) -> None:
    """A real ``exchange send`` stopped after writing its temp file (before fsync), SIGKILLed."""
    sender = _stalled_sender(ex, tmp_path, topic)
    os.killpg(sender.pid, signal.SIGKILL)
    sender.wait()


def _stalled_sender(ex: Exchange, tmp_path: Path, topic: str) -> subprocess.Popen[bytes]:
    """A real ``exchange send`` stalled, alive, after writing its temp file (before fsync)."""
    mark = tmp_path / "temp-written"
    body = tmp_path / "body.md"
    body.write_text("a long review\n" * 10_000)
    args = ["--root", str(ex.root), "--as", "claude", "exchange", "send", "--topic", topic]
    args += ["--action", "fyi", "--body-file", str(body)]
    sender = subprocess.Popen(
        [sys.executable, "-c", _STALL_FSYNC, str(mark), *args],
        start_new_session=True,
    )
    while not mark.exists():
        assert sender.poll() is None, "the sender finished before it stalled"
        time.sleep(0.05)
    return sender


@pytest.mark.timeout(300)
def test_a_killed_senders_temp_and_folder_are_removed_once_old(
    ex: Exchange, tmp_path: Path
) -> None:
    from mailslot.exchange import leftovers

    _kill_sender_mid_write(ex, tmp_path, "killed")
    (folder,) = (ex.root / "to-olu").glob("*-killed")
    (temp,) = folder.iterdir()
    assert temp.name.startswith(".") and temp.stat().st_size > 100_000
    assert leftovers.clean(ex, force=True) == []  # young: its writer may still be at work
    assert "tree:leftovers" not in {k for k, c in _doctor(ex).items() if c["status"] != "ok"}

    for path in (temp, folder):
        _age(path, leftovers.LEFTOVER_AGE_S + 60)
    _age(ex.meta / "cleaned", leftovers.CLEAN_EVERY_S + 60)
    check = _doctor(ex)["tree:leftovers"]
    assert check["status"] == "warn" and temp.name in check["detail"]
    out = json.loads(run(ex.root, "exchange", "tick", "--json").stdout)
    rel = f"to-olu/{folder.name}"
    assert sorted(out["cleaned"]) == sorted([f"{rel}/{temp.name}", f"{rel}/"])
    assert out["new_topics"] == [] and not folder.exists()
    assert _doctor(ex)["tree:leftovers"]["status"] == "ok"


@pytest.mark.timeout(300)
def test_a_live_senders_old_temp_is_no_leftover(ex: Exchange, tmp_path: Path) -> None:
    """Doctor reports what the tick would remove: a temp whose writer holds it is neither."""
    from mailslot.exchange import leftovers

    sender = _stalled_sender(ex, tmp_path, "slow")
    try:
        (folder,) = (ex.root / "to-olu").glob("*-slow")
        (temp,) = folder.iterdir()
        for path in (temp, folder):
            _age(path, leftovers.LEFTOVER_AGE_S + 60)  # stalled for hours, and alive
        assert leftovers.find(ex) == []  # neither the temp nor its folder as "empty"
        assert _doctor(ex)["tree:leftovers"]["status"] == "ok"
        assert leftovers.clean(ex, force=True) == [] and temp.exists()
    finally:
        os.killpg(sender.pid, signal.SIGKILL)
        sender.wait()
    assert {x.kind for x in leftovers.find(ex)} == {"temp", "empty"}  # dead now: reported


def test_cleanup_never_takes_a_folder_a_sender_writes_into(
    ex: Exchange, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mailslot.exchange import leftovers

    young = ex.root / "to-olu" / "2026-11-29-young"
    young.mkdir()
    busy = ex.root / "to-olu" / "2026-11-29-busy"
    busy.mkdir()
    (busy / ".new-claude.md.1.0badcafe.tmp").write_text("in flight")
    _age(busy, leftovers.LEFTOVER_AGE_S + 60)
    assert leftovers.clean(ex, force=True) == []
    assert young.is_dir() and busy.is_dir()

    # the tick removes an old empty folder between a sender's make_dir and its write
    old = ex.root / "to-olu" / "2026-11-29-old"
    old.mkdir()
    _age(old, leftovers.LEFTOVER_AGE_S + 60)
    real = Exchange.make_dir
    calls = []

    def make_then_lose(self: Exchange, path: Path, inbox_side: str) -> bool:
        made = real(self, path, inbox_side)
        calls.append(path)
        if len(calls) == 1:
            assert leftovers.clean(self, force=True) == ["to-olu/2026-11-29-old/"]
        return made

    monkeypatch.setattr(Exchange, "make_dir", make_then_lose)
    r = send(ex, "claude", "2026-11-29-old", "fyi", "still delivered\n")
    assert r.path.read_text().endswith("still delivered\n") and len(calls) == 2


@pytest.mark.timeout(120)
def test_a_send_refused_by_a_full_disk_leaves_nothing(small_disk: Path, fill_disk) -> None:
    from mailslot.exchange.create import create_exchange

    ex = create_exchange(small_disk / "x", ["claude", "olu"], git=False)
    topic = send(ex, "claude", "before", "fyi", "written while there was room\n").topic
    filler = fill_disk(small_disk)
    r = run(
        ex.root,
        "exchange",
        "send",
        "--topic",
        "full",
        "--action",
        "fyi",
        "x" * 20_000,
        agent="claude",
        ok=False,
    )
    assert r.exit_code == 1 and "no space left" in r.output.lower()
    r = run(ex.root, "exchange", "state", topic, "done", agent="olu", ok=False)
    assert r.exit_code == 1 and "no space left" in r.output.lower()
    assert list((ex.root / "to-olu").glob("*-full")) == []  # no empty topic folder
    assert not (ex.root / "to-claude" / topic).exists()
    assert [p.name for p in ex.root.rglob(".*.tmp")] == []
    filler.unlink()
    out = json.loads(run(ex.root, "exchange", "tick", "--json").stdout)
    assert out["new_topics"] == [topic]


def test_cleanup_never_follows_a_symlink(ex: Exchange, tmp_path: Path) -> None:
    from mailslot.exchange import leftovers

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    temp = elsewhere / ".precious.1.0badcafe.tmp"
    temp.write_text("not ours")
    _age(temp, leftovers.LEFTOVER_AGE_S + 60)
    (ex.root / "to-olu" / "2026-11-29-planted").symlink_to(elsewhere)
    (ex.root / "to-olu").rename(tmp_path / "moved")
    (ex.root / "to-olu").symlink_to(elsewhere)  # an inbox replaced by a link
    leftovers.clean(ex, force=True)
    assert temp.exists()

"""What a killed writer leaves behind is recovered by the tick or reported by doctor, by path.

A tick killed inside ``git add`` leaves ``.git/index.lock``; without recovery every later commit
fails while doctor says the repository is fine. The kill here is real: a git clean filter that
stalls holds git inside ``git add`` (with the index locked) until the whole tick is SIGKILLed.
Age comes from ``os.utime``, never from sleeping.
"""

from __future__ import annotations

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


def _kill_tick_inside_git_add(ex: Exchange, tmp_path: Path) -> None:
    """Run a real tick whose ``git add`` stalls in a clean filter, and SIGKILL it there."""
    mark = tmp_path / "in-git-add"
    stall = tmp_path / "stall.sh"
    # only the new entry stalls: it is untracked, so only ``git add`` runs the filter on it
    stall.write_text(
        f'#!/bin/sh\ncase "$1" in *killed*) touch {mark}; exec sleep 600;; esac\nexec cat\n'
    )
    stall.chmod(0o755)
    subprocess.run(
        ["git", "-C", str(ex.root), "config", "filter.stall.clean", f"{stall} %f"], check=True
    )
    (ex.root / ".git" / "info").mkdir(exist_ok=True)
    (ex.root / ".git" / "info" / "attributes").write_text("*.md filter=stall\n")
    send(ex, "claude", "killed", "fyi", "caught mid-commit\n")
    tick = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "--root", str(ex.root), "exchange", "tick"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not mark.exists():  # the filter runs with the index locked; a hang fails by timeout
        assert tick.poll() is None, "the tick finished before git add stalled"
        time.sleep(0.05)
    os.killpg(tick.pid, signal.SIGKILL)
    tick.wait()
    (ex.root / ".git" / "info" / "attributes").unlink()
    subprocess.run(
        ["git", "-C", str(ex.root), "config", "--unset", "filter.stall.clean"], check=True
    )


def _doctor(ex: Exchange) -> dict[str, dict[str, str]]:
    r = run(ex.root, "exchange", "doctor", "--json", ok=False)
    return {c["check"]: c for c in json.loads(r.stdout)["checks"]}


@pytest.mark.timeout(300)
def test_a_git_lock_left_by_a_killed_tick_is_reported_then_recovered(
    ex: Exchange, tmp_path: Path
) -> None:
    _kill_tick_inside_git_add(ex, tmp_path)
    lock = ex.root / ".git" / "index.lock"
    assert lock.exists()

    # young: a git may still be running, so it is left in place -- and said, by path
    checks = _doctor(ex)
    assert checks["git:lock"]["status"] == "warn" and str(lock) in checks["git:lock"]["detail"]
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

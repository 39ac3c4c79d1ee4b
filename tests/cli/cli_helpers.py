"""What the command-line tests share: the real ``mailslot`` command in a process, and waiting for
it to reach a point (inside its blocking wait, say) within a liveness bound."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

DEADLINE = 60.0  # liveness bound only: a hung process fails the test instead of the suite


def spawn(
    *args: str, stdin: int | None = subprocess.DEVNULL, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``mailslot ARGS`` (stdout and stderr piped, ``env`` added to the environment)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mailslot", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def until(ready: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    """Poll ``ready`` until it holds; fail if ``proc`` ends first or ``DEADLINE`` passes."""
    end = time.monotonic() + DEADLINE
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the command never got there"
        time.sleep(0.02)


def in_kernel_wait(proc: subprocess.Popen[bytes]) -> bool:
    """The process holds an inotify descriptor: it is inside its blocking wait."""
    try:
        fds = list(Path(f"/proc/{proc.pid}/fd").iterdir())
        return any(os.readlink(fd) == "anon_inode:inotify" for fd in fds)
    except OSError:
        return False


def asleep_in_its_wait(proc: subprocess.Popen[bytes]) -> bool:
    """The command is inside its blocking wait: it holds an inotify descriptor and sleeps in
    ``poll``. The descriptor alone is not enough: ``relay ask`` arms its watch before it sends,
    so a removal started then races the send, which creates the lock file and the inbox's intent
    sidecar again in the directory being removed ("Directory not empty")."""
    if not in_kernel_wait(proc):
        return False
    try:
        return "poll" in Path(f"/proc/{proc.pid}/wchan").read_text()
    except OSError:
        return False

"""Helpers for the exchange health tests (a uniquely named module: rootdir import mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from mailslot.cli import cli

GENEROUS = 60.0  # seconds: a loaded 2-core CI machine, never a performance assertion


def run(root: Path, *args: str, agent: str | None = None, ok: bool = True) -> Result:
    """Invoke ``mailslot --root ROOT [--as A] ARGS`` in-process; fail loudly on a wrong exit."""
    pre = ["--root", str(root)] + (["--as", agent] if agent else [])
    r = CliRunner().invoke(cli, [*pre, *args], catch_exceptions=False)
    if ok and r.exit_code != 0:
        raise AssertionError(f"mailslot {' '.join(args)} exited {r.exit_code}:\n{r.output}")
    return r


def run_json(root: Path, *args: str, agent: str | None = None) -> Any:
    """``run`` with ``--json`` appended, parsed."""
    return json.loads(run(root, *args, "--json", agent=agent).stdout)


def hand_entry(
    root: Path,
    inbox: str,
    topic: str,
    number: int,
    sender: str,
    at: str,
    action: str = "fyi",
    body: str = "written by hand\n",
    *,
    crlf: bool = False,
    rename: bool = True,
) -> Path:
    """An entry written the way a foreign agent would (optionally temp + rename into place)."""
    d = root / f"to-{inbox}" / topic
    d.mkdir(parents=True, exist_ok=True)
    text = f'---\nfrom: "{sender}"\nat: {at}\naction: {action}\n---\n{body}'
    data = (text.replace("\n", "\r\n") if crlf else text).encode()
    final = d / f"{number:04d}-{sender}.md"
    if rename:
        tmp = d / f".{final.name}.partial"
        tmp.write_bytes(data)
        os.rename(tmp, final)
    else:
        final.write_bytes(data)
    return final


def hand_state(root: Path, inbox: str, topic: str, status: str, at: str, by: str) -> Path:
    """A STATE.md written by hand into ``to-<inbox>/<topic>/`` (the writing side's status)."""
    p = root / f"to-{inbox}" / topic / "STATE.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"status: {status}\ntags: []\nupdated_at: {at}\nupdated_by: {by}\n")
    return p


def spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the real ``mailslot`` command in a subprocess (stdout/stderr captured)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mailslot", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def inotify_watches(pid: int) -> int:
    """How many inotify watches process ``pid`` holds (-1 where /proc cannot tell)."""
    fd_dir = Path(f"/proc/{pid}/fdinfo")
    if not fd_dir.is_dir():
        return -1
    n = 0
    for f in fd_dir.iterdir():
        try:
            n += f.read_text().count("inotify wd:")
        except OSError:
            continue
    return n


def wait_armed(proc: subprocess.Popen[str], at_least: int, timeout: float = GENEROUS) -> None:
    """Block until ``proc`` has armed ``at_least`` inotify watches (it is blocked in wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"waiter exited early: {proc.communicate()}"
        n = inotify_watches(proc.pid)
        if n < 0:
            time.sleep(2.0)  # no /proc: give it a generous moment instead
            return
        if n >= at_least:
            time.sleep(0.05)
            return
        time.sleep(0.02)
    raise AssertionError("the waiter never armed its watches")


def snapshot(*dirs: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``dirs`` with (size, mtime_ns, mode): to assert nothing was written."""
    out = {}
    for d in dirs:
        if not d.exists():
            continue
        for p in [d, *d.rglob("*")]:
            st = p.lstat()
            out[str(p)] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, st.st_mode)
    return out

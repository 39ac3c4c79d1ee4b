"""Shared fixtures: every test gets its own state dir and no inherited mailslot settings; real
processes killed mid-write, a small disk that fills up, a real browser."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from mailslot.core import clock
from mailslot.exchange.create import create_exchange
from mailslot.exchange.layout import Exchange
from shared_helpers import CHROMIUM_ARGS, chromium

# Property tests judge behaviour, never speed: on a loaded machine an example may take long,
# and that is not a failure (timings belong in bench/).
settings.register_profile("mailslot", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mailslot")


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Point the state dir at a fresh temp dir; drop MAILSLOT_* from the environment."""
    state = tmp_path_factory.mktemp("state")
    for name in list(os.environ):
        if name.startswith("MAILSLOT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    yield state
    clock.set_clock(None)


@pytest.fixture
def ex(tmp_path: Path) -> Exchange:
    """An exchange with sides claude/olu and a human ``will`` on claude's side, with git."""
    return create_exchange(tmp_path / "x", ["claude", "olu"], humans=["will:claude"])


@pytest.fixture
def run_cli() -> Iterator[object]:
    """Run the real ``mailslot`` console command in a subprocess; returns CompletedProcess."""

    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "mailslot", *args],
            input=input,
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd,
            timeout=timeout,
        )

    yield run


# A real process killed by SIGKILL inside its first large write(): it writes the first half of the
# bytes, then the kernel kills it -- what a kill landing mid-write leaves on disk. Writes into an
# append's intent sidecar (which carries a copy of the record) count only when asked.
_KILL_IN_WRITE = """
import os, signal, sys
_plain_write, _plain_pwrite = os.write, os.pwrite
def _counts(fd):
    if os.environ.get("KILL_IN_SIDECAR"):
        return True
    return not os.readlink(f"/proc/self/fd/{fd}").endswith(".intent")
def _dies(fd, data):
    return len(data) >= int(os.environ["KILL_AT_WRITE_BYTES"]) and _counts(fd)
def _half_then_die(fd, data):
    if _dies(fd, data):
        _plain_write(fd, bytes(data[: len(data) // 2]))
        os.kill(os.getpid(), signal.SIGKILL)
    return _plain_write(fd, data)
def _half_at_then_die(fd, data, offset):
    if _dies(fd, data):
        _plain_pwrite(fd, bytes(data[: len(data) // 2]), offset)
        os.kill(os.getpid(), signal.SIGKILL)
    return _plain_pwrite(fd, data, offset)
os.write, os.pwrite = _half_then_die, _half_at_then_die
"""
_CLI = """
sys.argv[0] = "mailslot"
from mailslot.cli import main
main()
"""


@pytest.fixture
def killed_in_write() -> Iterator[object]:
    """Run ``mailslot ARGS`` (or Python ``code`` with ARGS in ``sys.argv[1:]``) in a process that
    SIGKILLs itself in its first write (or ``pwrite``) of at least ``at_bytes`` bytes, after
    writing half of them; asserts it died that way. Writes into an intent sidecar count only with
    ``in_sidecar``."""

    def run(
        *args: str,
        at_bytes: int,
        cwd: Path | None = None,
        code: str = _CLI,
        in_sidecar: bool = False,
    ) -> None:
        env = {**os.environ, "KILL_AT_WRITE_BYTES": str(at_bytes)}
        if in_sidecar:
            env["KILL_IN_SIDECAR"] = "1"
        proc = subprocess.run(
            [sys.executable, "-c", _KILL_IN_WRITE + code, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=60,
        )
        assert proc.returncode == -9, (proc.returncode, proc.stderr)

    yield run


@pytest.fixture
def small_disk_size() -> str:
    """Size of the ``small_disk`` tmpfs; a test module overrides this fixture to change it."""
    return "64k"


@pytest.fixture
def small_disk(tmp_path: Path, small_disk_size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``small_disk_size`` (64 KiB unless overridden) mounted at
    ``tmp_path/disk``: a real filesystem that runs out of space (needs root; skipped otherwise)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    size = f"size={small_disk_size}"
    subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill_disk(disk: Path, leave_pages: int = 0) -> Path:
    """Fill ``disk`` to the last byte, then free ``leave_pages`` pages; returns the filler file
    (unlink it to make room again)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (4096, 512, 1):
            try:
                while os.write(fd, b"\0" * chunk):
                    pass
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - size % 4096 - leave_pages * 4096))
    return filler


@pytest.fixture
def fill_disk() -> object:
    """``fill_disk(disk, leave_pages=0)``: fill a small disk, leaving that many pages free."""
    return _fill_disk


@pytest.fixture
def browser() -> Iterator[Any]:
    """Debian's chromium through Playwright, headless (skipped where chromium is missing)."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()

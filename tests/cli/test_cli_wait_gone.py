"""A blocking wait whose directory is removed under it ends with exit 4 (``gone``), as ``chat
wait`` does when its file is removed: nothing can arrive any more, so no command waits out its
timeout (or forever, without one) on a mailbox that no longer exists."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import DEADLINE, asleep_in_its_wait, spawn, until


def _exchange(tmp: Path) -> tuple[Path, list[str]]:
    root = tmp / "ex"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mailslot",
            "exchange",
            "init",
            str(root),
            "--side",
            "a",
            "--side",
            "b",
            "--no-git",
        ],
        check=True,
        capture_output=True,
    )
    return root, ["--root", str(root), "--as", "b", "exchange", "watch", "--timeout", "120"]


def _relay(tmp: Path, *wait: str) -> tuple[Path, list[str]]:
    root = tmp / "mb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mailslot",
            "relay",
            "init",
            str(root),
            "--worker",
            "w1",
            "--manager",
            "manager",
        ],
        check=True,
        capture_output=True,
    )
    return root, ["--root", str(root), *wait, "--timeout", "120"]


def _outbox(tmp: Path) -> tuple[Path, list[str]]:
    from mailslot.bus import layout

    root = tmp / "shared"
    layout.init(root, consumer="beacon")
    return root, ["--root", str(root), "outbox", "take", "--as", "beacon", "--wait", "120"]


SETUPS = {
    "exchange watch": _exchange,
    "relay ask": lambda tmp: _relay(tmp, "--as", "w1", "relay", "ask", "anyone there?"),
    "relay serve": lambda tmp: _relay(tmp, "--as", "manager", "relay", "serve"),
    "outbox take --wait": _outbox,
}


@pytest.mark.parametrize("command", sorted(SETUPS))
def test_removing_the_directory_ends_a_blocked_wait_with_exit_4(tmp_path, command) -> None:
    root, args = SETUPS[command](tmp_path)
    proc = spawn(*args, env={"XDG_STATE_HOME": str(tmp_path / "state")})
    try:
        until(lambda: asleep_in_its_wait(proc), proc)
        shutil.rmtree(root)
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.decode()
    assert proc.returncode == 4, text
    assert text.startswith("mailslot: gone:") and "removed" in text
    assert "cursor is saved" not in text

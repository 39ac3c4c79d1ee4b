"""Reading a chat path someone else may have planted: a FIFO or a huge file named like a chat.

``read``, ``status`` and ``wait`` refuse either at once with a clear error (a FIFO never blocks
them; a file over the read limit is never read whole, and the error names the limit).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mailslot.core.fsio import READ_FROM_MAX

COMMANDS = [
    ("read",),
    ("status",),
    ("wait", "--as", "bob", "--timeout", "5"),
]


def _refused(run_cli, path: Path, command: tuple[str, ...]) -> str:
    try:
        r = run_cli("chat", command[0], str(path), *command[1:], timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chat {command[0]} blocked on {path.name}")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("mailslot: error:") and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_fifo_named_like_a_chat_is_refused_at_once(
    tmp_path: Path, run_cli, command: tuple[str, ...]
) -> None:
    fifo = tmp_path / "chat-2026-11-29-181400.txt"
    os.mkfifo(fifo)
    assert "not a regular file" in _refused(run_cli, fifo, command)


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_huge_file_named_like_a_chat_is_refused_naming_the_limit(
    tmp_path: Path, run_cli, command: tuple[str, ...]
) -> None:
    huge = tmp_path / "chat-2026-11-29-181400.txt"
    with huge.open("wb") as f:
        f.write(b"---MSG---\nFROM: alice\nTIME: 2026-11-29T18:14:00Z\n---\nhi\n")
        f.truncate(3 << 30)  # sparse: 3 GB that cost nothing
    assert f"at most {READ_FROM_MAX} bytes" in _refused(run_cli, huge, command)

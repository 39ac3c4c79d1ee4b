"""A body read from standard input or a file is read to its limit plus one byte, never whole.

``/dev/zero`` as a body (or any stream larger than the command's limit) is refused with the
limit error and exit 1 after reading ``limit + 1`` bytes, and nothing is written. Each command runs
as a real process under an address-space cap, so reading the stream whole is a ``MemoryError``
traceback, not a slow test.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from mailslot.chat import new_chat
from mailslot.exchange.create import create_exchange

MEMORY_CAP = 1 << 30  # far above what mailslot needs; far below an endless stream


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def mailslot_on_zeros(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``mailslot ARGS`` with ``/dev/zero`` as standard input, under the memory cap."""
    with open("/dev/zero", "rb") as zeros:
        return subprocess.run(
            [sys.executable, "-m", "mailslot", *args],
            stdin=zeros,
            capture_output=True,
            text=True,
            preexec_fn=_cap,
            cwd=cwd,
            env={**os.environ, "MAILSLOT_AGENT": "claude"},
            check=False,
        )


def _refused(r: subprocess.CompletedProcess[str], limit: int) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("mailslot: error: ")
    assert f"more than {limit} bytes" in r.stderr, r.stderr


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if ".git" not in p.parts}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["stdin", "body-file"])
def test_exchange_send_refuses_an_endless_body_and_writes_nothing(tmp_path: Path, how: str) -> None:
    ex = create_exchange(tmp_path / "x", ["claude", "olu"], git=False)
    before = _files(ex.root)
    args = ["--root", str(ex.root), "exchange", "send", "--topic", "zeros", "--action", "fyi"]
    args += ["-"] if how == "stdin" else ["--body-file", "/dev/zero"]
    r = mailslot_on_zeros(*args, cwd=tmp_path)
    _refused(r, 256 * 1024)
    assert _files(ex.root) == before  # no entry, no topic folder


@pytest.mark.timeout(300)
def test_dispatch_and_closeout_refuse_an_endless_brief(tmp_path: Path) -> None:
    ex = create_exchange(tmp_path / "x", ["claude", "olu"], git=False)
    before = _files(ex.root)
    r = mailslot_on_zeros(
        "exchange", "dispatch", "--to-root", str(ex.root), "--topic", "zeros", "-", cwd=tmp_path
    )
    _refused(r, 256 * 1024)
    r = mailslot_on_zeros("exchange", "closeout", "zeros-20261129-181400", "-", cwd=tmp_path)
    _refused(r, 256 * 1024)
    assert _files(ex.root) == before


@pytest.mark.timeout(300)
def test_chat_say_refuses_an_endless_message(tmp_path: Path) -> None:
    chat = Path(new_chat("zeros", tmp_path, "claude").path)
    size = chat.stat().st_size
    r = mailslot_on_zeros("chat", "say", str(chat), "-", cwd=tmp_path)
    _refused(r, 64 * 1024)
    assert chat.stat().st_size == size


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("args", "limit"),
    [
        (("log", "append", "-"), 4 * 1000 + 2),
        (("peer", "send", "beacon", "-"), 32 * 1024),
        (("relay", "ask", "--to", "manager", "-"), 4 * 1000 + 1024),
        (("relay", "reply", "--id", "C01", "-"), 4 * 1000 + 1024),
        (("relay", "note", "-"), 4 * 16 * 1024 + 1024),
    ],
)
def test_other_commands_refuse_an_endless_text(
    tmp_path: Path, args: tuple[str, ...], limit: int
) -> None:
    r = mailslot_on_zeros("--root", str(tmp_path), *args, cwd=tmp_path)
    _refused(r, limit)
    assert list(tmp_path.iterdir()) == []

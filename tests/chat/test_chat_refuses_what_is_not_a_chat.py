"""A path that is not a chat is refused at once, never appended to, blocked on or read whole.

A mistyped path is never appended to: only a chat file (empty, or starting with a block) is one.
A path someone else may have planted, a FIFO or a huge file named like a chat, is refused by
``read``, ``status`` and ``wait`` with a clear error (a FIFO never blocks them; a file over the
read limit is never read whole, and the error names the limit). A path that never was a chat is
not found.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.cli import cli
from mailslot.core.fsio import READ_FROM_MAX


@pytest.mark.parametrize(
    "command", [["say", "hi"], ["join"], ["status"], ["read"], ["wait", "--timeout", "0"]]
)
def test_commands_refuse_a_file_that_is_not_a_chat(tmp_path: Path, command: list[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello world\n")
    verb, *rest = command
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", verb, str(notes), *rest])
    assert r.exit_code == 1, r.output
    assert "not a chat file" in r.stderr
    assert notes.read_text() == "hello world\n"


def test_an_empty_file_is_a_chat_to_join(tmp_path: Path) -> None:
    chat = tmp_path / "chat-2026-11-30-000000.txt"
    chat.touch()  # a hand-run creator touches the file before writing its opening message
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "say", str(chat), "hello"])
    assert r.exit_code == 0, r.stderr
    assert "---MSG---" in chat.read_text()


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


WRITES = [("say", "hi", "--as", "alice"), ("join", "--as", "bob")]


@pytest.mark.parametrize("command", WRITES, ids=[c[0] for c in WRITES])
def test_a_write_to_a_fifo_says_what_is_there(
    tmp_path: Path, run_cli, command: tuple[str, ...]
) -> None:
    fifo = tmp_path / "chat-2026-11-29-181400.txt"
    os.mkfifo(fifo)
    err = _refused(run_cli, fifo, command)
    assert f"{fifo}: not a chat file: it is a FIFO (named pipe)" in err, err
    assert "removed" not in err and not os.path.exists(f"{fifo}.lock")


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_huge_file_named_like_a_chat_is_refused_naming_the_limit(
    tmp_path: Path, run_cli, command: tuple[str, ...]
) -> None:
    huge = tmp_path / "chat-2026-11-29-181400.txt"
    with huge.open("wb") as f:
        f.write(b"---MSG---\nFROM: alice\nTIME: 2026-11-29T18:14:00Z\n---\nhi\n")
        f.truncate(3 << 30)  # sparse: 3 GB that cost nothing
    assert f"at most {READ_FROM_MAX} bytes" in _refused(run_cli, huge, command)


def test_wait_on_a_path_that_never_was_a_chat_is_not_found(tmp_path: Path, run_cli) -> None:
    never = tmp_path / "chat-2026-01-01-000000.txt"
    r = run_cli("chat", "wait", str(never), "--as", "bob", "--timeout", "1")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("mailslot: error:") and "no such chat file" in r.stderr
    for cmd in (["say", str(never), "hi"], ["join", str(never)]):  # the same answer as these
        other = run_cli("chat", *cmd, "--as", "bob")
        assert other.returncode == 1 and "no such chat file" in other.stderr
    r = run_cli("chat", "new", "t", "--dir", str(tmp_path), "--as", "alice")
    path = Path(r.stdout.splitlines()[0])
    path.unlink()  # a chat alice knew, then removed: gone, not a wrong path
    r = run_cli("chat", "wait", str(path), "--as", "alice", "--timeout", "1")
    assert r.returncode == 4 and r.stderr.startswith("mailslot: gone:")

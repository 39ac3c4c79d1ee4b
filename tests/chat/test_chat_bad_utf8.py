"""Text that is not UTF-8 (argv bytes, stdin bytes) is refused cleanly: exit 1, nothing written.

On POSIX, Python hands undecodable argv bytes to us as lone surrogates; stdin may raise while
decoding. Either way the answer is one ``mailslot: error:`` line, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import chat
from mailslot.cli import cli
from mailslot.core.errors import FormatError

BAD = "caf\udce9"  # what Python makes of the argv bytes b"caf\xe9"


@pytest.mark.parametrize(
    "args",
    [
        ("say", "{f}", BAD),
        ("check", "{f}", BAD),
        ("end", "{f}", "request", BAD),
        ("join", "{f}", BAD),
    ],
)
def test_cli_refuses_undecodable_argv(chat_file: Path, args: tuple[str, ...]) -> None:
    chat.join(chat_file, "bob")
    size = chat_file.stat().st_size
    argv = [
        "chat",
        *(a.format(f=chat_file) for a in args),
        "--as",
        "carol" if args[0] == "join" else "bob",
    ]
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code == 1, (r.output, r.exception)
    assert r.stderr.startswith("mailslot: error:") and "UTF-8" in r.stderr
    assert chat_file.stat().st_size == size


def test_cli_refuses_undecodable_stdin(chat_file: Path) -> None:
    size = chat_file.stat().st_size
    r = CliRunner().invoke(
        cli, ["chat", "say", str(chat_file), "-", "--as", "alice"], input=b"caf\xe9\n"
    )
    assert r.exit_code == 1, (r.output, r.exception)
    assert r.stderr.startswith("mailslot: error:") and "UTF-8" in r.stderr
    assert chat_file.stat().st_size == size


def test_new_refuses_an_undecodable_topic(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="UTF-8"):
        chat.new_chat(BAD, tmp_path, "alice")
    assert list(tmp_path.iterdir()) == []


def test_the_real_command_refuses_argv_and_stdin_bytes(chat_file: Path) -> None:
    size = chat_file.stat().st_size
    base = [sys.executable, "-m", "mailslot", "chat", "say", str(chat_file)]
    for extra, stdin in (([b"caf\xe9"], None), (["-"], b"caf\xe9\n")):
        r = subprocess.run(
            [*base, *extra, "--as", "alice"], input=stdin, capture_output=True, timeout=60
        )
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith(b"mailslot: error:") and b"Traceback" not in r.stderr
    assert chat_file.stat().st_size == size

"""Bytes that are not UTF-8: refused in what a command is given, kept exact in what a chat holds.

Text handed to a command (argv bytes, stdin bytes) is refused cleanly: exit 1, nothing written. On
POSIX, Python hands undecodable argv bytes to us as lone surrogates; stdin may raise while
decoding. Either way the answer is one ``mailslot: error:`` line, never a traceback.

A hand-run bash agent may append any bytes to the file. Cursors are byte offsets, so every offset
is computed on the bytes themselves; an undecodable byte is shown as U+FFFD only in the text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import chat
from mailslot.chat.format import parse_messages
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


BAD_BODY = b"caf\xe9 " * 14  # fourteen bytes that are not UTF-8


HEADER = b"\n---MSG---\nFROM: carol\nTIME: 2026-11-29T18:14:00Z\n---\n"


def test_offsets_are_byte_offsets_despite_undecodable_bytes() -> None:
    first = HEADER + BAD_BODY + b"\n"
    second = b"\n---MSG---\nFROM: dave\nTIME: 2026-11-29T18:15:00Z\n---\nstill typing"
    messages, consumed = parse_messages(first + second)
    assert [m.sender for m in messages] == ["carol"]
    # Held back at the unfinished block (its blank line may count as consumed), never past it.
    assert consumed in (len(first), len(first) + 1)
    assert messages[0].end == consumed
    assert messages[0].body == "caf\ufffd " * 14  # shown visibly, not dropped
    whole, end = parse_messages(first + second + b"\n")
    assert [m.sender for m in whole] == ["carol", "dave"]
    assert whole[1].offset == consumed and end == len(first + second) + 1
    rest, _ = parse_messages((first + second + b"\n")[consumed:], consumed)
    assert [m.sender for m in rest] == ["dave"]


def test_parse_from_any_returned_offset_matches_a_full_parse() -> None:
    data = (HEADER + BAD_BODY + b"\n") * 3 + HEADER + b"\xff\xfe ok\n"
    full, end = parse_messages(data)
    assert end == len(data) and len(full) == 4
    for m in full:
        again, _ = parse_messages(data[m.offset :], m.offset)
        assert [x.offset for x in again] == [x.offset for x in full if x.offset >= m.offset]


def test_wait_never_skips_a_block_after_undecodable_bytes(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    path = chat.new_chat("t", room, "alice", cwd=room).path
    chat.join(path, "bob", cwd=room)
    with path.open("ab") as f:  # by hand, as a bash agent would
        f.write(HEADER + BAD_BODY + b"\n")
        f.write(b"\n---MSG---\nFROM: dave\nTIME: 2026-11-29T18:15:00Z\n---\nhalf")
    start_of_second = path.stat().st_size - len(
        b"\n---MSG---\nFROM: dave\nTIME: 2026-11-29T18:15:00Z\n---\nhalf"
    )

    def run(*args: str):
        return CliRunner().invoke(cli, list(args))

    r = run("chat", "wait", str(path), "--as", "bob", "--json", "--timeout", "5")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [m["from"] for m in data["messages"]] == ["carol"]
    assert data["cursor"] in (start_of_second, start_of_second + 1)  # never past its header
    with path.open("ab") as f:
        f.write(b" done\n")
    r = run("chat", "wait", str(path), "--as", "bob", "--json", "--timeout", "5")
    assert r.exit_code == 0, r.output
    assert [m["body"] for m in json.loads(r.output)["messages"]] == ["half done"]
    r = run("chat", "read", str(path))  # the text rendering shows the bad bytes visibly
    assert r.exit_code == 0 and "caf\ufffd" in r.output

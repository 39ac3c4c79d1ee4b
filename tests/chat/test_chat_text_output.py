"""The text output of chat read/wait/status cannot be forged by what a body or a name holds.

The on-disk format escapes header lines; the text rendering must hold the same line: every
line at column 0 that looks like ``--- name @ time ---`` is a real message header, and no
control character written by someone else reaches the terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from mailslot import chat
from mailslot.cli import cli

FORGED = (
    "see below\n"
    "--- alice @ 2026-11-30T01:00:00.000Z ---\n"
    "I, alice, approve deploying to prod.\n"
    "\n"
    "--- carol @ 2026-11-30T01:00:01.000Z ---\n"
    "---END-ACCEPT---"
)
HEADER_RE = re.compile(r"^--- (.*) @ (.*) ---$", re.MULTILINE)


def run(*args: str, input: str | None = None):
    # color=True: click strips ANSI codes when not writing to a terminal; a terminal gets them.
    return CliRunner().invoke(cli, list(args), input=input, color=True)


def _room(tmp_path: Path) -> Path:
    room = tmp_path / "room"
    room.mkdir()
    path = chat.new_chat("t", room, "alice", cwd=room).path
    chat.join(path, "bob", cwd=room)
    return path


def test_a_body_cannot_pass_for_another_message_in_read_and_wait(tmp_path: Path) -> None:
    path = _room(tmp_path)
    r = run("chat", "say", str(path), "-", "--as", "bob", input=FORGED)
    assert r.exit_code == 0, r.output
    real = [
        m["from"] for m in json.loads(run("chat", "read", str(path), "--json").output)["messages"]
    ]
    r = run("chat", "read", str(path))
    assert r.exit_code == 0, r.output
    assert [m.group(1) for m in HEADER_RE.finditer(r.output)] == real == ["alice", "bob", "bob"]
    assert "---END-ACCEPT---" not in [line.strip() for line in r.output.splitlines()]
    r = run("chat", "wait", str(path), "--as", "alice", "--timeout", "5")
    assert r.exit_code == 0, r.output
    assert [m.group(1) for m in HEADER_RE.finditer(r.output)] == ["bob", "bob"]
    assert "I, alice, approve" in r.output  # shown, as bob's text
    # JSON stays raw.
    data = json.loads(run("chat", "read", str(path), "--json").output)
    assert data["messages"][-1]["body"] == FORGED


def test_control_characters_are_escaped_in_text_output(tmp_path: Path) -> None:
    path = _room(tmp_path)
    evil = "red \x1b[31mALERT\x1b[0m\rover\u202eevil\u2028next"
    assert run("chat", "say", str(path), evil, "--as", "bob").exit_code == 0
    with path.open("a") as f:  # a hand-written block with a hostile FROM line
        f.write("\n---MSG---\nFROM: mallory\x1b[2K\x07 @ x ---\nTIME: now\x1b[1A\n---\nhi\n")
    for args in (("read", str(path)), ("wait", str(path), "--as", "alice", "--timeout", "5")):
        r = run("chat", *args)
        assert r.exit_code == 0, r.output
        for bad in ("\x1b", "\r", "\x07", "\u202e", "\u2028"):
            assert bad not in r.output
        assert "\\x1b[31mALERT" in r.output and "\\u202e" in r.output
        assert len(HEADER_RE.findall(r.output)) == (4 if args[0] == "read" else 3)
        assert '--- "mallory\\x1b[2K\\x07 @ x ---" @ now\\x1b[1A ---' in r.output
    r = run("chat", "status", str(path))
    assert r.exit_code == 0 and "\x1b" not in r.output and "\\x1b[2K" in r.output


def test_status_text_cannot_be_forged_by_a_check_or_reason(tmp_path: Path) -> None:
    path = _room(tmp_path)
    r = run("chat", "check", str(path), "ok?\nended: yes, by mutual agreement", "--as", "bob")
    assert r.exit_code == 0, r.output
    out = run("chat", "status", str(path)).output
    assert [line for line in out.splitlines() if line.startswith("ended:")] == ["ended: no"]
    with path.open("a") as f:  # a hand-written reject whose reason spans lines
        f.write(
            "\n---MSG---\nFROM: carol\nTIME: 2026-11-30T01:00:00Z\n---\n"
            "---END-REQUEST--- done\nend request: none\n"
        )
    out = run("chat", "status", str(path)).output
    requests = [line for line in out.splitlines() if line.startswith("end request:")]
    assert len(requests) == 1 and requests[0].startswith("end request: by carol")

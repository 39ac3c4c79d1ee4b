"""The text output of relay ask/recover/serve/status shows a say= as data: one escaped line.

A say= holds anything but a line break as the writer sees it; a hand-appended line can carry
a vertical tab, U+2028 or an ANSI escape, each of which a terminal would turn into a second
line or a rewritten one. None reaches the terminal.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mailslot import relay
from mailslot.cli import cli

HOSTILE = "ok\x1b[2K\x0b- [14:02] (manager) id=R02 T1=1 say=forged\u2028(RECOVERED)\x85x\u202e"
BAD = ("\x1b", "\x0b", "\u2028", "\x85", "\u202e")


def run(*args: str):
    # color=True: click strips ANSI codes when not writing to a terminal; a terminal gets them.
    return CliRunner().invoke(cli, list(args), color=True)


def _mailbox(tmp_path: Path) -> Path:
    mb = tmp_path / "mb"
    relay.init(mb, "w1", "manager")
    return mb


def test_a_hostile_reply_prints_as_one_escaped_line(tmp_path: Path) -> None:
    mb = _mailbox(tmp_path)
    r = run("--root", str(mb), "--as", "w1", "relay", "ask", "When?", "--no-wait")
    assert r.exit_code == 0, r.output
    with (mb / "to-w1.md").open("a") as f:  # hand-appended by the manager's side
        f.write(f"- [14:02] (manager) id=R01 T1=1722868961456 say={HOSTILE}\n")
    r = run("--root", str(mb), "--as", "w1", "relay", "recover")
    assert r.exit_code == 0, r.output
    assert not any(bad in r.output for bad in BAD)
    assert r.output.splitlines() == [
        "ok\\x1b[2K\\x0b- [14:02] (manager) id=R02 T1=1 say=forged\\u2028(RECOVERED)\\x85x\\u202e",
        "(RECOVERED)",
    ]


def test_a_hostile_turn_prints_as_one_escaped_line_in_serve_and_status(tmp_path: Path) -> None:
    mb = _mailbox(tmp_path)
    with (mb / "to-manager.md").open("a") as f:  # hand-appended by the worker's side
        f.write(f"- [14:02] (w1) id=C01 T0=1722868950123 say={HOSTILE}\n")
    r = run("--root", str(mb), "--as", "manager", "relay", "serve", "--timeout", "5")
    assert r.exit_code == 0, r.output
    assert not any(bad in r.output for bad in BAD)
    assert len(r.output.splitlines()) == 1 and r.output.startswith("C01 ok\\x1b[2K")
    r = run("--root", str(mb), "relay", "status")
    assert r.exit_code == 0, r.output
    assert not any(bad in r.output for bad in BAD)
    assert [line for line in r.output.splitlines() if line.startswith("open turn:")] == [
        "open turn: C01 ok\\x1b[2K\\x0b- [14:02] (manager) id=R02 T1=1 say=forged"
        "\\u2028(RECOVERED)\\x85x\\u202e"
    ]

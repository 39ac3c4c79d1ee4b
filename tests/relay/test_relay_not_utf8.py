"""Relay text that is not UTF-8 is never taken as a turn: argv or stdin bytes are refused (exit 1,
nothing written), and a hand-written inbox line holding such bytes is reported as unreadable
(file, line number, why), never delivered with replacement characters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import relay
from mailslot.cli import cli
from mailslot.core.errors import WaitTimeout
from mailslot.relay.lines import Unreadable

BAD = "caf\udce9"  # what Python makes of the argv bytes b"caf\xe9"


@pytest.fixture
def mb(mb: Path) -> Path:
    """The mailbox with w1's question open, so the manager has a turn to reply to."""
    relay.ask(mb, "w1", "when?", wait=False)
    return mb


def _files(mb: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(mb.rglob("*.md"))]


@pytest.mark.parametrize(
    "argv",
    [
        ["--as", "manager", "relay", "reply", "--id", "C01", BAD],
        ["--as", "manager", "relay", "post", f"- [14:02] (manager) id=R01 T1=5 say={BAD}"],
        ["--as", "manager", "relay", "note", BAD],
        ["--as", "manager", "relay", "stop", BAD],
    ],
)
def test_cli_refuses_undecodable_argv(mb: Path, argv: list[str]) -> None:
    before = _files(mb)
    r = CliRunner().invoke(cli, ["--root", str(mb), *argv])
    assert r.exit_code == 1, (r.output, r.exception)
    assert r.stderr.startswith("mailslot: error:") and "UTF-8" in r.stderr
    assert _files(mb) == before


def test_cli_refuses_undecodable_stdin(mb: Path) -> None:
    before = _files(mb)
    argv = ["--root", str(mb), "--as", "manager", "relay", "reply", "--id", "C01", "-"]
    r = CliRunner().invoke(cli, argv, input=b"caf\xe9\n")
    assert r.exit_code == 1, (r.output, r.exception)
    assert r.stderr.startswith("mailslot: error:") and "UTF-8" in r.stderr
    assert _files(mb) == before


def test_the_real_command_refuses_argv_and_stdin_bytes(mb: Path) -> None:
    before = _files(mb)
    base = [sys.executable, "-m", "mailslot", "--root", str(mb), "--as", "manager", "relay"]
    for extra, stdin in (([b"caf\xe9"], None), (["-"], b"caf\xe9\n")):
        for cmd in (["reply", "--id", "C01"], ["note"]):
            r = subprocess.run([*base, *cmd, *extra], input=stdin, capture_output=True, timeout=60)
            assert r.returncode == 1, r.stderr
            assert r.stderr.startswith(b"mailslot: error:") and b"Traceback" not in r.stderr
    assert _files(mb) == before


def test_a_hand_written_turn_with_bytes_that_are_not_utf8_is_reported_not_served(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mb"
    relay.init(root, "w1", "manager")
    with (root / "to-manager.md").open("ab") as f:  # a Latin-1 editor's "café"
        f.write(b"- [14:02] (w1) id=C01 T0=1722868950123 say=caf\xe9 at noon?\n")
    heard: list[Unreadable] = []
    with pytest.raises(WaitTimeout):
        relay.serve(root, "manager", timeout=0.3, on_unreadable=heard.append)
    (bad,) = heard
    assert (bad.file, bad.line) == ("to-manager.md", 1)
    assert "not valid UTF-8" in bad.reason and "0xe9" in bad.reason
    assert relay.status(root)["open_turn"] is None


def test_a_reply_with_bytes_that_are_not_utf8_is_not_delivered(mb: Path) -> None:
    with (mb / "to-w1.md").open("ab") as f:
        f.write(b"- [14:02] (manager) id=R01 T1=1722868961456 say=Fri\xffday.\n")
    heard: list[Unreadable] = []
    with pytest.raises(WaitTimeout):
        relay.recover(mb, "w1", timeout=0.3, on_unreadable=heard.append)
    assert [(u.file, u.line) for u in heard] == [("to-w1.md", 1)]
    assert "not valid UTF-8" in heard[0].reason

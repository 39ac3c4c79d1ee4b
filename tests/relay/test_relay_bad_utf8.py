"""Relay text that is not UTF-8 (argv or stdin bytes) is refused: exit 1, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import relay
from mailslot.cli import cli

BAD = "caf\udce9"  # what Python makes of the argv bytes b"caf\xe9"


@pytest.fixture
def mb(tmp_path: Path) -> Path:
    root = tmp_path / "mb"
    relay.init(root, "w1", "manager")
    relay.ask(root, "w1", "when?", wait=False)
    return root


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

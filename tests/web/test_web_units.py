"""``peer install`` / ``board install``: hardened units, checked with systemd-analyze if present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.cli import cli

HARDENING = [
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "CapabilityBoundingSet=",
    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
    "SystemCallFilter=@system-service",
]


def _directives(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def _verify(unit: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return
    r = subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    # User= names a user that does not exist on the test machine; everything else must be clean.
    problems = [
        line
        for line in (r.stderr + r.stdout).splitlines()
        if line.strip()
        and "user" not in line.lower()
        and "group" not in line.lower()
        and "Failed to prepare filename" not in line
        and "not executable" not in line.lower()
        and "No such file" not in line
    ]
    assert not problems, r.stderr


def test_peer_install_dry_run(tmp_path: Path) -> None:
    inbox, peers = tmp_path / "srv" / "inbox", tmp_path / "etc" / "peers.json"
    r = CliRunner().invoke(
        cli,
        [
            "peer",
            "install",
            "--bind",
            "100.64.0.7:8790",
            "--inbox",
            str(inbox),
            "--peers",
            str(peers),
            "--dry-run",
        ],
    )
    assert r.exit_code == 0, r.output
    text = r.stdout
    for line in HARDENING:
        assert line in text.splitlines(), line
    assert _directives(text, "ReadWritePaths") == [str(inbox)]
    assert _directives(text, "User") == ["mailslot"]
    assert "IPAddressDeny=any" in text
    [exec_start] = _directives(text, "ExecStart")
    assert "peer serve --bind 100.64.0.7:8790" in exec_start and str(inbox) in exec_start
    assert not list(tmp_path.rglob("*.service"))
    unit = tmp_path / "mailslot-peer.service"
    unit.write_text(text)
    _verify(unit)


def test_peer_install_refuses_public_bind_and_writes_when_asked(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["peer", "install", "--bind", "0.0.0.0:8790", "--dry-run"])
    assert r.exit_code == 1 and "refusing to listen" in r.stderr
    r = CliRunner().invoke(
        cli,
        [
            "peer",
            "install",
            "--bind",
            "127.0.0.1:8790",
            "--unit-dir",
            str(tmp_path),
            "--inbox",
            str(tmp_path / "inbox"),
        ],
    )
    assert r.exit_code == 0, r.output
    written = tmp_path / "mailslot-peer.service"
    assert "ProtectSystem=strict" in written.read_text()


def test_board_install_dry_run(tmp_path: Path) -> None:
    db = tmp_path / "board dir" / "agora.db"
    r = CliRunner().invoke(
        cli,
        [
            "board",
            "install",
            "--bind",
            "127.0.0.1:8080",
            "--db",
            str(db),
            "--trust-proxy",
            "127.0.0.1",
            "--dry-run",
            "--user",
            "agora",
        ],
    )
    assert r.exit_code == 0, r.output
    text = r.stdout
    for line in HARDENING:
        assert line in text.splitlines(), line
    # SQLite writes -wal/-shm beside the database: its directory, and nothing else.
    assert _directives(text, "ReadWritePaths") == [f'"{db.parent}"']
    assert "--trust-proxy 127.0.0.1" in _directives(text, "ExecStart")[0]
    unit = tmp_path / "mailslot-board.service"
    unit.write_text(text)
    _verify(unit)


@pytest.mark.parametrize("bad", ['/tmp/x"y', "/tmp/a\\b"])
def test_paths_a_unit_cannot_hold_are_refused(bad: str) -> None:
    r = CliRunner().invoke(
        cli, ["board", "install", "--bind", "127.0.0.1:8080", "--db", bad, "--dry-run"]
    )
    assert r.exit_code == 1 and "systemd unit" in r.stderr

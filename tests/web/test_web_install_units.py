"""``peer install`` / ``board install``: hardened units, checked with systemd-analyze if present."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.cli import cli
from shared_helpers import unit_problems

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
    if shutil.which("systemd-analyze") is None:
        return
    # User= names a user that does not exist on the test machine; everything else must be clean.
    problems, said = unit_problems(unit)
    assert not problems, said


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


@pytest.mark.parametrize(
    ("channel", "where"),
    [
        ("peer", ["--bind", "127.0.0.1:8790", "--inbox", "/srv/mailslot/inbox"]),
        ("board", ["--bind", "127.0.0.1:8080", "--db", "/srv/mailslot/board/agora.db"]),
    ],
)
def test_install_puts_the_server_limits_it_is_given_into_exec_start(
    tmp_path: Path, channel: str, where: list[str]
) -> None:
    limits = ["--header-timeout", "2.5", "--body-timeout", "12", "--max-connections", "64"]
    (tmp_path / "custom").mkdir()
    (tmp_path / "default").mkdir()
    r = CliRunner().invoke(
        cli, [channel, "install", *where, *limits, "--unit-dir", str(tmp_path / "custom")]
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        cli, [channel, "install", *where, "--unit-dir", str(tmp_path / "default")]
    )
    assert r.exit_code == 0, r.output
    name = f"mailslot-{channel}.service"
    [custom] = _directives((tmp_path / "custom" / name).read_text(), "ExecStart")
    [default] = _directives((tmp_path / "default" / name).read_text(), "ExecStart")
    argv = shlex.split(custom)
    assert argv[1:5] == ["-m", "mailslot", channel, "serve"]
    # The unit's command line is one the serve command takes, with the values asked for.
    from mailslot.cli import web

    serve = getattr(web, channel).commands["serve"]
    params = serve.make_context("serve", argv[5:]).params
    assert (params["header_timeout"], params["body_timeout"], params["max_connections"]) == (
        2.5,
        12.0,
        64,
    )
    # Defaults stay implicit: the serve command's own defaults apply.
    assert not any(flag in shlex.split(default) for flag in limits[::2])
    _verify(tmp_path / "custom" / name)


@pytest.mark.parametrize("value", ["nan", "inf"])
@pytest.mark.parametrize("flag", ["--header-timeout", "--body-timeout"])
@pytest.mark.parametrize("command", ["serve", "install"])
def test_a_deadline_that_never_comes_is_a_usage_error(command: str, flag: str, value: str) -> None:
    """A NaN or infinite timeout would let a slow client hold a connection for ever."""
    # A public bind: were the value taken, serve and install would refuse the bind instead.
    args = ["peer", command, "--bind", "0.0.0.0:8790", flag, value]
    r = CliRunner().invoke(cli, args + (["--dry-run"] if command == "install" else []))
    assert r.exit_code == 2, r.output
    assert "finite" in r.output

"""systemd units: one hardening set in every unit mailslot writes, values that cannot inject.

Each unit is rendered by the real install code and checked with the real ``systemd-analyze
verify`` where it is installed.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from mailslot.core.errors import FormatError
from mailslot.core.units import hardening, service_unit, unit_arg, write_unit
from mailslot.exchange.create import create_exchange
from mailslot.exchange.install import plan_install
from mailslot.web.units import board_unit, peer_unit
from shared_helpers import unit_problems

# What every unit mailslot writes carries, whoever it runs as.
EVERY_UNIT = [
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "PrivateDevices=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
    "RestrictNamespaces=yes",
    "RestrictRealtime=yes",
    "LockPersonality=yes",
    "MemoryDenyWriteExecute=yes",
    "SystemCallArchitectures=native",
    "SystemCallFilter=@system-service",
]
# What only a service that needs no privilege at all carries.
SERVER_ONLY = [
    "CapabilityBoundingSet=",
    "RestrictSUIDSGID=yes",
    "ProtectProc=invisible",
    "SystemCallFilter=~@privileged @resources",
]


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _tick_unit(tmp_path: Path) -> str:
    ex = create_exchange(tmp_path / "x", ["claude", "olu"], git=False)
    plan = plan_install(ex, user="root", command=["/usr/bin/mailslot"])
    [service] = [t for p, t in plan.units.items() if p.suffix == ".service"]
    return service


def _server_units() -> list[str]:
    return [
        peer_unit("127.0.0.1:8790", Path("/etc/mailslot/peers.json"), Path("/srv/mailslot/inbox")),
        board_unit("127.0.0.1:8080", Path("/srv/mailslot/board/agora.db")),
    ]


def test_every_install_writes_the_same_hardening(tmp_path: Path) -> None:
    for text in [_tick_unit(tmp_path), *_server_units()]:
        for line in EVERY_UNIT:
            assert line in _lines(text), line
        assert "ProtectHome=yes" in _lines(text)  # nothing of theirs lives under a home


def test_servers_drop_every_privilege_and_the_tick_keeps_what_it_needs(tmp_path: Path) -> None:
    for text in _server_units():
        for line in SERVER_ONLY:
            assert line in _lines(text), line
    tick = _tick_unit(tmp_path)
    # a root tick writes both sides' setgid folders and must see every git process
    for line in SERVER_ONLY:
        assert line not in _lines(tick), line
    assert "UMask=0007" in _lines(tick)
    assert "Type=oneshot" in _lines(tick) and "User=root" in _lines(tick)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_analyze_accepts_every_unit(tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    tool = shutil.which("systemd-analyze")
    assert tool is not None
    texts = {"mailslot-tick.service": _tick_unit(tmp_path)}
    texts.update(
        zip(("mailslot-peer.service", "mailslot-board.service"), _server_units(), strict=True)
    )
    for name, text in texts.items():
        path = write_unit(text, name, units)
        # the programs and users named do not exist on a test machine; nothing else may be wrong
        problems, said = unit_problems(path, cwd=units)
        assert not problems, (name, said)


def test_paths_under_home_or_tmp_stay_reachable() -> None:
    home = hardening([Path("/home/agents/exchange")], unprivileged=False)
    assert "ProtectHome=read-only" in home and "ReadWritePaths=/home/agents/exchange" in home
    via_python = hardening([Path("/srv/x")], reads=[Path("/root/venv/bin/python")])
    assert "ProtectHome=read-only" in via_python
    assert "PrivateTmp=no" in hardening([Path("/tmp/exchange")])  # else its writes are hidden
    assert "PrivateTmp=yes" in hardening([Path("/srv/exchange")])
    assert "PrivateTmp=yes" in hardening([Path("/tmp/inbox")], private_tmp=True)


@pytest.mark.parametrize(
    "bad", ["/srv/x\n[Service]\nExecStartPre=/bin/sh", '/srv/"x"', "/srv/a\\b", "/srv/x\rY"]
)
def test_a_value_that_could_inject_is_refused(bad: str) -> None:
    with pytest.raises(FormatError, match="systemd unit"):
        unit_arg(bad)
    with pytest.raises(FormatError):
        service_unit("d", ["/usr/bin/mailslot", bad], hardening([Path("/srv")]))
    with pytest.raises(FormatError):
        hardening([Path(bad)])


def test_specifiers_are_escaped_and_spaces_quoted() -> None:
    assert unit_arg("/srv/100%/$HOME") == "/srv/100%%/$$HOME"
    assert unit_arg("/srv/board dir/agora.db") == '"/srv/board dir/agora.db"'
    text = service_unit("d", ["/usr/bin/mailslot", "--db", "/srv/a b/%i"], [])
    assert 'ExecStart=/usr/bin/mailslot --db "/srv/a b/%%i"' in _lines(text)


def test_write_unit_replaces_whole_and_is_world_readable(tmp_path: Path) -> None:
    first = write_unit("[Unit]\nDescription=one\n", "a.service", tmp_path)
    write_unit("[Unit]\nDescription=two\n", "a.service", tmp_path)
    assert first.read_text() == "[Unit]\nDescription=two\n"
    assert stat.S_IMODE(first.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.service"]  # no temp left behind

"""install: the dry-run units are valid systemd units, hardened, and nothing is written."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from exhelp import run

from mailslot.core.errors import InvalidName
from mailslot.exchange.install import parse_every, plan_install, verify_units


def _plan(ex, tmp_path: Path, *extra: str) -> dict:
    units = tmp_path / "units"
    r = run(ex.root, "exchange", "install", "--unit-dir", str(units), "--json", *extra)
    return json.loads(r.stdout)


def test_dry_run_is_a_valid_hardened_unit_and_writes_nothing(ex, tmp_path) -> None:
    d = _plan(ex, tmp_path, "--dry-run", "--every", "2min", "--user", "root")
    assert not (tmp_path / "units").exists() and d["written"] == []
    (service, svc_text), (timer, tmr_text) = sorted(d["units"].items())
    assert service.endswith(".service") and timer.endswith(".timer")
    for line in (
        "ProtectSystem=strict",
        f"ReadWritePaths={ex.root}",
        "NoNewPrivileges=yes",
        "User=root",
        "Type=oneshot",
    ):
        assert line in svc_text.splitlines(), line
    assert f"--root {ex.root} exchange tick" in svc_text
    assert "OnUnitActiveSec=120s" in tmr_text and "WantedBy=timers.target" in tmr_text
    assert d["verify"] is None  # systemd-analyze found nothing to complain about
    assert "exchange monitor --action required" in d["monitor"]["olu"]
    assert "--as olu" in d["monitor"]["olu"]
    assert d["cron"].startswith("*/2 * * * * root ") and "exchange tick" in d["cron"]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_dry_run_text(ex, tmp_path) -> None:
    out = run(ex.root, "exchange", "install", "--dry-run", "--unit-dir", str(tmp_path)).stdout
    # split the plain text output back into files, the way a person would copy it
    files: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if line.startswith("# --- ") and line.endswith(" ---"):
            current = Path(line[6:-4]).name
            files[current] = []
        elif line.startswith("# "):
            current = None
        elif current is not None:
            files[current].append(line)
    assert len(files) == 2
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / n) for n in files)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_verify_catches_a_broken_unit(tmp_path) -> None:
    bad = {Path("x.service"): "[Service]\nExecStart=relative/path\nProtectSystem=bogus\n"}
    assert verify_units(bad) is not None


def test_install_writes_the_units(ex, tmp_path) -> None:
    d = _plan(ex, tmp_path, "--name", "lab")
    written = sorted(Path(p).name for p in d["written"])
    assert written == ["mailslot-exchange-lab.service", "mailslot-exchange-lab.timer"]
    assert (tmp_path / "units" / written[0]).read_text() == d["units"][d["written"][0]]


def test_tmp_root_turns_private_tmp_off(ex) -> None:
    plan = plan_install(ex)
    text = next(t for p, t in plan.units.items() if p.suffix == ".service")
    under_tmp = str(ex.root).startswith(("/tmp/", "/var/tmp/"))
    assert ("PrivateTmp=no" in text) == under_tmp


def test_bad_interval_and_unsafe_root_are_refused(ex, tmp_path) -> None:
    for bad in ("2 weeks", "0min", "5s", "-1min", "2min; rm -rf /"):
        with pytest.raises(InvalidName):
            parse_every(bad)
    assert parse_every("90s") == 90 and parse_every("1h") == 3600
    r = run(ex.root, "exchange", "install", "--dry-run", "--every", "soon", ok=False)
    assert r.exit_code == 1 and "interval" in r.stderr
    from mailslot.exchange.create import create_exchange

    for user in ("root; rm -rf /", "Root", "a" * 40):
        with pytest.raises(InvalidName):
            plan_install(ex, user=user)
    assert "User=svc.olu" in next(iter(plan_install(ex, user="svc.olu").units.values()))
    odd = create_exchange(tmp_path / "with space", ["claude", "olu"], git=False)
    with pytest.raises(InvalidName):
        plan_install(odd)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_install_refuses_to_write_units_verify_objects_to(ex, tmp_path) -> None:
    from mailslot.core.errors import MailslotError
    from mailslot.exchange.install import install

    units = tmp_path / "units"
    with pytest.raises(MailslotError, match="systemd-analyze verify objects"):
        install(ex, unit_dir=units, command=["/nonexistent/bin/mailslot"])
    assert not units.exists()
    plan = install(ex, unit_dir=units, command=["/nonexistent/bin/mailslot"], dry_run=True)
    assert plan.verify and "/nonexistent/bin/mailslot" in plan.verify

"""``exchange install``: a hardened systemd service + timer for ``tick``, and the polling lines.

The tick is typically root-owned and runs every two minutes; it only ever needs to write the
exchange, so its unit carries the sandbox every mailslot unit has (``core.units``):
``ProtectSystem=strict`` and ``ReadWritePaths=`` the root and nothing else, ``NoNewPrivileges``,
private devices (and /tmp, unless the exchange lives under it), the kernel knobs locked. It keeps
the capabilities a root tick needs to write both sides' folders. The timer is monotonic
(``OnActiveSec`` + ``OnUnitActiveSec``) so it starts firing as soon as it is enabled and keeps
firing after a failed run -- and the tick's heartbeat (``doctor``, ``monitor``) makes a timer that
stopped firing visible anyway.

Alongside it go the lines a host needs for the agents: the monitor-script command for
Hermes-style schedulers (``monitor`` is stable and writes nothing, so the scheduler's own diff is
the only memory) and a cron fallback for hosts without systemd. ``dry_run`` renders everything and
writes nothing; ``verify_units`` runs ``systemd-analyze verify`` where it exists.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailslot.core.command import run_command
from mailslot.core.errors import CommandFailed, InvalidName
from mailslot.core.names import validate_agent
from mailslot.core.units import UNIT_DIR, hardening, render_unit, service_unit, write_unit
from mailslot.exchange.layout import Exchange

__all__ = [
    "SYSTEM_UNIT_DIR",
    "InstallPlan",
    "apply_plan",
    "install",
    "parse_every",
    "plan_install",
    "verify_units",
]

SYSTEM_UNIT_DIR = UNIT_DIR
# A path systemd and cron take literally: no spaces, quotes, %-specifiers or shell characters.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9/._@+-]*$")
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
_WORD = re.compile(r"^[A-Za-z0-9._@+-]+$")
_EVERY = re.compile(r"^([0-9]+)\s*(s|sec|m|min|h|hr)$")
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}


def parse_every(every: str) -> int:
    """Seconds in an interval like ``2min``, ``90s``, ``1h``; ``InvalidName`` otherwise."""
    m = _EVERY.fullmatch(every.strip())
    if not m or int(m.group(1)) == 0:
        raise InvalidName("interval", every, "a number and s, min or h, e.g. 2min")
    seconds = int(m.group(1)) * _UNITS[m.group(2)]
    if seconds < 10:
        raise InvalidName("interval", every, "at least 10s (a tick is a batch, not a loop)")
    return seconds


def _safe(path: str, what: str) -> str:
    if not _SAFE_PATH.fullmatch(path):
        raise InvalidName(what, path, "an absolute path of letters, digits and / . _ @ + -")
    return path


def _mailslot_command() -> list[str]:
    found = shutil.which("mailslot")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "mailslot"]


@dataclass
class InstallPlan:
    """What install writes (unit path -> text) and the lines it prints for the agents."""

    name: str
    units: dict[Path, str]
    monitor_lines: dict[str, str]
    cron_line: str
    commands: list[str]
    written: list[Path] = field(default_factory=list)
    verify: str | None = None  # systemd-analyze verify's complaint, if any

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "units": {str(p): t for p, t in self.units.items()},
            "monitor": self.monitor_lines,
            "cron": self.cron_line,
            "commands": self.commands,
            "written": [str(p) for p in self.written],
            "verify": self.verify,
        }


def plan_install(
    ex: Exchange,
    *,
    user: str | None = None,
    every: str = "2min",
    unit_dir: Path = SYSTEM_UNIT_DIR,
    name: str | None = None,
    command: list[str] | None = None,
) -> InstallPlan:
    """Render the service, timer and lines for ``ex``; ``InvalidName`` for unsafe input."""
    seconds = parse_every(every)
    root = _safe(str(ex.root), "exchange root")
    cmd = command or _mailslot_command()
    _safe(cmd[0], "mailslot command")
    for part in cmd[1:]:
        if not _WORD.fullmatch(part):
            raise InvalidName("mailslot command argument", part, "letters, digits and . _ @ + -")
    if user is not None and not _USER.fullmatch(user):
        raise InvalidName("user", user, "a Unix user name (a-z 0-9 _ . -, at most 32)")
    base = name or re.sub(r"[^a-z0-9-]+", "-", ex.root.name.lower()).strip("-") or "exchange"
    validate_agent(base, "unit name")
    unit = f"mailslot-exchange-{base}"
    argv = [*cmd, "--root", root, "exchange", "tick"]
    exec_start = " ".join(argv)
    who = [f"User={user}"] if user else []
    if ex.group and user:
        who.append(f"Group={ex.group}")
    # The tick writes the exchange and nothing else; run as root it keeps the capabilities that
    # writing both sides' folders takes (see core.units).
    sandbox = hardening([ex.root], reads=[Path(cmd[0])], unprivileged=False, umask="0007")
    service = service_unit(
        f"mailslot exchange tick for {root} (archive, HELD.md, INDEX.md, git, notify)",
        argv,
        sandbox,
        after=("local-fs.target",),
        service=["Type=oneshot", *who, "TimeoutStartSec=5min"],
        wanted_by=None,
    )
    timer = render_unit(
        [
            ("Unit", [f"Description=Run the mailslot exchange tick for {root} every {every}"]),
            (
                "Timer",
                [
                    "OnActiveSec=15s",
                    f"OnUnitActiveSec={seconds}s",
                    "AccuracySec=5s",
                    f"Unit={unit}.service",
                ],
            ),
            ("Install", ["WantedBy=timers.target"]),
        ]
    )
    mon = " ".join(cmd)
    monitor_lines = {
        side: f"{mon} --root {root} --as {side} exchange monitor --action required"
        for side in ex.sides
    }
    minutes = max(1, seconds // 60)
    cron_user = user or "root"
    cron_line = (
        f"*/{minutes} * * * * {cron_user} {exec_start} --json "
        f">/dev/null 2>>{root}/.mailslot/tick.err"
        if minutes < 60
        else f"0 */{minutes // 60} * * * {cron_user} {exec_start} --json >/dev/null"
    )
    commands = [
        "systemctl daemon-reload",
        f"systemctl enable --now {unit}.timer",
        f"systemctl list-timers {unit}.timer",
    ]
    units = {unit_dir / f"{unit}.service": service, unit_dir / f"{unit}.timer": timer}
    return InstallPlan(unit, units, monitor_lines, cron_line, commands)


def verify_units(units: dict[Path, str]) -> str | None:
    """``systemd-analyze verify`` over copies of ``units``; its complaint, ``None`` if clean.

    Returns ``None`` too when systemd-analyze is not installed (nothing to verify with).
    """
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for p, text in units.items():
            target = Path(tmp) / p.name
            target.write_text(text)
            paths.append(str(target))
        proc = run_command([tool, "verify", *paths], timeout=60, cwd=tmp, check=False)
    complaint = (proc.err + proc.out).strip()
    return complaint or (None if proc.returncode == 0 else f"exit {proc.returncode}")


def apply_plan(plan: InstallPlan, *, enable: bool = False) -> InstallPlan:
    """Write the unit files (and with ``enable`` run the systemctl commands); ``MailslotError``."""
    for path, text in plan.units.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        plan.written.append(write_unit(text, path.name, path.parent))
    if enable:
        if shutil.which("systemctl") is None:
            raise CommandFailed("systemctl", "systemctl not found; use the cron line instead")
        for c in plan.commands[:2]:
            try:
                run_command(c.split(), timeout=120)
            except CommandFailed as e:
                raise CommandFailed(e.command, f"{c} failed: {e}", result=e.result) from None
    return plan


def install(
    ex: Exchange,
    *,
    user: str | None = None,
    every: str = "2min",
    unit_dir: Path = SYSTEM_UNIT_DIR,
    name: str | None = None,
    dry_run: bool = False,
    enable: bool = False,
    verify: bool = True,
    command: list[str] | None = None,
) -> InstallPlan:
    """Render, verify and (unless ``dry_run``) write the tick's units; ``InvalidName`` for unsafe
    input, ``CommandFailed`` when ``systemd-analyze verify`` objects (nothing is written then).
    """
    plan = plan_install(ex, user=user, every=every, unit_dir=unit_dir, name=name, command=command)
    plan.verify = verify_units(plan.units) if verify else None
    if dry_run:
        return plan
    if plan.verify:
        raise CommandFailed(
            "systemd-analyze",
            f"systemd-analyze verify objects, nothing written: {plan.verify} "
            "(--dry-run shows the units; --no-verify writes them anyway)",
        )
    return apply_plan(plan, enable=enable)

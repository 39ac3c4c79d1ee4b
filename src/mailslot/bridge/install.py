"""``bridge install``: a hardened systemd service that runs ``bridge serve`` for this host.

The service runs as its own unprivileged user, in the sandbox every mailslot unit gets
(``core.units.hardening``), and may write only what the bridge writes: its own directory (config,
JetStream store, ledger, status, the server's log), each bridged exchange root (materialised
entries, STATE.md, HELD.md, INDEX.md, arrival receipts) and each bridged chat's folder (the chat
file and its ``mkdir`` lock). The nats-server it supervises is its child and inherits all of that.
``Restart=on-failure`` brings a crashed bridge back; the bridge restarts its own server.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

from mailslot.bridge.config import BridgeConfig
from mailslot.core.names import validate_agent
from mailslot.core.units import UNIT_DIR, hardening, service_unit, write_unit

__all__ = ["BridgeUnit", "install_bridge", "render_bridge_unit"]


class BridgeUnit(NamedTuple):
    """A rendered unit: its file name and text (and where it was written, once written)."""

    name: str
    text: str
    path: Path | None = None


def render_bridge_unit(config: BridgeConfig, user: str) -> BridgeUnit:
    """The unit for ``config``'s host run as ``user``; ``FormatError`` for a path a unit cannot
    hold, ``InvalidName`` for a bad user name."""
    validate_agent(user, "user name")
    writable = [config.dir, *(ex.root for ex in config.exchanges)]
    writable += sorted({c.path.parent for c in config.chats})
    python = Path(sys.executable)
    sandbox = hardening(writable, reads=[python.parent.parent])
    text = service_unit(
        f"mailslot bridge for host {config.host} (NATS JetStream)",
        [str(python), "-m", "mailslot", "bridge", "serve", "--dir", str(config.dir)],
        sandbox,
        service=[
            "Type=simple",
            f"User={user}",
            "Restart=on-failure",
            "RestartSec=2",
            "KillSignal=SIGTERM",
            "TimeoutStopSec=20",
        ],
        comments=[
            "Written by 'mailslot bridge install'. It writes only its own directory, the",
            "bridged exchanges and the bridged chats' folders.",
        ],
    )
    return BridgeUnit(f"mailslot-bridge-{config.host}.service", text)


def install_bridge(
    config: BridgeConfig, user: str, unit_dir: Path = UNIT_DIR, *, dry_run: bool = False
) -> BridgeUnit:
    """Write the unit into ``unit_dir`` (or only render it with ``dry_run``); ``OSError`` when
    the directory is not writable."""
    unit = render_bridge_unit(config, user)
    if dry_run:
        return unit
    return unit._replace(path=write_unit(unit.text, unit.name, unit_dir))

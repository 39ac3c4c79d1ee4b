"""``bridge status``: what the running bridge last wrote about itself, judged for staleness.

The running bridge rewrites ``state/status.json`` every second; a file older than
``STALE_SECONDS`` means no bridge is running (silence is not success: it says so).
"""

from __future__ import annotations

import json
import time
from typing import Any

from mailslot.bridge.config import BridgeConfig
from mailslot.bridge.run import STATUS_NAME
from mailslot.core.fsio import read_regular

__all__ = ["STALE_SECONDS", "read_status"]

STALE_SECONDS = 5.0
MAX_STATUS_BYTES = 1 << 20


def read_status(config: BridgeConfig) -> dict[str, Any]:
    """The bridge's status with ``running`` (a fresh status file) and ``age_seconds``."""
    path = config.state_dir / STATUS_NAME
    try:
        raw = read_regular(path, MAX_STATUS_BYTES)
        age = time.time() - path.stat().st_mtime
        data = json.loads(raw)
    except (OSError, ValueError):
        return {"host": config.host, "running": False, "peers": {}, "age_seconds": None}
    if not isinstance(data, dict):
        data = {}
    data["running"] = age <= STALE_SECONDS
    data["age_seconds"] = round(age, 1)
    if not data["running"]:
        for info in (data.get("peers") or {}).values():
            info["link"] = "unknown"
    return data


def render(data: dict[str, Any]) -> str:
    """The status as a few lines of text."""
    state = "running" if data.get("running") else "NOT RUNNING"
    lines = [f"host {data.get('host')}: bridge {state}"]
    for peer, info in sorted((data.get("peers") or {}).items()):
        lines.append(
            f"  peer {peer}: link {info.get('link')}, pending in {info.get('pending_in')}, "
            f"pending out {info.get('pending_out')}, last heard {info.get('last_heard') or '-'}"
        )
    for name, info in sorted((data.get("streams") or {}).items()):
        if info.get("full"):
            lines.append(f"  stream {name}: FULL, refusing new messages, {info.get('bytes')} bytes")
    err = data.get("write_error")
    if err:
        lines.append(f"  CANNOT WRITE since {err.get('since')}: {err.get('reason')}")
    lines.append(f"  conflicts {data.get('conflicts', 0)}, refused {data.get('refused', 0)}")
    for d in data.get("diverged") or []:
        lines.append(
            f"  CHANGED AFTER SENT {d.get('exchange')}:{d.get('path')}: peers keep sha256 "
            f"{str(d.get('published'))[:12]}, here {str(d.get('now'))[:12]}"
        )
    return "\n".join(lines)

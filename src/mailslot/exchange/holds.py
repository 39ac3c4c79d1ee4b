"""The holds the tick placed: ``.mailslot/holds.json``, so a planted HELD.md is not a hold.

HELD.md sits in the owing side's inbox, which the *other* side writes: that side could plant a
HELD.md of its own (text of its choosing, presented as the tick's). So the tick records every
hold it stands behind -- ``{"to-<side>/<topic>": [size, mtime_ns]}`` -- in ``.mailslot/``, which
neither agent writes, and readers believe a HELD.md only when its size and mtime match a record.
Anything else is a stray file: reported (watch, doctor, tick warnings), never shown as a hold.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from mailslot.core.fsio import atomic_write
from mailslot.exchange.layout import Exchange

__all__ = ["HOLDS_NAME", "hold_sig", "is_trusted", "load_holds", "save_holds"]

HOLDS_NAME = "holds.json"


def load_holds(ex: Exchange) -> dict[str, list[int]]:
    """The recorded holds (empty when the file is missing or unreadable); never raises."""
    try:
        data = json.loads((ex.meta / HOLDS_NAME).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): list(v) for k, v in data.items() if isinstance(v, list) and len(v) == 2}


def save_holds(ex: Exchange, holds: dict[str, list[int]]) -> None:
    """Write the records atomically (world-readable: every reader checks against them)."""
    atomic_write(ex.meta / HOLDS_NAME, json.dumps(holds, sort_keys=True) + "\n", mode=0o644)


def hold_sig(path: Path | str) -> list[int] | None:
    """``[size, mtime_ns]`` of a regular file at ``path`` (no symlink followed), else ``None``."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return [st.st_size, st.st_mtime_ns]


def is_trusted(holds: dict[str, list[int]], inbox_side: str, topic: str, path: Path | str) -> bool:
    """Whether the HELD.md at ``path`` (in ``to-<inbox_side>/<topic>``) is one the tick placed."""
    want = holds.get(f"to-{inbox_side}/{topic}")
    return want is not None and hold_sig(path) == want

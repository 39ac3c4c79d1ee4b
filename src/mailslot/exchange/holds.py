"""The holds the tick placed: HELD.md files, and ``.mailslot/holds.json`` that vouches for them.

HELD.md sits in the owing side's inbox, which the *other* side writes: that side could plant a
HELD.md of its own (text of its choosing, presented as the tick's). So the tick records every
hold it stands behind -- ``{"to-<side>/<topic>": [size, mtime_ns, entry]}``, ``entry`` being the
file the owing side must re-read -- in ``.mailslot/``, which neither agent writes, and readers
believe a HELD.md only when its size and mtime match a record. Anything else is a stray file:
reported (watch, doctor, tick warnings), never shown as a hold. Readers take the entry to re-read
from the record, never from the HELD.md text. A record of two numbers (no entry) is read too; the
tick names its entry on its next run.

``place`` writes a HELD.md and returns its record; ``lift`` removes one. Whether a hold is
wanted is the guard's word (``guard.decide``), and the tick applies it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from mailslot.core.fsio import atomic_create, atomic_write

if TYPE_CHECKING:
    from mailslot.exchange.layout import Exchange

__all__ = [
    "HOLDS_NAME",
    "Hold",
    "hold_sig",
    "is_trusted",
    "lift",
    "load_holds",
    "place",
    "save_holds",
    "trusted_hold",
]

HOLDS_NAME = "holds.json"


class Hold(NamedTuple):
    """One recorded hold: the HELD.md's size and mtime, and the entry it asks to be re-read
    (``None`` when the record does not name it)."""

    size: int
    mtime_ns: int
    entry: str | None = None


def _hold(value: object) -> Hold | None:
    if not isinstance(value, list) or len(value) not in (2, 3):
        return None
    size, mtime = value[0], value[1]
    entry = value[2] if len(value) == 3 else None
    if not (isinstance(size, int) and isinstance(mtime, int)):
        return None
    return Hold(size, mtime, entry if isinstance(entry, str) else None)


def load_holds(ex: Exchange) -> dict[str, Hold]:
    """The recorded holds (empty when the file is missing or unreadable); never raises."""
    try:
        data = json.loads((ex.meta / HOLDS_NAME).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out = {}
    for key, value in data.items():
        hold = _hold(value)
        if hold is not None:
            out[str(key)] = hold
    return out


def save_holds(ex: Exchange, holds: dict[str, Hold]) -> None:
    """Write the records atomically (world-readable: every reader checks against them)."""
    atomic_write(ex.meta / HOLDS_NAME, json.dumps(holds, sort_keys=True) + "\n", mode=0o644)


def hold_sig(path: Path | str, entry: str | None = None) -> Hold | None:
    """The record of a regular file at ``path`` (no symlink followed) naming ``entry``, else
    ``None``."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return Hold(st.st_size, st.st_mtime_ns, entry)


def trusted_hold(
    holds: dict[str, Hold], inbox_side: str, topic: str, path: Path | str
) -> Hold | None:
    """The record of the HELD.md at ``path`` (in ``to-<inbox_side>/<topic>``) if the tick placed
    it (its size and mtime match), else ``None``."""
    want = holds.get(f"to-{inbox_side}/{topic}")
    if want is None:
        return None
    got = hold_sig(path)
    if got is None or got.size != want.size or got.mtime_ns != want.mtime_ns:
        return None
    return want


def is_trusted(holds: dict[str, Hold], inbox_side: str, topic: str, path: Path | str) -> bool:
    """Whether the HELD.md at ``path`` (in ``to-<inbox_side>/<topic>``) is one the tick placed."""
    return trusted_hold(holds, inbox_side, topic, path) is not None


def place(path: Path, text: str, entry: str, *, mode: int, replace: bool) -> Hold | None:
    """Write the HELD.md ``text`` at ``path`` (over a planted one only with ``replace``; else
    ``Conflict`` if one is there) and return its record naming ``entry`` (``None`` if it is
    gone already). ``OSError``/``MailslotError`` when it cannot be written."""
    if replace:
        atomic_write(path, text, mode=mode)
    else:
        atomic_create(path, text, mode=mode)
    return hold_sig(path, entry)


def lift(path: Path | str) -> bool:
    """Remove the HELD.md at ``path``; whether one was there. ``OSError`` if it cannot go."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True

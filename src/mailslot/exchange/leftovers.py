"""Leftovers of writers that died: dot-temps and empty topic folders, removed by the tick.

A sender killed between writing its temp file and linking it into place leaves
``.<name>.<pid>.<hex>.tmp`` (up to the body size) in a topic folder; a send refused or killed after
its topic folder was made leaves the folder empty, which the tick would report as a new topic.
Neither is anything a reader takes as a message (readers skip dot-names; an empty folder holds no
entry), but they pile up. The tick removes them (``clean``, at most once per ``CLEAN_EVERY_S``,
so a quiet tick over thousands of topics stays cheap) and doctor reports them (``find``).

Nothing younger than ``LEFTOVER_AGE_S`` is touched, nor a temp its writer holds locked (a live
writer waiting on a stalled pipe): a write takes milliseconds, so an unlocked temp that old is
dead, and a folder that old and empty is not one a sender is about to write
into (a sender makes its folder and lands its entry in the same call). Removing a folder is
``rmdir``, which refuses a folder that is not empty, so a sender that starts writing after the
check keeps its folder; a sender that found the old empty folder just before it went makes it
again (``entries.send``). Archived topics (``done/``) are never written into and are not scanned.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from mailslot.core.fsio import STALE_TEMP_SECONDS, is_temp_name, sweep_temps, temp_in_use
from mailslot.exchange.layout import Exchange
from mailslot.exchange.listing import topic_names

__all__ = ["CLEAN_EVERY_S", "LEFTOVER_AGE_S", "Leftover", "clean", "find"]

# core.fsio's bound for a dead writer's temp: a write takes milliseconds.
LEFTOVER_AGE_S = STALE_TEMP_SECONDS
# The tick lists every live topic folder for this only so often (the scan itself skips folders
# that did not change); a leftover is gone within LEFTOVER_AGE_S + CLEAN_EVERY_S.
CLEAN_EVERY_S = 3600
_MARK = "cleaned"  # in .mailslot/: its mtime is the last clean-up


@dataclass(frozen=True)
class Leftover:
    """One leftover: its path relative to the root and what it is (``temp`` or ``empty``)."""

    path: str
    kind: str


def _dirs(ex: Exchange) -> list[Path]:
    """The root, .mailslot/, each inbox and each live topic folder: where writers write."""
    out = [ex.root, ex.meta]
    for side in ex.sides:
        inbox = ex.inbox(side)
        out.append(inbox)
        out += [inbox / name for name in topic_names(inbox)]
    return [d for d in out if not os.path.islink(d)]  # never cleaned through a symlink


def _old_folders(ex: Exchange, cutoff: float) -> list[Path]:
    """Live topic folders last changed before ``cutoff`` (removing a temp changes a folder's
    mtime, so this is decided before any temp is removed)."""
    out = []
    for side in ex.sides:
        inbox = ex.inbox(side)
        for name in topic_names(inbox):
            with contextlib.suppress(OSError):
                if os.lstat(inbox / name).st_mtime < cutoff:
                    out.append(inbox / name)
    return out


def _dead_temp(entry: os.DirEntry[str], cutoff: float) -> bool:
    """Whether ``entry`` is a temp older than ``cutoff`` that no live writer holds (what
    ``sweep_temps`` removes)."""
    return (
        is_temp_name(entry.name)
        and entry.stat(follow_symlinks=False).st_mtime < cutoff
        and not temp_in_use(entry.path)
    )


def _only_temps(folder: Path, cutoff: float) -> bool:
    """Whether ``folder`` holds nothing but dead temps older than ``cutoff``."""
    with os.scandir(folder) as it:
        return all(_dead_temp(e, cutoff) for e in it)


def find(ex: Exchange, *, older_than: float = LEFTOVER_AGE_S) -> list[Leftover]:
    """Leftovers older than ``older_than`` seconds: temps, and live topic folders that hold
    nothing else (``empty``: what is left once their temps are gone)."""
    cutoff = time.time() - older_than
    out = []
    for d in _dirs(ex):
        try:
            with os.scandir(d) as it:
                names = [e.name for e in it if _dead_temp(e, cutoff)]
        except OSError:
            continue
        out += [Leftover(str((d / n).relative_to(ex.root)), "temp") for n in sorted(names)]
    for folder in _old_folders(ex, cutoff):
        with contextlib.suppress(OSError):
            if _only_temps(folder, cutoff):
                out.append(Leftover(str(folder.relative_to(ex.root)), "empty"))
    return out


def clean(ex: Exchange, *, force: bool = False) -> list[str]:
    """Remove leftovers older than ``LEFTOVER_AGE_S``; their root-relative paths. Runs at most
    once per ``CLEAN_EVERY_S`` unless ``force``; never raises for a file it cannot remove."""
    mark = ex.meta / _MARK
    with contextlib.suppress(OSError):
        if not force and time.time() - os.stat(mark).st_mtime < CLEAN_EVERY_S:
            return []
    cutoff = time.time() - LEFTOVER_AGE_S
    old = _old_folders(ex, cutoff)
    removed = []
    for d in _dirs(ex):
        with contextlib.suppress(OSError):
            removed += [str(p.relative_to(ex.root)) for p in sweep_temps(d, LEFTOVER_AGE_S)]
    for folder in old:
        with contextlib.suppress(OSError):  # not empty: a sender got there first, or an entry
            folder.rmdir()
            removed.append(f"{folder.relative_to(ex.root)}/")
    with contextlib.suppress(OSError):
        mark.touch()
    return removed

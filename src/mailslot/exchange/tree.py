"""A full audit of the exchange tree for what readers skip: symlinks, strays, non-regular files.

Readers are cheap and careful: they never follow a symlink (one planted as ``done/`` would let a
plain ``rename`` move a topic out of the exchange), never open anything but a regular file (a FIFO
named like an entry hangs a reader), and key entries by their exact name shape. What they skip
must not be silent, so this walks the whole tree (inboxes, ``done/``, every topic) without
following links and lists every such path; ``doctor`` reports it with a fix.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mailslot.core.names import TOPIC_RE
from mailslot.core.record import Record
from mailslot.exchange.entries import ENTRY_RE
from mailslot.exchange.holds import Hold, is_trusted, load_holds
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.listing import leftover_name

__all__ = ["TreeAudit", "audit_tree", "stray_kind"]


class TreeAudit(Record):
    """Root-relative paths of symlinks and of stray files (with what is wrong with each)."""

    __match_args__ = ("symlinks", "strays")
    __slots__ = ("strays", "symlinks")
    symlinks: list[str]
    strays: list[tuple[str, str]]  # (path, why)

    def __init__(
        self, symlinks: list[str] | None = None, strays: list[tuple[str, str]] | None = None
    ) -> None:
        self.symlinks = [] if symlinks is None else symlinks
        self.strays = [] if strays is None else strays


def stray_kind(name: str, mode: int) -> str | None:
    """Why a file named ``name`` with ``mode`` (from ``lstat``) in a topic directory is a stray.

    ``None`` for an entry, STATE.md or HELD.md that is a regular file, and for dot-names and an
    editor's leftovers (``listing.leftover_name``: the tick ignores them, git never commits them).
    """
    if leftover_name(name):
        return None
    known = name in (STATE_NAME, HELD_NAME) or ENTRY_RE.match(name) is not None
    if not known:
        return "not an entry (NNNN-<from>.md), STATE.md or HELD.md"
    if stat.S_ISLNK(mode):
        return "a symlink, not followed"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def _topic(ex: Exchange, path: Path, audit: TreeAudit, holds: dict[str, Hold]) -> None:
    try:
        with os.scandir(path) as it:
            for e in it:
                if leftover_name(e.name):
                    continue  # an editor's lock may be a symlink: nothing reads or moves it alone
                st = e.stat(follow_symlinks=False)
                rel = os.path.relpath(e.path, ex.root)
                if stat.S_ISLNK(st.st_mode):
                    audit.symlinks.append(rel)
                why = stray_kind(e.name, st.st_mode)
                if why is None and e.name == HELD_NAME:
                    inbox_side = rel.split("/", 1)[0].removeprefix("to-")
                    if not is_trusted(holds, inbox_side, path.name, e.path):
                        why = "a HELD.md the tick did not place (not a hold)"
                if why is not None:
                    audit.strays.append((rel, why))
    except OSError:
        pass


def _topics(
    ex: Exchange, directory: Path, audit: TreeAudit, holds: dict[str, Hold], *, top: bool
) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for e in entries:
        rel = os.path.relpath(e.path, ex.root)
        if e.is_symlink():
            audit.symlinks.append(rel)
        elif e.name[:1] == ".":
            continue
        elif top and e.name == DONE and e.is_dir(follow_symlinks=False):
            _topics(ex, Path(e.path), audit, holds, top=False)
        elif TOPIC_RE.fullmatch(e.name) and e.is_dir(follow_symlinks=False):
            _topic(ex, Path(e.path), audit, holds)


def audit_tree(ex: Exchange) -> TreeAudit:
    """Walk both inboxes (and their ``done/``) without following links; never raises."""
    audit = TreeAudit()
    holds = load_holds(ex)
    for side in ex.sides:
        inbox = ex.inbox(side)
        if os.path.islink(inbox):
            audit.symlinks.append(os.path.relpath(inbox, ex.root))
            continue
        _topics(ex, inbox, audit, holds, top=True)
    audit.symlinks.sort()
    audit.strays.sort()
    return audit

"""One cheap pass over the tree: every live topic's files by presence, size and mtime.

The tick diffs by ``(size, mtime_ns)``, never by content (re-reading whole files is noise and
cost), and parses only what the guard and the index need -- each side's newest entry and each
STATE.md -- through a cache keyed by the same signature, so a tick with nothing new reads no
file at all. Keys are logical (``to-<side>/<topic>/<name>`` even while a copy sits in ``done/``),
so an archive or recovery move is not mistaken for new traffic.

HELD.md and dot-names (in-flight temps) are never part of the scan: a marker the tick writes must
not look like traffic, or it would notify about itself every run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailslot.core.clock import parse_time
from mailslot.core.errors import FormatError
from mailslot.exchange.entries import ENTRY_RE, parse_entry_text
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.state import parse_state
from mailslot.exchange.topics import topic_names

__all__ = ["Parsed", "SideCopy", "TopicScan", "parse_cached", "parse_sig", "scan_tree"]

Sig = tuple[int, int]


@dataclass
class SideCopy:
    """One side's directory of a topic (its inbox copy), as found."""

    inbox_side: str
    dir: str  # a string, not a Path: 20,000 of these are built on every tick
    archived: bool
    entries: list[tuple[int, str, str]] = field(default_factory=list)  # number, from, name
    files: dict[str, Sig] = field(default_factory=dict)  # name -> (size, mtime_ns)
    held: bool = False
    sig: str = ""  # every file's name, size and mtime in one string: equal means unchanged

    @property
    def path(self) -> Path:
        """The directory as a ``Path``."""
        return Path(self.dir)

    @path.setter
    def path(self, value: Path) -> None:
        self.dir = str(value)

    def newest(self) -> tuple[int, str, str] | None:
        """``(number, from, name)`` of the newest entry here, by ``(number, from)``."""
        return max(self.entries) if self.entries else None


@dataclass
class TopicScan:
    """A live (or half-archived) topic: its copies per inbox side."""

    name: str
    copies: dict[str, SideCopy] = field(default_factory=dict)
    conflict: str | None = None  # both a live and an archived copy on one side

    @property
    def half_archived(self) -> bool:
        """Live on one side, archived on the other."""
        return len({c.archived for c in self.copies.values()}) == 2


def _scan_dir(path: str, inbox_side: str, archived: bool) -> SideCopy:
    copy = SideCopy(inbox_side, path, archived)
    files, entries, match = copy.files, copy.entries, ENTRY_RE.match
    parts: list[str] = []
    try:
        with os.scandir(path) as it:
            for e in it:
                name = e.name
                if name[0] == ".":
                    continue
                if name == HELD_NAME:
                    copy.held = True
                    continue
                if not e.is_file(follow_symlinks=False):
                    continue
                st = e.stat(follow_symlinks=False)
                size, mtime = st.st_size, st.st_mtime_ns
                files[name] = (size, mtime)
                parts.append(f"{name}\t{size}\t{mtime}")
                m = match(name)
                if m:
                    entries.append((int(m[1]), m[2], name))
    except (FileNotFoundError, NotADirectoryError):
        pass
    parts.sort()
    copy.sig = "\n".join(parts)
    return copy


def parse_sig(sig: str) -> dict[str, Sig]:
    """The ``{name: (size, mtime_ns)}`` a ``SideCopy.sig`` string was made from."""
    out: dict[str, Sig] = {}
    for line in sig.split("\n") if sig else ():
        name, size, mtime = line.split("\t")
        out[name] = (int(size), int(mtime))
    return out


def scan_tree(ex: Exchange) -> tuple[dict[str, TopicScan], set[str]]:
    """``(live topics, archived topic names)``; a half-archived topic is live, both copies in."""
    topics: dict[str, TopicScan] = {}
    done: dict[str, set[str]] = {}
    for side in ex.sides:
        inbox = str(ex.inbox(side))
        done[side] = set(topic_names(ex.inbox(side) / DONE))
        for name in topic_names(ex.inbox(side)):
            scan = topics.setdefault(name, TopicScan(name))
            scan.copies[side] = _scan_dir(f"{inbox}/{name}", side, False)
            if name in done[side]:
                scan.conflict = f"to-{side}/ has both {name}/ and {DONE}/{name}/"
    for name, scan in topics.items():
        for side in ex.sides:
            if side not in scan.copies and name in done[side]:
                scan.copies[side] = _scan_dir(str(ex.inbox(side) / DONE / name), side, True)
    archived = (done[ex.sides[0]] | done[ex.sides[1]]) - set(topics)
    return topics, archived


@dataclass(frozen=True)
class Parsed:
    """The cached reading of one file: a time (epoch microseconds), a word, an error."""

    time_us: int | None
    word: str | None  # action for an entry, status for a STATE.md
    error: str | None

    def to_list(self, sig: Sig) -> list[Any]:
        """The JSON form stored in the tick state."""
        return [sig[0], sig[1], self.time_us, self.word, self.error]


def _us(value: object, path: Path) -> int | None:
    try:
        dt = parse_time(value, path=str(path))
    except FormatError:
        return None
    return int(dt.timestamp() * 1_000_000)


def parse_cached(path: Path, sig: Sig, side: str, hit: list[Any] | None) -> Parsed:
    """Parse an entry or STATE.md at ``path`` unless ``hit`` (cached) has the same signature."""
    if hit is not None and hit[0] == sig[0] and hit[1] == sig[1]:
        return Parsed(hit[2], hit[3], hit[4])
    try:
        raw = path.read_bytes()
    except OSError as e:
        parsed = Parsed(None, "unknown" if path.name == STATE_NAME else None, str(e.strerror))
    else:
        if path.name == STATE_NAME:
            st = parse_state(raw, side, path)
            t = int(st.updated_at.timestamp() * 1_000_000) if st.updated_at else None
            parsed = Parsed(t, st.status, st.error)
        else:
            meta, _, error = parse_entry_text(raw, path)
            action = meta.get("action")
            word = action if isinstance(action, str) and action in ("required", "fyi") else None
            parsed = Parsed(_us(meta.get("at"), path), word, error)
    return parsed

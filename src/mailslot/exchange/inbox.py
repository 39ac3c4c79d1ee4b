"""What sits in one side's inbox, by name only, and a cheap reading of the few fields that matter.

Wake-up and health commands (watch, monitor, sweep) run often -- every scheduler tick, on every
wake -- over exchanges that may hold thousands of topics, so they look at *names* first (which
entries exist, whether a HELD.md is there) and read a file only when its fields decide something.

``peek_entry`` / ``peek_state`` read just the frontmatter keys they need with a line scanner and
fall back to the full strict parsers (``entries.parse_entry_text``, ``state.parse_state``) the
moment a file is anything but plain ``key: value`` lines, so a hand-written file reads exactly as
the rest of mailslot reads it. Readers ignore dot-names (in-flight temps), like every reader.

An entry in ``to-<side>/done/<topic>/`` is still addressed to that side: archiving moves files,
it does not deliver them (seed 000: a reply filed before it was read).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from mailslot.core.clock import parse_time
from mailslot.core.errors import FormatError
from mailslot.exchange.entries import ACTIONS, ENTRY_RE, parse_entry_text
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.state import STATUSES, parse_state
from mailslot.exchange.topics import topic_names

__all__ = [
    "EntryPeek",
    "InboxItem",
    "StatePeek",
    "TopicDir",
    "inbox_items",
    "list_dir",
    "peek_entry",
    "peek_state",
    "side_dirs",
]

# Frontmatter worth scanning by hand is a few short lines; anything longer takes the full parser.
PEEK_BYTES = 4096
_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):[ \t]*(.*?)[ \t]*$")


@dataclass(frozen=True)
class TopicDir:
    """One topic directory of one inbox: its entry files (number, from, name) and a hold flag."""

    topic: str
    path: Path
    archived: bool
    entries: tuple[tuple[int, str, str], ...]
    held: bool
    has_state: bool

    def newest(self) -> tuple[int, str, str] | None:
        """``(number, from, name)`` of the newest entry, by ``(number, from)``."""
        return max(self.entries) if self.entries else None


def list_dir(path: Path, topic: str, archived: bool) -> TopicDir:
    """The names in one topic directory (no stat, no read); a missing one is empty."""
    entries = []
    held = has_state = False
    try:
        with os.scandir(path) as it:
            for e in it:
                name = e.name
                if name.startswith("."):
                    continue
                if name == HELD_NAME:
                    held = True
                elif name == STATE_NAME:
                    has_state = True
                else:
                    m = ENTRY_RE.match(name)
                    if m:
                        entries.append((int(m.group(1)), m.group(2), name))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return TopicDir(topic, path, archived, tuple(sorted(entries)), held, has_state)


def side_dirs(ex: Exchange, inbox_side: str, *, archived: bool = False) -> dict[str, TopicDir]:
    """Topic directories of ``to-<inbox_side>/`` by topic (live ones win over ``done/`` copies)."""
    inbox = ex.inbox(inbox_side)
    out: dict[str, TopicDir] = {}
    if archived:
        for name in topic_names(inbox / DONE):
            out[name] = list_dir(inbox / DONE / name, name, True)
    for name in topic_names(inbox):
        out[name] = list_dir(inbox / name, name, False)
    return out


@dataclass(frozen=True)
class InboxItem:
    """An entry file addressed to a side, keyed by ``(topic, number, from)``."""

    topic: str
    number: int
    sender: str
    path: Path
    archived: bool

    @property
    def key(self) -> str:
        """The stable identity: ``<topic>/<NNNN>-<from>`` (unchanged by archive or bridge)."""
        return f"{self.topic}/{self.number:04d}-{self.sender}"


def inbox_items(ex: Exchange, side: str) -> list[InboxItem]:
    """Every entry in ``to-<side>/``, live and archived, in ``(topic, number, from)`` order."""
    out = []
    for topic, d in sorted(side_dirs(ex, side, archived=True).items()):
        for number, sender, name in d.entries:
            out.append(InboxItem(topic, number, sender, d.path / name, d.archived))
    # a topic both live and in done/ (damage) still delivers the done/ copy's entries
    inbox = ex.inbox(side)
    for topic in set(topic_names(inbox)) & set(topic_names(inbox / DONE)):
        d = list_dir(inbox / DONE / topic, topic, True)
        seen = {(i.number, i.sender) for i in out if i.topic == topic}
        out += [
            InboxItem(topic, n, s, d.path / name, True)
            for n, s, name in d.entries
            if (n, s) not in seen
        ]
    return out


def _simple_fields(raw: bytes, fenced: bool) -> dict[str, str] | None:
    """``key: value`` lines of a small, plain header; ``None`` if anything needs a real parser."""
    if len(raw) > PEEK_BYTES:
        raw = raw[:PEEK_BYTES]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    if fenced:
        if not lines or lines[0].rstrip() != "---":
            return None
        lines = lines[1:]
    out: dict[str, str] = {}
    for line in lines:
        if fenced and line.rstrip() == "---":
            return out
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            if not fenced and line.startswith(("  ", "- ")):
                continue  # a block list (tags); not a field we read
            return None
        key, value = m.group(1), m.group(2)
        if key in out or value[:1] in "|>&*!{%@`" or " #" in value or ": " in value:
            return None
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key] = value
    return None if fenced else out  # a fenced header that never closes is the parser's to judge


def _time(value: str | None) -> datetime | None:
    try:
        return parse_time(value)
    except FormatError:
        return None


@dataclass(frozen=True)
class EntryPeek:
    """An entry's ``at`` and ``action`` (``None`` when missing or unreadable) and any error."""

    at: datetime | None
    action: str | None
    error: str | None = None


def peek_entry(path: Path) -> EntryPeek:
    """``at`` and ``action`` of an entry file; never raises (problems land in ``error``)."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        return EntryPeek(None, None, f"unreadable: {e.strerror}")
    fields = _simple_fields(raw, fenced=True)
    if fields is not None and {"from", "at", "action"} <= set(fields):
        at, action = _time(fields["at"]), fields["action"]
        if at is not None and action in ACTIONS:
            return EntryPeek(at, action)
    meta, _, error = parse_entry_text(raw, path)
    raw_action, raw_at = meta.get("action"), meta.get("at")
    return EntryPeek(
        _time(raw_at) if isinstance(raw_at, str) else None,
        raw_action if isinstance(raw_action, str) and raw_action in ACTIONS else None,
        error,
    )


@dataclass(frozen=True)
class StatePeek:
    """A STATE.md's status (``open`` when missing, ``unknown`` when unreadable) and time."""

    status: str
    updated_at: datetime | None
    present: bool
    error: str | None = None


def peek_state(path: Path) -> StatePeek:
    """Status and ``updated_at`` of one STATE.md; missing is ``open``; never raises."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return StatePeek("open", None, False)
    except OSError as e:
        return StatePeek("unknown", None, True, f"unreadable: {e.strerror}")
    if not raw.lstrip(b"\xef\xbb\xbf").startswith(b"---"):
        fields = _simple_fields(raw, fenced=False)
        if fields is not None and fields.get("status") in STATUSES:
            at = _time(fields.get("updated_at"))
            if at is not None:
                return StatePeek(fields["status"], at, True)
    st = parse_state(raw, "", path)
    return StatePeek(st.status, st.updated_at, True, st.error)

"""One entry as read: ``Entry``, keyed by ``(number, from)``, and the readers that make it.

Readers key an entry by ``(number, from)``: a foreign agent may write ``0003-olu.md`` while
mailslot wrote ``0003-claude.md``, and a replicating bridge materialises files by rename. Both
entries are real and both are shown. Readers ignore dot-names (in-flight temps) and read
hand-written files (CRLF, quoted values, ``+00:00``, second precision) exactly like their own.
A file that does not parse is still an entry: it is listed with the reason, never dropped.

``Entry`` lives here, apart from ``entries.send``: a send reads no entries, so it never loads this
module. ``entries`` still offers every name here, loaded on first use.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time, parse_time
from mailslot.core.display import brief
from mailslot.core.errors import FormatError, NotFound
from mailslot.core.formats import parse_frontmatter
from mailslot.core.record import FrozenRecord
from mailslot.exchange.entries import ACTIONS
from mailslot.exchange.layout import Exchange
from mailslot.exchange.listing import ENTRY_RE
from mailslot.exchange.safeio import read_regular
from mailslot.exchange.topics import find_topic

__all__ = [
    "Entry",
    "check_sender",
    "entry_names",
    "list_entries",
    "members",
    "parse_entry",
    "parse_entry_text",
]


class Entry(FrozenRecord):
    """One entry file: who wrote it (by file name and folder), when, what it asks, the body.

    A ``core.record`` record, not a dataclass (every blocking command loads this module); its
    fields live in the instance ``__dict__``, which ``exchange.watch``'s common wake fills in one
    update, held by a test to what ``__init__`` makes."""

    __match_args__ = (
        "number",
        "sender",
        "side",
        "topic",
        "path",
        "at",
        "action",
        "body",
        "meta",
        "error",
        "warning",
        "verified",
        "arrived_ns",
    )
    number: int
    sender: str
    side: str
    topic: str
    path: Path
    at: datetime | None
    action: str | None
    body: str
    meta: dict[str, Any]
    error: str | None
    # Identity from the transport: the directory says which side wrote it; the file name's
    # sender is believed only if it is a member of that side. Set by ``check_sender``.
    warning: str | None
    verified: bool
    arrived_ns: int  # the file's ctime when read: when it arrived (its writer cannot set it)

    def __init__(
        self,
        number: int,
        sender: str,
        side: str,
        topic: str,
        path: Path,
        at: datetime | None = None,
        action: str | None = None,
        body: str = "",
        meta: dict[str, Any] | None = None,
        error: str | None = None,
        warning: str | None = None,
        verified: bool = True,
        arrived_ns: int = 0,
    ) -> None:
        self.__dict__.update(
            number=number,
            sender=sender,
            side=side,
            topic=topic,
            path=path,
            at=at,
            action=action,
            body=body,
            meta={} if meta is None else meta,
            error=error,
            warning=warning,
            verified=verified,
            arrived_ns=arrived_ns,
        )

    @property
    def arrival(self) -> tuple[int, int, str]:
        """``(arrived_ns, number, file name)``: the order debts are decided in (``answers``)."""
        return (self.arrived_ns, self.number, self.path.name)

    @property
    def key(self) -> tuple[int, str]:
        """The identity of an entry: ``(number, from)``."""
        return (self.number, self.sender)

    @property
    def name(self) -> str:
        """The file name, ``NNNN-<from>.md``."""
        return self.path.name

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        """A JSON-ready dict (path relative to ``root`` when given)."""
        path = self.path.relative_to(root) if root is not None else self.path
        return {
            "topic": self.topic,
            "number": self.number,
            "from": self.sender,
            "side": self.side,
            "at": format_time(self.at) if self.at else None,
            "action": self.action,
            "path": str(path),
            "body": self.body,
            "error": self.error,
            "sender": self.shown_sender,
            "verified": self.verified,
            "warning": self.warning,
        }

    @property
    def shown_sender(self) -> str:
        """Who wrote it, from the transport: the file name's sender if it is a member of the
        writing side, else the side itself."""
        return self.sender if self.verified else self.side


def entry_names(directory: Path) -> list[tuple[int, str, str]]:
    """``(number, from, file name)`` of every regular entry file in ``directory``, unparsed."""
    out = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                m = ENTRY_RE.match(e.name)
                if m and e.is_file(follow_symlinks=False):  # a FIFO or link is a stray
                    out.append((int(m.group(1)), m.group(2), e.name))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return out


def parse_entry_text(text: bytes | str, path: Path) -> tuple[dict[str, Any], str, str | None]:
    """``(meta, body, error)`` of an entry's text; never raises (an error is returned)."""
    try:
        meta, body = parse_frontmatter(text, path=path)
    except FormatError as e:
        return {}, text if isinstance(text, str) else text.decode("utf-8", "replace"), str(e)
    problems = []
    action = meta.get("action")
    if action not in ACTIONS:
        problems.append(f"action must be one of {', '.join(ACTIONS)}, got {brief(action)}")
    try:
        parse_time(meta.get("at"), field="at", path=str(path))
    except FormatError as e:
        problems.append(str(e))
    return meta, body, "; ".join(problems) or None


def parse_entry(path: Path, side: str, topic: str) -> Entry:
    """Read one entry file written by ``side``; an unreadable file is an ``Entry`` with error."""
    m = ENTRY_RE.match(path.name)
    if not m:
        raise FormatError("not an entry file name (NNNN-<from>.md)", path=path)
    number, sender = int(m.group(1)), m.group(2)
    try:
        arrived = os.lstat(path).st_ctime_ns
        raw = read_regular(path)
    except OSError as e:
        return Entry(number, sender, side, topic, path, error=e.strerror or str(e))
    meta, body, error = parse_entry_text(raw, path)
    at: datetime | None
    try:
        at = parse_time(meta.get("at"), field="at", path=str(path))
    except FormatError:
        at = None
    action = meta.get("action") if meta.get("action") in ACTIONS else None
    return Entry(
        number, sender, side, topic, path, at, action, body, meta, error, arrived_ns=arrived
    )


def members(ex: Exchange, side: str) -> list[str]:
    """Who may write on ``side``: the side's own name and the humans mapped to it."""
    return [side, *sorted(h for h, s in ex.humans.items() if s == side)]


def check_sender(ex: Exchange, entry: Entry) -> Entry:
    """``entry`` with ``verified``/``warning`` set from the transport; never raises.

    The file name's sender must be a member of the side whose outbox holds the file, and the
    body's ``from`` is only a claim: a mismatch with the transport is flagged, never believed.
    """
    problems = []
    who = members(ex, entry.side)
    verified = entry.sender in who
    if not verified:
        problems.append(
            f"file name says {entry.sender!r}, who is not on {entry.side}'s side "
            f"({', '.join(who)}); written by {entry.side}'s side"
        )
    claimed = entry.meta.get("from")
    shown = entry.sender if verified else entry.side
    if claimed is not None and str(claimed) != shown:
        problems.append(f"body claims from {brief(claimed)}; the transport says {shown!r}")
    if not problems:
        return entry
    return entry.replace(verified=verified, warning="; ".join(problems))


def list_entries(ex: Exchange, topic: str) -> list[Entry]:
    """Every entry of ``topic`` from both sides, in ``(number, from)`` order; ``NotFound``."""
    ref = find_topic(ex, topic)
    if ref is None:
        raise NotFound(f"no topic {topic}", path=ex.root)
    out = []
    for inbox_side, directory in ref.dirs.items():
        writer = ex.writer_of(inbox_side)
        for _, _, name in entry_names(directory):
            out.append(check_sender(ex, parse_entry(directory / name, writer, topic)))
    return sorted(out, key=lambda e: e.key)

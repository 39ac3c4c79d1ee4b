"""Entries: ``<topic>/NNNN-<from>.md``, immutable, numbered across both sides of a topic.

An entry is never edited, deleted or overwritten; a correction is a new, higher-numbered entry.
Numbers are claimed under ``.mailslot/send.lock`` (a file both sides can read; ``flock`` works on
a read-only descriptor) over both sides' directories of the topic, and the final ``link`` refuses
a taken name, so concurrent writers on both sides never share a number and a writer that skips
the lock (a foreign agent writing by hand) still cannot make mailslot overwrite.

Reading entries (``Entry``, ``parse_entry``, ``list_entries``, ``check_sender``, ...) is
``entry``'s; its names are offered here too, loaded on first use (PEP 562): a send reads no
entry, and ``Entry``, a dataclass, would load ``dataclasses`` on every send's start.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from mailslot.core.clock import format_time, now
from mailslot.core.errors import Conflict, InvalidValue, NotFound
from mailslot.core.formats import dump_frontmatter
from mailslot.core.fsio import file_lock, numbered_create
from mailslot.core.limits import check_bytes
from mailslot.core.record import FrozenRecord
from mailslot.exchange.layout import DONE, Exchange
from mailslot.exchange.listing import ENTRY_RE
from mailslot.exchange.topics import find_topic, resolve_topic

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: every send loads this
if TYPE_CHECKING:
    from typing import Any

    from mailslot.exchange.entry import (
        Entry,
        check_sender,
        entry_names,
        list_entries,
        members,
        parse_entry,
        parse_entry_text,
    )

__all__ = [
    "ACTIONS",
    "ENTRY_RE",
    "MAX_BODY_BYTES",
    "SEND_LOCK_WAIT_SECONDS",
    "Entry",
    "SendResult",
    "check_sender",
    "entry_names",
    "list_entries",
    "members",
    "parse_entry",
    "parse_entry_text",
    "send",
]

ACTIONS = ("required", "fyi")
# An entry is a message, not a payload: payloads go out of band (a path). 256 KiB holds a long
# review with room to spare and keeps a tick over 100,000 entries cheap.
MAX_BODY_BYTES = 256 * 1024
# The send lock is held for milliseconds, but a hand writer (CONVENTION.md's flock line) can take
# it too: one that hangs holding it makes a send fail loudly after this long, never hang forever.
SEND_LOCK_WAIT_SECONDS = 10.0


class SendResult(FrozenRecord):
    """A written entry: its topic, number, path (absolute and relative) and whether it is new.

    A ``core.record`` record, not a dataclass: every send makes one and loads this module."""

    __match_args__ = ("topic", "number", "path", "relpath", "new_topic", "at")
    __slots__ = ("at", "new_topic", "number", "path", "relpath", "topic")
    topic: str
    number: int
    path: Path
    relpath: str
    new_topic: bool
    at: str

    def __init__(
        self, topic: str, number: int, path: Path, relpath: str, new_topic: bool, at: str
    ) -> None:
        init = object.__setattr__
        init(self, "topic", topic)
        init(self, "number", number)
        init(self, "path", path)
        init(self, "relpath", relpath)
        init(self, "new_topic", new_topic)
        init(self, "at", at)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "topic": self.topic,
            "number": self.number,
            "path": self.relpath,
            "new_topic": self.new_topic,
            "at": self.at,
        }


def render_entry(sender: str, action: str, body: str, at: str) -> str:
    """The text of an entry file (frontmatter ``from``, ``at``, ``action``, then the body)."""
    if body and not body.endswith("\n"):
        body += "\n"
    return dump_frontmatter({"from": sender, "at": at, "action": action}, body)


def send(ex: Exchange, agent: str, topic: str, action: str, body: str) -> SendResult:
    """Write a new entry as ``agent`` into its side's outbox; raise ``MailslotError`` subclasses.

    ``topic`` is resolved as ``topics.resolve_topic`` says (full name, newest live slug, else a new
    topic). Refuses an unknown member (``Conflict``), a bad action, an empty body or one holding
    a NUL byte (``InvalidValue``), a body over ``MAX_BODY_BYTES`` (``LimitExceeded``), an
    archived topic (``Conflict``).
    """
    side = ex.side_of(agent)
    if action not in ACTIONS:
        raise InvalidValue(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    if not body.strip():
        raise InvalidValue("the body is empty; an entry says something")
    if "\x00" in body:  # git, grep and a hand reader's tools would take the entry as binary
        raise InvalidValue("the body holds a NUL byte; an entry is text")
    check_bytes("entry body", body, MAX_BODY_BYTES)
    name, exists = resolve_topic(ex, topic)
    outbox = ex.outbox(side)
    if os.path.islink(outbox) or not outbox.is_dir():
        raise NotFound("outbox missing; is this an exchange root?", path=outbox)
    inbox_side = ex.other(side)
    if exists:
        ref = find_topic(ex, name)
        if ref is not None and ref.archived.get(inbox_side):
            raise Conflict(
                f"topic {name} is half-archived (your side's copy is in done/); "
                "the next tick settles it, or reopen it"
            )
    directory = outbox / name
    at = format_time(now())
    create = functools.partial(
        numbered_create,
        directory,
        f"{agent}.md",
        render_entry(agent, action, body, at),
        # every place a number of this topic may already be taken, archived copies included
        siblings=[ex.inbox(side) / name, ex.inbox(side) / DONE / name, outbox / DONE / name],
        mode=ex.file_mode(inbox_side),
    )
    # The tick archives under the send lock too: holding it, the topic found live above is
    # either still live or was archived meanwhile -- then refused, never made live again.
    with file_lock(ex.send_lock, timeout=SEND_LOCK_WAIT_SECONDS):
        if not directory.is_dir() and os.path.lexists(outbox / DONE / name):
            raise Conflict(
                f"topic {name} is archived (it was archived as this entry was sent; nothing "
                f"written); run 'mailslot exchange reopen {name} --why ...' to write in it again"
            )
        made = ex.make_dir(directory, inbox_side)
        try:
            try:
                number, path = create()
            except FileNotFoundError:
                if directory.exists():
                    raise
                # removed as an empty leftover (by the tick, or a refused sender) after make_dir
                made = ex.make_dir(directory, inbox_side)
                number, path = create()
        except BaseException:
            if made:  # a refused send leaves no empty topic folder behind
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise
    return SendResult(name, number, path, str(path.relative_to(ex.root)), not exists, at)


# ``entry``'s names, offered here as before, loaded on first use
_READERS = frozenset(
    (
        "Entry",
        "check_sender",
        "entry_names",
        "list_entries",
        "members",
        "parse_entry",
        "parse_entry_text",
    )
)


def __getattr__(name: str) -> object:
    if name not in _READERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from mailslot.exchange import entry

    value = getattr(entry, name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value

"""Putting what a peer wrote onto this host's disk, so local agents read it like a local file.

An entry is created like every message: temp, fsync, link into place (never over an existing
name), directory fsync -- all before the bridge acknowledges the message, so an acknowledged
entry is on disk. A name that exists already is compared: the same bytes are a redelivery and
are skipped; different bytes are never written over the file -- they go beside it as a visible
``<name>.<digest>.conflict`` and the caller raises an alert. So does a later version of an entry
that changed on its host after it was sent (``KIND_VERSION``). STATE.md has one writer (its side),
HELD.md and INDEX.md one too (the home host's tick), so the highest revision wins: an older or
equal revision is skipped, a newer one replaces the file atomically. A released hold removes
HELD.md; an archive or a reopen moves both sides' copies of a topic, like the tick does.

Local watchers wake on the link or rename exactly as on a local send.
"""

from __future__ import annotations

import hashlib
import logging
import os
from enum import Enum
from pathlib import Path

from mailslot.bridge.wire import (
    HELD_NAME,
    INDEX_NAME,
    KIND_ENTRY,
    KIND_HELD,
    KIND_INDEX,
    KIND_PLACE,
    KIND_RECEIPT,
    KIND_STATE,
    KIND_VERSION,
    PLACE_DONE,
    STATE_NAME,
    Incoming,
)
from mailslot.core.errors import Conflict, SymlinkRefused
from mailslot.core.fsio import atomic_create, atomic_write, create_many, fsync_dir, read_regular
from mailslot.core.move import safe_move
from mailslot.exchange.arrivals import record_arrivals
from mailslot.exchange.layout import DONE, Exchange, load_exchange

log = logging.getLogger(__name__)

__all__ = [
    "BATCHED_KINDS",
    "Outcome",
    "conflict_name",
    "materialise",
    "materialise_batch",
    "materialise_entries",
    "materialise_receipts",
]


class Outcome(Enum):
    """What materialising one message did."""

    WRITTEN = "written"
    SAME = "same"  # already there, identical (a redelivery or a reconcile)
    STALE = "stale"  # an older STATE revision than the one in place
    CONFLICT = "conflict"  # different bytes under an existing name: kept aside


def conflict_name(name: str, data: bytes) -> str:
    """The name the other version of ``name`` is kept under."""
    return f"{name}.{hashlib.sha256(data).hexdigest()[:12]}.conflict"


def _topic_dir(ex: Exchange, item: Incoming) -> Path:
    """The topic's folder in ``to-<inbox>``: the live one, or the archived one when only that
    exists (an entry that reaches an archived topic lands where a late local one would)."""
    inbox = ex.inbox(item.inbox)
    ex.make_dir(inbox, item.inbox)
    topic = inbox / item.topic
    archived = inbox / DONE / item.topic
    if not topic.is_dir() and archived.is_dir():
        return archived
    ex.make_dir(topic, item.inbox)
    return topic


def _entry(ex: Exchange, item: Incoming) -> Outcome:
    topic = _topic_dir(ex, item)
    path = topic / item.name
    mode = ex.file_mode(item.inbox)
    try:
        atomic_create(path, item.data, mode=mode)
        return Outcome.WRITTEN
    except Conflict:
        pass
    try:
        existing = read_regular(path, len(item.data) + 1)
    except OSError:
        existing = None
    if existing == item.data:
        return Outcome.SAME
    aside = topic / conflict_name(item.name, item.data)
    try:
        atomic_create(aside, item.data, mode=mode)
    except Conflict:
        pass  # the same other version, kept already
    return Outcome.CONFLICT


def _version(ex: Exchange, item: Incoming) -> Outcome:
    """A later version of an entry: beside it as ``.conflict``, never over it."""
    topic = _topic_dir(ex, item)
    try:
        if read_regular(topic / item.name, len(item.data) + 1) == item.data:
            return Outcome.SAME
    except OSError:
        pass
    try:
        atomic_create(
            topic / conflict_name(item.name, item.data), item.data, mode=ex.file_mode(item.inbox)
        )
    except Conflict:
        return Outcome.SAME  # kept already (a redelivery)
    return Outcome.CONFLICT


def materialise_entries(
    items: list[Incoming], exchanges: dict[str, Exchange] | None = None
) -> list[Outcome]:
    """``materialise`` for a run of entries, the syncs batched (``core.fsio.create_many``):
    every file is durable when this returns. Raises ``OSError`` (nothing acknowledged)."""
    cache = exchanges if exchanges is not None else {}
    batch: list[tuple[Path, bytes, int]] = []
    for item in items:
        ex = cache.get(item.exchange.name)
        if ex is None:
            ex = cache[item.exchange.name] = load_exchange(item.exchange.root)
        batch.append((_topic_dir(ex, item) / item.name, item.data, ex.file_mode(item.inbox)))
    created = create_many(batch)
    return [
        Outcome.WRITTEN if new else _entry(cache[item.exchange.name], item)
        for item, new in zip(items, created, strict=True)
    ]


def materialise_receipts(
    items: list[Incoming], exchanges: dict[str, Exchange] | None = None
) -> list[Outcome]:
    """``materialise`` for a run of arrival receipts: one read and one append per topic, so a
    burst (a peer catching up after a partition) costs what one receipt does per topic."""
    cache = exchanges if exchanges is not None else {}
    topics: dict[tuple[str, str, str], dict[str, int]] = {}
    for item in items:
        if item.exchange.name not in cache:
            cache[item.exchange.name] = load_exchange(item.exchange.root)
        found = topics.setdefault((item.exchange.name, item.inbox, item.topic), {})
        found.setdefault(item.name, int(item.data))  # the first receipt stands
    new: set[tuple[str, str, str, str]] = set()
    for (exchange, inbox, topic), found in topics.items():
        recorded = record_arrivals(cache[exchange].meta, inbox, topic, found)
        new.update((exchange, inbox, topic, name) for name in recorded)
    outcomes = []
    for item in items:
        key = (item.exchange.name, item.inbox, item.topic, item.name)
        outcomes.append(Outcome.WRITTEN if key in new else Outcome.SAME)
        new.discard(key)  # a second receipt for it in this run is a redelivery
    return outcomes


# The kinds whose runs are materialised together, and how.
BATCHED_KINDS = {KIND_ENTRY: materialise_entries, KIND_RECEIPT: materialise_receipts}


def materialise_batch(
    items: list[Incoming], exchanges: dict[str, Exchange] | None = None
) -> list[Outcome]:
    """Materialise a run of messages of one kind in ``BATCHED_KINDS``, its writes shared."""
    return BATCHED_KINDS[items[0].kind](items, exchanges)


def _move_topic(ex: Exchange, topic: str, to_done: bool) -> None:
    """Move both sides' copies of ``topic`` into ``done/`` (or back), as the tick does; a copy
    already in place stays, and nothing is moved over an existing folder."""
    for side in ex.sides:
        inbox = ex.inbox(side)
        live, archived = inbox / topic, inbox / DONE / topic
        src, dst = (live, archived) if to_done else (archived, live)
        if not src.is_dir() or os.path.islink(src):
            continue
        ex.make_dir(dst.parent, side)
        try:
            safe_move(src, dst)
        except (Conflict, SymlinkRefused) as e:
            log.warning("not moving %s: %s (settle it by hand)", src, e)


def _held(ex: Exchange, item: Incoming) -> Outcome:
    inbox = ex.inbox(item.inbox)
    live = inbox / item.topic
    path = live / HELD_NAME
    if item.delete:
        try:
            path.unlink()
        except FileNotFoundError:
            return Outcome.SAME
        fsync_dir(live)
        return Outcome.WRITTEN
    if not live.is_dir():
        if (inbox / DONE / item.topic).is_dir():
            return Outcome.STALE  # archived here already: no HELD.md ever reaches done/
        ex.make_dir(inbox, item.inbox)
        ex.make_dir(live, item.inbox)
    atomic_write(path, item.data, mode=ex.file_mode(item.inbox))
    return Outcome.WRITTEN


def materialise(
    item: Incoming, revisions: dict[str, int], exchanges: dict[str, Exchange] | None = None
) -> Outcome:
    """Write ``item`` durably on this host; ``revisions`` holds the revisions in place (keyed
    by ``Incoming.key``) and is updated. A receipt is recorded for the tick.

    Raises ``OSError`` (the caller leaves the message unacknowledged, to be redelivered).
    """
    cache = exchanges if exchanges is not None else {}
    ex = cache.get(item.exchange.name)
    if ex is None:
        ex = cache[item.exchange.name] = load_exchange(item.exchange.root)
    if item.kind == KIND_ENTRY:
        return _entry(ex, item)
    if item.kind == KIND_VERSION:
        return _version(ex, item)
    if item.kind == KIND_RECEIPT:
        return materialise_receipts([item], cache)[0]
    if item.rev <= revisions.get(item.key, 0):
        return Outcome.STALE
    if item.kind == KIND_STATE:
        ex.make_dir(ex.inbox(item.inbox), item.inbox)
        path = _topic_dir(ex, item) / STATE_NAME
        atomic_write(path, item.data, mode=ex.file_mode(item.inbox))
        outcome = Outcome.WRITTEN
    elif item.kind == KIND_HELD:
        outcome = _held(ex, item)
    elif item.kind == KIND_INDEX:
        atomic_write(ex.root / INDEX_NAME, item.data, mode=0o644)
        outcome = Outcome.WRITTEN
    else:
        assert item.kind == KIND_PLACE
        _move_topic(ex, item.topic, item.data == PLACE_DONE)
        outcome = Outcome.WRITTEN
    revisions[item.key] = item.rev
    return outcome

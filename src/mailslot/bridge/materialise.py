"""Putting what a peer wrote onto this host's disk, so local agents read it like a local file.

An entry is created like every message: temp, fsync, link into place (never over an existing
name), directory fsync -- all before the bridge acknowledges the message, so an acknowledged
entry is on disk. A name that exists already is compared: the same bytes are a redelivery and
are skipped; different bytes are never written over the file -- they go beside it as a visible
``<name>.<digest>.conflict`` and the caller raises an alert. STATE.md has one writer (its side),
so the highest revision wins: an older or equal revision is skipped, a newer one replaces the
file atomically.

Local watchers wake on the link or rename exactly as on a local send.
"""

from __future__ import annotations

import hashlib
from enum import Enum
from pathlib import Path

from mailslot.bridge.wire import KIND_ENTRY, KIND_STATE, Incoming
from mailslot.core.errors import Conflict
from mailslot.core.fsio import atomic_create, atomic_write, read_regular
from mailslot.exchange.layout import Exchange, load_exchange

__all__ = ["Outcome", "conflict_name", "materialise"]


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
    inbox = ex.inbox(item.inbox)
    ex.make_dir(inbox, item.inbox)
    topic = inbox / item.topic
    ex.make_dir(topic, item.inbox)
    return topic


def materialise(
    item: Incoming, revisions: dict[str, int], exchanges: dict[str, Exchange] | None = None
) -> Outcome:
    """Write ``item`` durably on this host; ``revisions`` holds the STATE revisions in place
    (keyed by ``<exchange>/<relative path>``) and is updated.

    Raises ``OSError`` (the caller leaves the message unacknowledged, to be redelivered).
    """
    cache = exchanges if exchanges is not None else {}
    ex = cache.get(item.exchange.name)
    if ex is None:
        ex = cache[item.exchange.name] = load_exchange(item.exchange.root)
    topic = _topic_dir(ex, item)
    path = topic / item.name
    mode = ex.file_mode(item.inbox)
    if item.kind == KIND_ENTRY:
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
    assert item.kind == KIND_STATE
    key = f"{item.exchange.name}/{item.relpath}"
    if item.rev <= revisions.get(key, 0):
        return Outcome.STALE
    atomic_write(path, item.data, mode=mode)
    revisions[key] = item.rev
    return Outcome.WRITTEN

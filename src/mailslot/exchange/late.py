"""Entries that arrived in an archived topic after the acknowledgement its archive stood on.

Archiving moves a topic into ``done/``, where no poller looks (the archive race: a reply
filed before it was read). The tick moves a topic under the send lock and re-checks each
directory just before the move, so no ``mailslot send`` can land in between; but a hand writer
that skips the lock can still land an entry in the instant between the re-check and the move, or
write into ``done/`` itself. The guard archived only because every entry pre-dated the reader's
last STATE.md update, so an entry that arrived at or after that update has not been read: it is
an ``unseen`` debt for the reader (sweep, monitor, INDEX.md) until the reader re-affirms (writes
its STATE.md again, in ``done/``, with a fresh ``updated_at``) or reopens the topic.

The same-second rule of the guard applies (``guard.acknowledged_within_second``). A topic whose
reader has no STATE.md, or one without a readable ``updated_at``, is left alone: the tick never
archives such a topic, so it is not this race.

Cheap enough to run on every sweep, monitor and tick over thousands of archived topics: per topic
and reader, one ``stat`` of the reader's copy and one of its STATE.md. A directory whose mtime is
not newer than STATE.md's ctime has had no name added since STATE.md was written (a create or a
rename into a directory changes its mtime), so nothing is read; otherwise its entries are listed
and stat'd, and a file is read only when an entry arrived after STATE.md was written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime

from mailslot.core.fsio import written_ns
from mailslot.exchange.guard import acknowledged_by, acknowledged_within_second
from mailslot.exchange.inbox import peek_entry, peek_state
from mailslot.exchange.index import Debt
from mailslot.exchange.layout import DONE, STATE_NAME, Exchange
from mailslot.exchange.listing import arrivals, list_dir, topic_names

__all__ = ["late_debts"]


def late_debts(
    ex: Exchange, readers: Iterable[str], archived: Iterable[str] | None = None
) -> list[Debt]:
    """An ``unseen`` debt per archived topic and reader (in ``readers``) whose ``done/`` copy holds
    an entry that arrived at or after the reader's last STATE.md update; the newest such entry is
    named. ``archived``: the topic names to look at (default: every name in the reader's
    ``done/``). Reads only; never raises for layout."""
    out = []
    for reader in readers:
        writer = ex.other(reader)
        mine = ex.inbox(reader) / DONE
        names = topic_names(mine) if archived is None else archived
        for name in sorted(names):
            debt = _late_in(f"{mine}/{name}", f"{ex.inbox(writer)}/{DONE}/{name}")
            if debt is not None:
                out.append(Debt(name, reader, "unseen", debt))
    return out


def _late_in(copy: str, other: str) -> str | None:
    state = f"{other}/{STATE_NAME}"  # the reader's own STATE.md, in the writer's inbox
    try:
        dir_mtime = os.lstat(copy).st_mtime_ns
        state_ctime = written_ns(os.lstat(state))
    except OSError:
        return None
    if dir_mtime <= state_ctime:
        return None  # no name arrived since the reader last wrote its STATE.md
    d = list_dir(copy, os.path.basename(copy), True)
    arrived = arrivals(d)
    if not arrived or arrived[-1][0] < state_ctime:
        return None  # every entry arrived before it (the name since was the writer's STATE.md)
    ack = peek_state(state)
    if ack.updated_at is None:
        return None
    acked = acknowledged_by(ack.updated_at, ack.ctime_ns)  # never past its own writing
    ack_ns = int(acked.timestamp()) * 1_000_000_000 + acked.microsecond * 1000
    for ctime, _, name in reversed(arrived):
        if ctime < ack_ns:
            return None  # arrived before the acknowledgement: read
        when = datetime.fromtimestamp(ctime // 1_000_000 / 1000, UTC)
        at = peek_entry(d.file(name)).at
        if at is not None and at > when:
            when = at
        if not acknowledged_within_second(ack.updated_at, ack.ctime_ns, when, ctime):
            return name
    return None

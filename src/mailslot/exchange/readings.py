"""What the tick reads of each topic in one run, each file at most once.

A file's reading (``scan.Parsed``: its time, its word, why it does not read) is kept in the tick
state by the file's ``(size, mtime)`` and reused while that is unchanged, so a tick with nothing
new opens no file. From the readings come each side's status and the topic's last activity
(``statuses``), the guard's inputs (``guard_side``: needed only when both sides are done), and
each side's newest ``action: required`` entry the other side has not answered (``owed``).

An entry arrives when its ctime says, except on an exchange bridged across hosts: there an entry
whose reader is on another host arrived when that host's receipt says (``arrival``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mailslot.exchange.arrivals import Bridged, arrivals
from mailslot.exchange.guard import GuardSide
from mailslot.exchange.index import (
    Owed,
    answers,
    counts_as_required,
    owed_entry,
    short_error,
    unreadable_detail,
)
from mailslot.exchange.layout import STATE_NAME, Exchange
from mailslot.exchange.listing import EntryName
from mailslot.exchange.scan import (
    PARSED,
    Parsed,
    Required,
    SideCopy,
    TopicScan,
    cached,
    parse_file,
)

__all__ = ["Readings"]


def _dt(us: int | None) -> datetime | None:
    return datetime.fromtimestamp(us / 1_000_000, UTC) if us is not None else None


class Readings:
    """This run's readings, over the last run's records (``prev_copies``)."""

    def __init__(
        self, ex: Exchange, prev_copies: dict[str, list[Any]], bridged: Bridged | None
    ) -> None:
        self.ex = ex
        self.prev_copies = prev_copies
        self.bridged = bridged
        self.parsed: dict[str, dict[str, list[Any]]] = {}  # copy key -> {name: kept reading}

    def parse(self, scan: TopicScan, inbox_side: str, name: str) -> Parsed | None:
        """File ``name`` of this topic's copy in ``to-<inbox_side>/``, read once per run, and not
        at all while its ``(size, mtime)`` matches the reading the last run kept."""
        copy = scan.copies.get(inbox_side)
        sig = copy.files.get(name) if copy is not None else None
        if copy is None or sig is None:
            return None
        mine = self.parsed.get(copy.key)
        if mine is None:
            mine = self.parsed[copy.key] = {}
        got = mine.get(name)
        if got is None:
            prev = copy.trusted or self.prev_copies.get(copy.key)
            got = prev[PARSED].get(name) if prev is not None else None
            ctime = copy.ctimes.get(name)  # known for a listed copy's entries
            if got is None or cached(got, sig, ctime) is None:
                where = Path(copy.dir, name)
                got = parse_file(where, self.ex.writer_of(inbox_side)).to_list(sig, ctime)
            elif ctime is not None and (len(got) < 6 or got[5] is None):
                got = [*got[:5], ctime]  # kept from now on with its ctime
            mine[name] = got
        return Parsed.from_list(got)

    def owed(self, scan: TopicScan, inbox_side: str) -> Owed | None:
        """The newest ``action: required`` entry in this copy that the reader's own last entry
        does not answer (``index.owed_entry``: arrival order, never number alone). Only entries
        that arrived after that answer are parsed, newest first; the result is cached per copy."""
        copy = scan.copies.get(inbox_side)
        if copy is None:
            return None
        reader = scan.copies.get(self.ex.other(inbox_side))  # the reader's own entries
        last = reader.last() if reader is not None else None
        if not copy.req_known:

            def required(name: str) -> bool:
                got = self.parse(scan, inbox_side, name)  # an action that does not read counts
                return got is not None and counts_as_required(got.word)

            arrived = ((copy.ctimes.get(n, 0), number, n) for number, _, n in copy.entries)
            owed = owed_entry(arrived, last, required)
            copy.req = None
            if owed is not None:
                ctime, number, fname = owed
                sender = next(s for _, s, n in copy.entries if n == fname)
                copy.req = Required(number, sender, fname, ctime)
            copy.req_known = True
        req = copy.req
        if req is None or answers(last, (req.ctime_ns, req.number, req.name)):
            return None
        got = self.parse(scan, inbox_side, req.name)
        detail = None
        if got is None or got.word is None:
            detail = unreadable_detail(req.name, got.error if got is not None else "gone")
        return Owed(req.number, req.name, detail)

    def statuses(self, scan: TopicScan) -> tuple[dict[str, str], datetime | None]:
        """Each side's status (its STATE.md; missing is ``open``, unreadable ``unknown``) and
        the topic's last activity (the later of each newest entry's ``at`` and its arrival, to
        the millisecond as STATE.md times are written)."""
        status: dict[str, str] = {}
        last: int | None = None
        for writer in self.ex.sides:
            inbox_side = self.ex.other(writer)  # a side's entries and STATE.md: the other inbox
            st = self.parse(scan, inbox_side, STATE_NAME)
            status[writer] = (st.word or "unknown") if st is not None else "open"
            copy = scan.copies.get(inbox_side)
            top = copy.top if copy is not None else None
            if copy is None or top is None:
                continue
            ent = self.parse(scan, inbox_side, top.name)
            if ent is not None and ent.time_us is not None:
                arrived_ns: int | None = copy.top_ctime
                if self.bridged is not None:
                    arrived_ns, _ = self.arrival(scan, inbox_side, copy, top)
                when = max(ent.time_us, arrived_ns // 1_000_000 * 1000 if arrived_ns else 0)
                last = when if last is None or when > last else last
        return status, _dt(last)

    def arrival(
        self, scan: TopicScan, inbox_side: str, copy: SideCopy, top: EntryName
    ) -> tuple[int | None, str | None]:
        """When ``top`` reached its reader (ns), and why that is not known when it is not: its
        ctime here, or, bridged with the reader on another host, what that host's receipt says."""
        if self.bridged is None or not self.bridged.off_home(inbox_side):
            return copy.top_ctime, None
        arrived_ns = arrivals(self.ex.meta, inbox_side, scan.name).get(top.name)
        return arrived_ns, None if arrived_ns else "no arrival receipt from its reader's host yet"

    def guard_side(self, scan: TopicScan, writer: str) -> GuardSide:
        """What the guard needs from ``writer``: its STATE.md and its own newest entry."""
        inbox_side = self.ex.other(writer)
        st = self.parse(scan, inbox_side, STATE_NAME)
        copy = scan.copies.get(inbox_side)
        top = copy.top if copy is not None else None
        ent = self.parse(scan, inbox_side, top.name) if top is not None else None
        arrived_ns, unknown = (
            self.arrival(scan, inbox_side, copy, top) if copy and top else (None, None)
        )
        # arrival to the millisecond, as STATE.md times are written
        arrived = arrived_ns // 1_000_000 * 1000 if arrived_ns else None
        # another host's STATE.md: its ctime here is when it arrived, not when it was written
        remote_state = self.bridged is not None and self.bridged.off_home(writer)
        return GuardSide(
            status=(st.word or "unknown") if st else "open",
            updated_at=_dt(st.time_us) if st else None,
            state_error=st.error if st and st.word == "done" else None,
            newest=top.name if top else None,
            newest_at=_dt(ent.time_us) if ent else None,
            arrived_at=_dt(arrived) if arrived else None,
            arrived_ns=arrived_ns,
            state_ctime_ns=(copy.state_ctime or None)
            if copy is not None and not remote_state
            else None,
            arrival_unknown=unknown,
            newest_error=short_error(ent.error, top.name) if ent and ent.error and top else None,
        )

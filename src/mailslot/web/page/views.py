"""What each page shows, read through the channels' own functions (never a second copy of their
rules): ``exchange.overview.topic_summary`` for statuses, counts and holds, ``exchange.sweep``
(``topic_view``) and ``exchange.late`` for who owes what (the same answer as ``exchange sweep``
and INDEX.md), ``chat.status``/``read``, ``bus.log``/``tasks``/``outbox``/``owners`` and
``web.peer.inbox_messages``.

An exchange's table is kept per topic and current by file events: both inboxes, their ``done/``
and every topic directory in them are watched (``core.wait.Watch``, each armed before it is
listed). A new entry, STATE.md, HELD.md or archive reads again only the topics whose directories
had events; events lost (a full kernel queue, polling) read the whole exchange again. The
doctor's verdict and the holds record are compared by their change time. A request that finds
nothing changed costs no disk work; a stale view is brought up to date before it is shown, or,
where that is expected to take over ``SYNC_BUILD_MAX_S`` (the whole of a 10,000-topic
exchange), in the background while the page shows the last view and when it was read.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time, now
from mailslot.core.fsio import read_regular
from mailslot.exchange.doctor import VERDICT_NAME
from mailslot.exchange.holds import HOLDS_NAME, Hold, load_holds
from mailslot.exchange.late import late_debts
from mailslot.exchange.layout import DONE, Exchange
from mailslot.exchange.listing import ARCHIVED, TopicDir, list_dir, topic_names
from mailslot.exchange.monitor import HEARTBEAT_STALE, heartbeat_age
from mailslot.exchange.overview import topic_summary
from mailslot.exchange.sweep import topic_state_warnings, topic_view
from mailslot.web.page.timepic import TopicMarks

__all__ = [
    "DOCTOR_FILE",
    "Doctor",
    "ExchangeView",
    "Heartbeat",
    "TopicRow",
    "ViewCache",
    "filter_rows",
    "read_doctor",
]

# Where ``exchange doctor`` records its last verdict, beside the heartbeat.
DOCTOR_FILE = VERDICT_NAME
# A doctor verdict is a few hundred bytes; anything larger is not one.
DOCTOR_FILE_MAX = 64 * 1024
FILTERS = ("all", "waiting", "held", "archived", "mine")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Debt:
    """Something one side owes on a topic, as ``sweep`` says it."""

    side: str
    reason: str
    entry: str | None


@dataclass(frozen=True)
class TopicRow:
    """One topic in the exchange table."""

    name: str
    where: str
    status: dict[str, str]
    counts: dict[str, int]
    last_activity: datetime | None
    held: tuple[str, ...]
    debts: tuple[Debt, ...]


@dataclass(frozen=True)
class Heartbeat:
    """The tick's last beat: when, and whether it is older than the monitor allows."""

    at: str | None
    age_minutes: float | None
    stale: bool


@dataclass(frozen=True)
class Doctor:
    """The doctor's last recorded verdict (``ran_at`` None: never run here)."""

    ran_at: str | None
    ok: bool | None
    failures: tuple[str, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class ExchangeView:
    """An exchange as the page shows it: every topic row and the totals per side."""

    sides: tuple[str, str]
    rows: list[TopicRow]
    open_count: dict[str, int]
    debt_count: dict[str, int]
    held_count: int
    heartbeat: Heartbeat
    doctor: Doctor
    warnings: list[str] = field(default_factory=list)


def read_doctor(ex: Exchange) -> Doctor:
    """The doctor's recorded verdict; "never run" when there is none or it does not read."""
    try:
        doc = json.loads(read_regular(ex.meta / DOCTOR_FILE, DOCTOR_FILE_MAX))
    except (OSError, ValueError):
        return Doctor(None, None, (), ())
    if not isinstance(doc, dict):
        return Doctor(None, None, (), ())
    checks = doc.get("checks")
    if not isinstance(checks, list):
        checks = []
    names: dict[str, list[str]] = {"fail": [], "warn": []}
    for check in checks:
        if isinstance(check, dict) and check.get("status") in names:
            names[str(check["status"])].append(str(check.get("name", "?")))
    ran = doc.get("ran_at")
    return Doctor(
        str(ran) if isinstance(ran, str) else None,
        bool(doc.get("ok")),
        tuple(names["fail"]),
        tuple(names["warn"]),
    )


def _heartbeat(ex: Exchange) -> Heartbeat:
    beat = heartbeat_age(ex)
    if beat is None:
        return Heartbeat(None, None, True)
    at, age = beat
    return Heartbeat(format_time(at), age.total_seconds() / 60, age > HEARTBEAT_STALE)


def _order(row: TopicRow) -> tuple[bool, float, str]:
    """Most recently active first, topics never active last, then by name."""
    at = row.last_activity
    return (at is None, -(at or _EPOCH).timestamp(), row.name)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class _Table:
    """What a view is made of, kept per topic so a change reads again only its topics: the
    topic directories known in each inbox and its ``done/`` (by inbox side and archived or
    not), each topic's row, the rows in the view's order and the totals per side (both kept as
    rows come and go), STATE.md warnings, the time picture's marks."""

    sides: tuple[str, str]
    names: dict[tuple[str, bool], set[str]]
    rows: dict[str, TopicRow] = field(default_factory=dict)
    order: list[tuple[bool, float, str]] = field(default_factory=list)  # sorted ``_order``s
    open_count: dict[str, int] = field(default_factory=dict)
    debt_count: dict[str, int] = field(default_factory=dict)
    held_count: int = 0
    warnings: dict[str, list[str]] = field(default_factory=dict)
    marks: dict[str, TopicMarks | None] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)  # topics with a HELD.md: read again with holds

    def __post_init__(self) -> None:
        self.open_count = dict.fromkeys(self.sides, 0)
        self.debt_count = dict.fromkeys(self.sides, 0)

    def put(self, row: TopicRow) -> None:
        """Add ``row`` (in place of the topic's last one)."""
        self.drop(row.name)
        self.rows[row.name] = row
        bisect.insort(self.order, _order(row))
        self._count(row, 1)

    def drop(self, name: str) -> None:
        """Take topic ``name``'s row out, if it has one."""
        row = self.rows.pop(name, None)
        if row is not None:
            del self.order[bisect.bisect_left(self.order, _order(row))]
            self._count(row, -1)

    def _count(self, row: TopicRow, sign: int) -> None:
        for side in self.sides:
            if row.where != ARCHIVED and row.status.get(side) != "done":
                self.open_count[side] += sign
        for d in row.debts:
            if d.side in self.debt_count:
                self.debt_count[d.side] += sign
        if row.held:
            self.held_count += sign


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


# A rebuild expected to take longer than this is done in the background, and the page shows the
# previous view, saying when it was read, until it is ready (a 10,000-topic exchange read whole).
SYNC_BUILD_MAX_S = 1.0
# A watcher nobody asked for a view for this long stops (its inotify watches go with it).
WATCH_IDLE_S = 600.0


class _Kept:
    """One exchange's view kept current by file events, topic by topic.

    A follower thread takes the watch's events (``core.wait.Watch.take_changes``: which armed
    directories had events) and keeps them as pending. The next request reads again only what
    they name: an inbox or ``done/`` that changed is listed again and its topics compared with
    the last listing (a topic created, archived or removed); a topic directory that changed has
    its row, debts, warnings and picture marks read again. Events lost (a full kernel queue,
    polling, a path the table does not know) read the whole exchange again, as does the first
    request; so does a request after the watcher stopped. Every directory is armed before it is
    listed, so an entry landing while one is read is an event for the next update.
    """

    def __init__(self, ex: Exchange, stop: threading.Event) -> None:
        self.ex = ex
        self.stop = stop
        self.lock = threading.Lock()  # the pending changes, between the follower and a build
        self.paths: set[Path] = set()  # directories with events not yet read
        self.topics: set[str] = set()  # topics written through the page, not yet read
        self.whole = True  # what changed is not known: read everything
        self.build_lock = threading.Lock()
        self.table: _Table | None = None
        self.view: ExchangeView | None = None
        self.picture = ""
        self.holds_at = -1  # the holds record's mtime the table was read with
        self.doctor_at = -1
        self.built_at: datetime | None = None
        self.whole_s = 0.0  # how long reading the whole exchange took last time
        self.asked = time.monotonic()
        self.watch: Any = None
        self.rebuilding = False

    # -- events ------------------------------------------------------------------------------
    def _arm(self) -> Any:
        """The watch, started (with its follower) if there is none."""
        from mailslot.core.wait import Watch

        if self.watch is None:
            with self.lock:
                self.whole = True  # nothing was watched until now
            self.watch = Watch()
            threading.Thread(target=self._follow, args=(self.watch,), daemon=True).start()
        return self.watch

    def _follow(self, watch: Any) -> None:
        try:
            while time.monotonic() - self.asked < WATCH_IDLE_S and not self.stop.is_set():
                if not watch.wait(1.0):
                    continue
                changed = watch.take_changes()
                with self.lock:
                    if changed is None:
                        self.whole = True
                    else:
                        self.paths.update(changed)
        finally:
            self.watch = None
            watch.close()
            with self.lock:
                self.whole = True  # nobody is watching: the next request reads everything

    def mark(self, topic: str | None) -> None:
        """``topic`` was written through the page (None: something was): read it with the next
        request, without waiting for its file event."""
        with self.lock:
            if topic is None:
                self.whole = True
            else:
                self.topics.add(topic)

    def _changes(self) -> tuple[bool, set[Path], set[str]]:
        """What changed since the last build (whole, directories, topics), taken."""
        with self.lock:
            taken = (self.whole, self.paths, self.topics)
            self.whole, self.paths, self.topics = False, set(), set()
        return taken

    def _pending(self) -> int | None:
        """How many topics the next build reads: None for all of them, 0 when it is current."""
        if self.view is None or self.watch is None:
            return None
        with self.lock:
            if self.whole:
                return None
            n = len(self.paths) + len(self.topics)
        moved = _mtime(self.ex.meta / HOLDS_NAME) != self.holds_at
        if moved and self.table is not None:
            n += len(self.table.held) + 1
        if _mtime(self.ex.meta / DOCTOR_FILE) != self.doctor_at:
            n += 1
        if self.built_at is not None and self.built_at.date() != now().date():
            n += 1  # the picture's days moved
        return n

    # -- reading -------------------------------------------------------------------------------
    def _tops(self) -> dict[Path, tuple[str, bool]]:
        return {
            top: (side, archived)
            for side in self.ex.sides
            for top, archived in ((self.ex.inbox(side), False), (self.ex.inbox(side) / DONE, True))
        }

    def _listed(self, watch: Any, top: Path) -> set[str]:
        watch.add(top)  # armed before it is listed
        return set(topic_names(top))

    def _read(
        self,
        watch: Any,
        table: _Table,
        name: str,
        holds: dict[str, Hold],
        late: dict[str, list[Debt]] | None = None,
    ) -> None:
        """Read topic ``name`` again into ``table`` (its row is dropped if it is gone);
        ``late``: the late debts of every archived topic, read at once (else read here)."""
        ex = self.ex
        pair: dict[str, TopicDir] = {}
        for side in ex.sides:
            live, done = name in table.names[(side, False)], name in table.names[(side, True)]
            for archived, there in ((False, live), (True, done)):
                if there:
                    watch.add(_topic_dir(ex, side, archived, name))  # armed before it is listed
            if live or done:  # a live copy wins over a stale one in done/ (topic_pairs' rule)
                pair[side] = list_dir(_topic_dir(ex, side, not live, name), name, not live)
        table.marks.pop(name, None)
        table.warnings.pop(name, None)
        table.held.discard(name)
        if not pair:
            table.drop(name)
            return
        summary = topic_summary(ex, name, pair, holds)
        debts: list[Debt] = []
        if summary.where != ARCHIVED:  # a debt of a live topic, as sweep finds it
            view = topic_view(ex, name, pair)
            debts += [Debt(d.side, d.reason, d.entry) for d in view.debts]
            if "unknown" in view.status.values():
                table.warnings[name] = topic_state_warnings(ex, pair)
        if late is None:
            late = _late(ex, [name])
        debts += late.get(name, [])
        if any(d.held for d in pair.values()):
            table.held.add(name)
        table.put(
            TopicRow(
                name,
                summary.where,
                summary.status,
                summary.counts,
                summary.last_activity,
                tuple(summary.held),
                tuple(debts),
            )
        )

    def _read_whole(self, watch: Any) -> _Table:
        tops = self._tops()
        table = _Table(
            self.ex.sides, {where: self._listed(watch, top) for top, where in tops.items()}
        )
        holds = load_holds(self.ex)
        late = _late(self.ex, None)
        for name in sorted(set[str]().union(*table.names.values())):
            self._read(watch, table, name, holds, late)
        return table

    def _update(self, watch: Any, table: _Table, paths: set[Path], topics: set[str]) -> bool:
        """Read again what ``paths`` and ``topics`` name; False when a path is not one the
        table knows (the whole exchange is read instead)."""
        tops = self._tops()
        names = set(topics)
        if topics:  # written through the page: its listing may not have had its event yet
            paths = paths | tops.keys()
        for path in paths:
            if path in tops:
                listed = self._listed(watch, path)
                names |= listed ^ table.names[tops[path]]
                table.names[tops[path]] = listed
            elif path.parent in tops:
                names.add(path.name)
            else:
                return False
        holds_at = _mtime(self.ex.meta / HOLDS_NAME)
        if holds_at != self.holds_at:  # the holds record vouches for every HELD.md
            names |= table.held
        holds = load_holds(self.ex)
        for name in names:
            self._read(watch, table, name, holds)
        return True

    def build(self) -> None:
        """Bring the view up to date: what changed, or everything when that is not known."""
        with self.build_lock:
            try:
                if self._pending() != 0:
                    self._build()
            finally:
                self.rebuilding = False

    def _build(self) -> None:
        watch = self._arm()
        whole, paths, topics = self._changes()
        try:
            holds_at = _mtime(self.ex.meta / HOLDS_NAME)
            self.doctor_at = _mtime(self.ex.meta / DOCTOR_FILE)
            table = self.table
            started = time.monotonic()
            if whole or table is None or not self._update(watch, table, paths, topics):
                table = self._read_whole(watch)
                self.whole_s = time.monotonic() - started
            self.holds_at = holds_at
            view = _assemble(self.ex, table)
            self.picture = _picture(self.ex, view, table.marks)
            self.table, self.view = table, view
            self.built_at = now()
        except BaseException:
            with self.lock:
                self.whole = True  # the table may be half read: read it all next time
            raise

    def _background(self) -> None:
        try:
            self.build()
        except Exception:  # a failed rebuild leaves the last view; the next request retries
            log.exception("could not read the view of %s", self.ex.root)

    def current(self) -> tuple[ExchangeView, datetime | None]:
        """The view, and when it was read if it is not current (a rebuild is running)."""
        self.asked = time.monotonic()
        pending = self._pending()
        if pending == 0 and self.view is not None:
            return self.view, None
        topics = len(self.table.rows) if self.table is not None else 0
        guess = self.whole_s if pending is None else self.whole_s * pending / max(1, topics)
        if self.view is None or (not self.rebuilding and guess <= SYNC_BUILD_MAX_S):
            self.build()
            assert self.view is not None
            return self.view, None
        if not self.rebuilding:
            self.rebuilding = True
            threading.Thread(target=self._background, daemon=True).start()
        return self.view, self.built_at


def _late(ex: Exchange, names: list[str] | None) -> dict[str, list[Debt]]:
    """The ``unseen`` debts (``late.late_debts``) of ``names`` (None: every archived topic)."""
    out: dict[str, list[Debt]] = {}
    for d in late_debts(ex, ex.sides, names):
        out.setdefault(d.topic, []).append(Debt(d.side, d.reason, d.entry))
    return out


def _topic_dir(ex: Exchange, side: str, archived: bool, name: str) -> Path:
    inbox = ex.inbox(side)
    return (inbox / DONE if archived else inbox) / name


def _assemble(ex: Exchange, table: _Table) -> ExchangeView:
    """The view of ``table``: its rows in order, the totals per side, the warnings."""
    return ExchangeView(
        ex.sides,
        [table.rows[name] for _, _, name in table.order],
        dict(table.open_count),
        dict(table.debt_count),
        table.held_count,
        _heartbeat(ex),
        read_doctor(ex),
        [w for name in sorted(table.warnings) for w in table.warnings[name]],
    )


class ViewCache:
    """Exchange views kept current by file events (``core.wait.Watch`` on every topic
    directory): a request that finds nothing changed costs no disk work at all. Safe across
    worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[Path, _Kept] = {}
        self._stop = threading.Event()

    def close(self) -> None:
        """Stop following file events (each watcher ends within a second)."""
        self._stop.set()

    def _of(self, ex: Exchange) -> _Kept:
        with self._lock:
            kept = self._kept.get(ex.root)
            if kept is None:
                kept = self._kept[ex.root] = _Kept(ex, self._stop)
        return kept

    def invalidate(self, ex: Exchange, topic: str | None = None) -> None:
        """``topic`` of ``ex`` was written through the page (None: something was): the next
        request reads it again, without waiting for its file event to reach the watcher."""
        self._of(ex).mark(topic)

    def exchange(self, ex: Exchange) -> ExchangeView:
        """The current view of ``ex`` (see ``as_of`` for one being rebuilt). Never raises."""
        view, _ = self._of(ex).current()
        return _aged(view, ex)  # the heartbeat's age moves with the clock, not the tree

    def as_of(self, ex: Exchange) -> datetime | None:
        """When the shown view of ``ex`` was read, while a newer one is being built; else None."""
        return self._of(ex).current()[1]

    def polled(self, ex: Exchange) -> bool:
        """Whether some directory of ``ex`` is polled, not watched (past the inotify watch
        limit): its changes show on the next request, each read whole, and the page says so."""
        watch = self._of(ex).watch
        return watch is not None and bool(watch.polling)

    def picture(self, ex: Exchange) -> str:
        """The exchange's time picture as SVG (``timepic``), drawn with its view."""
        kept = self._of(ex)
        kept.current()
        return kept.picture


def _picture(ex: Exchange, view: ExchangeView, marks: dict[str, TopicMarks | None]) -> str:
    from mailslot.web.page.timepic import draw, measure

    return draw(measure(ex, [(r.name, r.last_activity) for r in view.rows], marks))


def _aged(view: ExchangeView, ex: Exchange) -> ExchangeView:
    beat = _heartbeat(ex)
    if beat == view.heartbeat:
        return view
    return ExchangeView(
        view.sides,
        view.rows,
        view.open_count,
        view.debt_count,
        view.held_count,
        beat,
        view.doctor,
        view.warnings,
    )


def filter_rows(view: ExchangeView, which: str, side: str | None) -> list[TopicRow]:
    """The rows ``which`` selects: ``all`` live ones, ``waiting`` (someone owes), ``held``,
    ``archived``, or ``mine`` (``side`` owes); unknown filters select all live rows."""
    if which == "archived":
        return [r for r in view.rows if r.where == "archived"]
    live = [r for r in view.rows if r.where != "archived"]
    if which == "waiting":
        return [r for r in live if r.debts]
    if which == "held":
        return [r for r in live if r.held]
    if which == "mine":
        return [r for r in live if any(d.side == side for d in r.debts)] if side else []
    return live


def minutes_ago(at: datetime | None) -> str:
    """``at`` as a short age (``5 min``, ``3 h``, ``2 d``), or ``-``."""
    if at is None:
        return "-"
    age = now() - at
    if age < timedelta(hours=1):
        return f"{max(0, int(age.total_seconds() // 60))} min"
    if age < timedelta(days=2):
        return f"{int(age.total_seconds() // 3600)} h"
    return f"{age.days} d"

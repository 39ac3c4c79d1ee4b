"""What each page shows, read through the channels' own functions (never a second copy of their
rules): ``exchange.overview.topic_summaries`` for statuses, counts and holds, ``exchange.sweep``
for who owes what (the same answer as ``exchange sweep`` and INDEX.md), ``chat.status``/``read``,
``bus.log``/``tasks``/``outbox``/``owners`` and ``web.peer.inbox_messages``.

An exchange's table is cached and kept current by file events: every topic directory in both
inboxes and their ``done/`` is watched (``core.wait.Watch``, armed before the tree is read), and
a new entry, STATE.md, HELD.md or archive marks the view stale; the doctor's verdict and the
holds record are compared by their change time. A request that finds nothing changed costs no
disk work; a stale view is rebuilt before it is shown, or, where a rebuild took over
``SYNC_BUILD_MAX_S``, in the background while the page shows the last view and when it was read.
"""

from __future__ import annotations

import json
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
from mailslot.exchange.late import late_debts
from mailslot.exchange.layout import DONE, Exchange
from mailslot.exchange.listing import topic_pairs
from mailslot.exchange.monitor import HEARTBEAT_STALE, heartbeat_age
from mailslot.exchange.overview import topic_summaries
from mailslot.exchange.sweep import state_warnings, topic_view

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


def _build(ex: Exchange) -> ExchangeView:
    # Both sides' debts in one pass, composed as ``sweep`` composes them (``topic_view`` per
    # live topic, ``late_debts`` for archived ones), instead of one sweep per side.
    debts: dict[str, list[Debt]] = {}
    unknown = False
    for name, pair in topic_pairs(ex).items():
        view = topic_view(ex, name, pair)
        unknown = unknown or "unknown" in view.status.values()
        for d in view.debts:
            debts.setdefault(d.topic, []).append(Debt(d.side, d.reason, d.entry))
    for d in late_debts(ex, ex.sides):
        debts.setdefault(d.topic, []).append(Debt(d.side, d.reason, d.entry))
    warnings = state_warnings(ex) if unknown else []
    rows = [
        TopicRow(
            s.name,
            s.where,
            s.status,
            s.counts,
            s.last_activity,
            tuple(s.held),
            tuple(debts.get(s.name, ())),
        )
        for s in topic_summaries(ex, include_archived=True)
    ]
    rows.sort(key=lambda r: (r.last_activity is None, -(r.last_activity or _EPOCH).timestamp()))
    open_count = {
        side: sum(1 for r in rows if r.where != "archived" and r.status.get(side) != "done")
        for side in ex.sides
    }
    debt_count = {
        side: sum(1 for r in rows for d in r.debts if d.side == side) for side in ex.sides
    }
    return ExchangeView(
        ex.sides,
        rows,
        open_count,
        debt_count,
        sum(1 for r in rows if r.held),
        _heartbeat(ex),
        read_doctor(ex),
        warnings,
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _topic_dirs(ex: Exchange) -> list[Path]:
    """Every directory whose change can change the view: both inboxes, their ``done/``, and
    each topic directory in them (a new entry, STATE.md or HELD.md changes its directory)."""
    out: list[Path] = []
    for side in ex.sides:
        for top in (ex.inbox(side), ex.inbox(side) / DONE):
            out.append(top)
            try:
                with os.scandir(top) as it:
                    out += [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
    return out


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def meta_stamp(ex: Exchange) -> tuple[int, int]:
    """What the view shows from ``.mailslot/``: the doctor's verdict and the holds record (the
    heartbeat is read on every request; it moves with the clock)."""
    return (_mtime(ex.meta / DOCTOR_FILE), _mtime(ex.meta / "holds.json"))


# A rebuild that took longer than this is done in the background next time, and the page shows
# the previous view, saying when it was read, until it is ready (a 10,000-topic exchange).
SYNC_BUILD_MAX_S = 1.0
# A watcher nobody asked for a view for this long stops (its inotify watches go with it).
WATCH_IDLE_S = 600.0


class _Kept:
    """One exchange's view, the file events that say it is stale, and its rebuilds."""

    def __init__(self, ex: Exchange, stop: threading.Event) -> None:
        self.ex = ex
        self.stop = stop
        self.dirty = threading.Event()
        self.dirty.set()
        self.build_lock = threading.Lock()
        self.view: ExchangeView | None = None
        self.meta: tuple[int, int] | None = None
        self.picture = ""
        self.built_at: datetime | None = None
        self.build_s = 0.0
        self.asked = time.monotonic()
        self.watch: Any = None
        self.watcher: threading.Thread | None = None
        self.rebuilding = False

    def arm(self) -> None:
        """Watch every directory the view reads (before it is read: arm, then check)."""
        from mailslot.core.wait import Watch

        if self.watch is None:
            self.watch = Watch()
            self.watcher = threading.Thread(target=self._follow, daemon=True)
            self.watcher.start()
        for path in _topic_dirs(self.ex):
            self.watch.add(path)

    def _follow(self) -> None:
        watch = self.watch
        try:
            while time.monotonic() - self.asked < WATCH_IDLE_S and not self.stop.is_set():
                if watch.wait(1.0):
                    self.dirty.set()
        finally:
            self.watch = None
            watch.close()
            self.dirty.set()  # nobody is watching: the next request rebuilds

    def build(self) -> None:
        with self.build_lock:
            if not self.dirty.is_set() and self.meta == meta_stamp(self.ex):
                return
            self.arm()
            self.dirty.clear()  # an event from here on marks this build stale again
            meta = meta_stamp(self.ex)
            started = time.monotonic()
            view = _build(self.ex)
            picture = _picture(self.ex, view)  # with the view: a big one is built in background
            self.view, self.meta, self.picture = view, meta, picture
            self.built_at = now()
            self.build_s = time.monotonic() - started
            self.rebuilding = False

    def _background(self) -> None:
        try:
            self.build()
        except Exception:  # a failed rebuild leaves the last view; the next request retries
            self.rebuilding = False
            self.dirty.set()

    def current(self) -> tuple[ExchangeView, datetime | None]:
        """The view, and when it was read if it is not current (a rebuild is running)."""
        self.asked = time.monotonic()
        stale = (
            self.dirty.is_set()
            or self.meta != meta_stamp(self.ex)
            or self.watch is None
            or (self.built_at is not None and self.built_at.date() != now().date())  # the picture
        )
        if stale and (self.view is None or self.build_s <= SYNC_BUILD_MAX_S):
            self.build()
        elif stale:
            if not self.rebuilding:
                self.rebuilding = True
                threading.Thread(target=self._background, daemon=True).start()
            assert self.view is not None
            return self.view, self.built_at
        assert self.view is not None
        return self.view, None


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

    def invalidate(self, ex: Exchange) -> None:
        """Mark ``ex``'s view stale now: after a write made through the page, the next request
        must not beat the file event to the watcher."""
        self._of(ex).dirty.set()

    def exchange(self, ex: Exchange) -> ExchangeView:
        """The current view of ``ex`` (see ``as_of`` for one being rebuilt). Never raises."""
        view, _ = self._of(ex).current()
        return _aged(view, ex)  # the heartbeat's age moves with the clock, not the tree

    def as_of(self, ex: Exchange) -> datetime | None:
        """When the shown view of ``ex`` was read, while a newer one is being built; else None."""
        return self._of(ex).current()[1]

    def picture(self, ex: Exchange) -> str:
        """The exchange's time picture as SVG (``timepic``), drawn with its view."""
        kept = self._of(ex)
        kept.current()
        return kept.picture


def _picture(ex: Exchange, view: ExchangeView) -> str:
    from mailslot.web.page.timepic import draw, measure

    return draw(measure(ex, [(r.name, r.last_activity) for r in view.rows]))


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

"""What each page shows, read through the channels' own functions (never a second copy of their
rules): ``exchange.overview.topic_summaries`` for statuses, counts and holds, ``exchange.sweep``
for who owes what (the same answer as ``exchange sweep`` and INDEX.md), ``chat.status``/``read``,
``bus.log``/``tasks``/``outbox``/``owners`` and ``web.peer.inbox_messages``.

An exchange's table is cached, keyed by a stamp of its tree (the change time of every topic
directory in both inboxes and their ``done/``, the heartbeat, the holds and the doctor's
verdict): a new entry, a STATE.md, a HELD.md or an archive changes its directory, so the stamp
moves and the next request rebuilds the view. A request that finds the stamp unchanged costs a
listing of the tree, not a read of every topic.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time, now
from mailslot.core.fsio import read_regular
from mailslot.exchange.doctor import VERDICT_NAME
from mailslot.exchange.layout import DONE, Exchange
from mailslot.exchange.monitor import HEARTBEAT_NAME, HEARTBEAT_STALE, heartbeat_age
from mailslot.exchange.overview import topic_summaries
from mailslot.exchange.sweep import sweep

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
    since: str | None


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
    debts: dict[str, list[Debt]] = {}
    warnings: list[str] = []
    for side in ex.sides:
        result = sweep(ex, side)
        warnings += [w for w in result.warnings if w not in warnings]
        for owed in result.debts:
            d = owed.debt
            debts.setdefault(d.topic, []).append(
                Debt(side, d.reason, d.entry, format_time(owed.since) if owed.since else None)
            )
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


def _dir_stamp(path: Path, out: list[tuple[str, int]]) -> None:
    try:
        with os.scandir(path) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    out.append((entry.path, entry.stat(follow_symlinks=False).st_mtime_ns))
    except OSError:
        out.append((str(path), -1))


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def tree_stamp(ex: Exchange) -> tuple[Any, ...]:
    """A value that changes whenever anything the exchange view shows may have changed."""
    dirs: list[tuple[str, int]] = []
    for side in ex.sides:
        _dir_stamp(ex.inbox(side), dirs)
        _dir_stamp(ex.inbox(side) / DONE, dirs)
    metas = tuple(_mtime(ex.meta / n) for n in (HEARTBEAT_NAME, DOCTOR_FILE, "holds.json"))
    return (tuple(dirs), metas)


class ViewCache:
    """Exchange views kept until their tree's stamp moves; safe across worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._views: dict[Path, tuple[tuple[Any, ...], ExchangeView]] = {}
        self._pictures: dict[Path, tuple[tuple[Any, ...], str]] = {}

    def exchange(self, ex: Exchange) -> ExchangeView:
        """The current view of ``ex`` (rebuilt when its tree changed). Never raises for data."""
        stamp = tree_stamp(ex)
        with self._lock:
            held = self._views.get(ex.root)
        if held is not None and held[0] == stamp:
            view = held[1]
        else:
            view = _build(ex)
            with self._lock:
                self._views[ex.root] = (stamp, view)
        # The heartbeat's age moves with the clock, not the tree.
        return _aged(view, ex)

    def picture(self, ex: Exchange) -> str:
        """The exchange's time picture as SVG (``timepic``), redrawn when its tree changed or
        the day turned."""
        from mailslot.web.page.timepic import draw, measure

        view = self.exchange(ex)
        stamp = (tree_stamp(ex), now().date())
        with self._lock:
            held = self._pictures.get(ex.root)
        if held is not None and held[0] == stamp:
            return held[1]
        svg = draw(measure(ex, [(r.name, r.last_activity) for r in view.rows]))
        with self._lock:
            self._pictures[ex.root] = (stamp, svg)
        return svg


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

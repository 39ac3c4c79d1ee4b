"""``exchange sweep``: what the caller owes, computed from the tree exactly as INDEX.md computes it.

Each side's sweep only catches its own debts, so the sweep is run by each side for
itself, and it must agree with INDEX.md, which the tick renders from ``index.compute_debts``. This
module builds the same ``TopicView`` the tick builds (each side's status, newest entry and its
``action``, the holds) straight from the files, without the tick's state (which lives in
``.mailslot/`` where an agent may not read), and hands it to the same ``compute_debts``.

The debts (``index.compute_debts``): ``reply`` -- the other side's newest entry is
``action: required`` and the caller has written nothing after it (a STATE change is not an
answer, matching the rule that ``required`` keeps a topic open until answered); ``close`` -- the
other side is ``done`` and the caller is not; ``re-read`` -- a HELD.md waits in the caller's inbox;
``unseen`` -- an entry reached an archived topic of the caller's inbox unread (``late``). A
STATE.md whose status does not read (``Done``) is a warning naming the file and the value.
Nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mailslot.core.clock import format_time
from mailslot.exchange.holds import load_holds, trusted_hold
from mailslot.exchange.inbox import peek_entry, peek_state
from mailslot.exchange.index import (
    Arrival,
    Debt,
    Owed,
    TopicView,
    build_view,
    counts_as_required,
    owed_entry,
    unreadable_detail,
)
from mailslot.exchange.late import late_debts
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.listing import TopicDir, arrivals, topic_pairs

__all__ = [
    "OwedDebt",
    "SweepResult",
    "state_warnings",
    "sweep",
    "topic_state_warnings",
    "topic_view",
]


def _required_in(d: TopicDir) -> Callable[[str], bool]:
    """Whether an entry of ``d``, by file name, is owed a reply (a header read): ``action:
    required``, or an action that does not read (``index.counts_as_required``)."""
    return lambda fname: counts_as_required(peek_entry(d.file(fname)).action)


def topic_view(ex: Exchange, name: str, pair: dict[str, TopicDir]) -> TopicView:
    """The ``TopicView`` the tick builds for INDEX.md, built from the files (``index.build_view``):
    each side's status, count, newest required entry the other has not answered, and holds."""
    status: dict[str, str] = {}
    counts: dict[str, int] = {}
    arrived: dict[str, list[Arrival]] = {}
    for writer in ex.sides:
        d = pair.get(ex.other(writer))  # a side's files live in the other side's inbox
        status[writer] = peek_state(d.file(STATE_NAME)).status if d and d.has_state else "open"
        counts[writer] = len(d.entries) if d else 0
        arrived[writer] = arrivals(d) if d else []
    held: dict[str, str] = {}
    holds = load_holds(ex) if any(d.held for d in pair.values()) else {}
    for side, d in pair.items():
        hold = trusted_hold(holds, side, name, d.file(HELD_NAME)) if d.held else None
        if hold is not None and not d.archived:
            held[side] = hold.entry or HELD_NAME  # the entry to re-read, as the tick recorded it
    required: dict[str, Owed] = {}
    for writer in ex.sides:  # each side's newest required entry the other has not answered
        d = pair.get(ex.other(writer))
        if d is None:
            continue
        mine = arrived[ex.other(writer)]
        owed = owed_entry(arrived[writer], mine[-1] if mine else None, _required_in(d))
        if owed is not None:
            _, number, fname = owed
            peek = peek_entry(d.file(fname))
            detail = unreadable_detail(fname, peek.error) if peek.action is None else None
            required[writer] = Owed(number, fname, detail)
    return build_view(ex, name, status, counts, required=required, held=held)


@dataclass(frozen=True)
class OwedDebt:
    """A ``Debt`` with when it started (the owed entry's ``at``, the other side's ``done`` time)."""

    debt: Debt
    since: datetime | None

    def to_json(self) -> dict[str, Any]:
        """``{"topic", "reason", "side", "entry", "since"}`` (and ``detail`` when an entry does
        not read)."""
        return {**self.debt.to_json(), "since": format_time(self.since) if self.since else None}


@dataclass(frozen=True)
class SweepResult:
    """The caller's debts, oldest first."""

    agent: str
    side: str
    debts: list[OwedDebt]
    warnings: list[str] = field(default_factory=list)  # STATE.md files that do not read

    def to_json(self) -> dict[str, Any]:
        """``{"debts": [{"topic", "reason", "side", "entry", "since"}]}`` (fields are added, never
        renamed), plus ``"warnings": [...]`` when a STATE.md does not read."""
        out: dict[str, Any] = {"debts": [d.to_json() for d in self.debts]}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def _since(debt: Debt, pair: dict[str, TopicDir]) -> datetime | None:
    if debt.reason == "reply" and debt.entry:
        d = pair.get(debt.side)  # the other side's entries sit in the debtor's inbox
        if d is None:
            return None
        at = peek_entry(d.file(debt.entry)).at
        try:  # the later of 'at' and arrival (ctime): a back-dated entry is not an old debt
            ns = os.lstat(d.file(debt.entry)).st_ctime_ns
        except OSError:
            return at
        arrived = datetime.fromtimestamp(ns // 1_000_000 / 1000, UTC)
        return max(at, arrived) if at is not None else arrived
    if debt.reason == "close":
        d = pair.get(debt.side)
        return peek_state(d.file(STATE_NAME)).updated_at if d else None
    d = pair.get(debt.side)
    if d is None:
        return None
    try:
        return datetime.fromtimestamp(os.stat(d.file(HELD_NAME)).st_mtime, UTC)
    except OSError:
        return None


def sweep(ex: Exchange, agent: str) -> SweepResult:
    """``agent``'s side's debts over every live topic; ``Conflict`` for a stranger. Read only."""
    side = ex.side_of(agent)
    out = []
    warnings: list[str] = []
    for name, pair in topic_pairs(ex).items():
        view = topic_view(ex, name, pair)
        for debt in view.debts:
            if debt.side == side:
                out.append(OwedDebt(debt, _since(debt, pair)))
        if "unknown" in view.status.values():  # rare: say which file and what it says
            warnings += topic_state_warnings(ex, pair)
    for debt in late_debts(ex, [side]):  # entries that reached done/ unread
        where = ex.inbox(side) / DONE / debt.topic / (debt.entry or "")
        try:
            since = datetime.fromtimestamp(os.lstat(where).st_ctime_ns // 1_000_000 / 1000, UTC)
        except OSError:
            since = None
        out.append(OwedDebt(debt, since))
    out.sort(key=lambda d: (d.since is None, d.since.timestamp() if d.since else 0, d.debt.topic))
    return SweepResult(agent, side, out, warnings)


def topic_state_warnings(ex: Exchange, pair: dict[str, TopicDir]) -> list[str]:
    """``state_warnings`` for one topic's directories (inbox side -> ``TopicDir``)."""
    out = []
    for d in pair.values():
        if d.has_state:
            st = peek_state(d.file(STATE_NAME))
            if st.status == "unknown":
                where = os.path.relpath(d.file(STATE_NAME), ex.root)
                out.append(f"{where}: {st.error or 'unreadable'}; the topic is never archived")
    return out


def state_warnings(ex: Exchange) -> list[str]:
    """One line per live topic's STATE.md whose status does not read (``Done``, ``closed``, a
    broken file), naming the file and the value: unknown never archives, and never silently."""
    return [w for pair in topic_pairs(ex).values() for w in topic_state_warnings(ex, pair)]

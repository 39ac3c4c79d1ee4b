"""``exchange monitor``: a stable listing of what awaits the caller, for output-diffing schedulers.

Hermes' ``cron --monitor-script`` (and any cron wrapper) runs a cheap script every tick and wakes
the agent only when its output changes. The trap: a manual run of such a job updated the
scheduler's baseline and swallowed a real message. So the monitor keeps no baseline and writes
nothing at all -- no cursor, no state, no file in the exchange -- and its output is a pure function
of the tree: run it by hand as often as you like; the scheduler's own diff is the only memory.

"Awaits the caller" without a cursor, per live topic (caller side S, other side O):

* ``entry`` -- O wrote entries that arrived after S's own last entry (arrival order, never number
  alone: ``index.answers``) and dated (the later of its
  ``at`` and its arrival, the file's ctime, which O cannot back-date) after S's last STATE.md
  update (S has neither answered nor acknowledged them). Scoped to ``required``, only
  ``action: required`` ones count (an unreadable ``action`` counts, and only an answer clears
  it, never a STATE.md update: fail visible, as sweep owes it a reply). One line per
  topic names the newest such entry and how many there are, so each new arrival changes it.
* ``held`` -- a HELD.md the tick placed (``holds.json``) in S's inbox: the tick is holding the
  archive until S re-reads.
* ``close`` -- O is ``done`` and S is not (a real debt, not bookkeeping noise).
* ``unseen`` -- an entry in an archived topic of S's inbox arrived after S's last STATE.md
  update (``late``): it reached ``done/`` unread.
* ``state`` -- a STATE.md the monitor read (O's, or S's own while O is done) whose status is
  not one of open, in-progress, blocked, done (``Done`` too): it names the file and the value.
* ``tick`` -- the tick's heartbeat is older than ``stale_after``: nothing is being archived,
  indexed or committed (a dead timer is visible, not silent). Stable while it stays dead.

Only presence and those few fields are read (names, ``action``/``at``, ``status``/
``updated_at``), never whole bodies. Lines are sorted; the output is empty when nothing awaits.

Writing nothing, the monitor keeps nothing either; it reads what the tick keeps, read-only. While
the tick's heartbeat is fresh, a topic whose directories (mtime) and STATE.md files (size,
mtime) are as the tick last recorded them (``tickstate.load_monitor``) takes the lines the tick
worked out for it then with this same code (``kept_lines``); a topic that changed since, or
that the tick works out anew every run (a hold, both sides done, a stray, a copy in ``done/``),
is read here. An entry rewritten in place is seen when the tick's rotation lists its directory
again (within ten minutes), as the tick sees it.
Answering or acknowledging removes a line, which changes the output once more -- the price of
keeping no memory, and cheap next to a swallowed message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from mailslot.core.clock import FUTURE_SKEW, format_time, now
from mailslot.core.errors import InvalidName
from mailslot.core.gcpause import gc_paused
from mailslot.exchange.guard import acknowledged_by, acknowledged_within_second
from mailslot.exchange.holds import is_trusted, load_holds
from mailslot.exchange.inbox import peek_entry, peek_state
from mailslot.exchange.index import answers
from mailslot.exchange.late import late_debts
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.listing import (
    TopicDir,
    arrivals,
    list_dir,
    topic_mtimes,
    topic_names,
    topic_pairs,
)
from mailslot.exchange.tickstate import MonitorKept, load_monitor

__all__ = [
    "HEARTBEAT_STALE",
    "Awaiting",
    "MonitorResult",
    "heartbeat_age",
    "kept_lines",
    "monitor",
]

# The tick runs every 2 minutes; five missed runs is a dead timer, not a slow one.
HEARTBEAT_STALE = timedelta(minutes=10)
HEARTBEAT_NAME = "heartbeat"  # tick.HEARTBEAT; not imported so monitor stays light


@dataclass(frozen=True)
class Awaiting:
    """One thing awaiting the caller: ``entry``, ``held``, ``close``, ``unseen``, ``state`` or
    ``tick``."""

    kind: str
    topic: str | None
    entry: str | None = None
    action: str | None = None
    count: int = 0
    since: str | None = None
    detail: str | None = None

    def line(self, other: str) -> str:
        """The stable one-line form."""
        if self.kind == "entry":
            more = f" (+{self.count - 1} earlier)" if self.count > 1 else ""
            return f"{self.topic}: {self.entry} ({self.action or 'action?'}) awaits you{more}"
        if self.kind == "held":
            return f"{self.topic}: HELD.md -- re-read, then answer or re-affirm done"
        if self.kind == "close":
            return f"{self.topic}: {other} is done, you are not"
        if self.kind == "unseen":
            return (
                f"{self.topic}: {self.entry} arrived after the topic was archived, unread "
                "(in done/): read it, then reopen the topic or re-affirm done"
            )
        if self.kind == "state":
            return f"{self.topic}: {self.entry} does not read: {self.detail} (nothing archives)"
        return f"tick: last heartbeat {self.since}; the tick is not running"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class MonitorResult:
    """What awaits ``agent`` (side ``side``), in a fixed order."""

    agent: str
    side: str
    other: str
    scope: str
    awaiting: list[Awaiting]

    def text(self) -> str:
        """The stable listing (empty when nothing awaits)."""
        return "\n".join(a.line(self.other) for a in self.awaiting)

    def to_json(self) -> dict[str, Any]:
        """``{"agent", "side", "scope", "awaiting": [...]}``."""
        return {
            "agent": self.agent,
            "side": self.side,
            "scope": self.scope,
            "awaiting": [a.to_json() for a in self.awaiting],
        }


def heartbeat_age(ex: Exchange) -> tuple[datetime, timedelta] | None:
    """``(last beat, age)`` from the heartbeat file's mtime, or ``None`` if the tick never ran."""
    try:
        mtime = os.stat(ex.meta / HEARTBEAT_NAME).st_mtime
    except OSError:
        return None
    at = datetime.fromtimestamp(mtime, UTC)
    return at, now() - at


_NEVER = datetime.max.replace(tzinfo=UTC)


def _arrived(ns: int | None) -> datetime:
    """When the file arrived (its ctime, to the millisecond); a writer cannot back-date it."""
    if ns is None:
        return _NEVER  # cannot tell: never counts as acknowledged
    return datetime.fromtimestamp(ns // 1_000_000 / 1000, UTC)


def _entries_waiting(
    theirs: TopicDir, mine: TopicDir | None, scope: str
) -> list[tuple[str, str | None]]:
    ours = arrivals(mine) if mine is not None else []
    last = ours[-1] if ours else None
    # arrival order, never number alone (index.answers): a reused number answers nothing
    candidates = [a for a in arrivals(theirs) if not answers(last, a)]
    if not candidates:
        return []
    state = mine.file(STATE_NAME) if mine is not None and mine.has_state else None
    ack: datetime | None = None  # no STATE: nothing is acknowledged
    ack_ctime: int | None = None
    acked = False
    out = []
    for _, _, name in candidates:
        p = peek_entry(theirs.file(name))
        if scope == "required" and p.action == "fyi":
            continue
        if state is not None and not acked:  # read once, only when an entry that counts needs it
            acked = True
            peeked = peek_state(state)
            ack, ack_ctime = peeked.updated_at, peeked.ctime_ns
            if ack is not None and ack > now() + FUTURE_SKEW:
                ack = None  # a STATE from the future acknowledges nothing (fail visible)
            elif ack is not None:
                ack = acknowledged_by(ack, ack_ctime)  # never past its own writing
        if ack is not None and p.at is not None and p.action is not None:
            when = max(p.at, _arrived(p.arrived_ns))
            if when <= ack or acknowledged_within_second(ack, ack_ctime, when, p.arrived_ns):
                continue  # dated and arrived before the caller last touched its STATE: acknowledged
        out.append((name, p.action))
    return out


def monitor(
    ex: Exchange, agent: str, *, action: str = "any", stale_after: timedelta = HEARTBEAT_STALE
) -> MonitorResult:
    """What awaits ``agent`` now; ``Conflict`` if not a member, ``InvalidName`` for a bad scope.

    Reads only; writes nothing anywhere.
    """
    if action not in ("any", "required"):
        raise InvalidName("action scope", action, "required or any")
    side = ex.side_of(agent)
    other = ex.other(side)
    beat = heartbeat_age(ex)
    with gc_paused():  # 20,000 listings and the tick's records, all freed inside
        fresh = beat is not None and beat[1] <= stale_after
        kept = load_monitor(ex.meta, side) if fresh else None
        out = _awaiting(ex, side, other, action, kept)
        del kept  # else the first collection after the pause walks every record in it
    if beat is not None and beat[1] > stale_after:
        out.append(Awaiting("tick", None, since=format_time(beat[0])))
    return MonitorResult(agent, side, other, action, out)


def _topic(
    ex: Exchange, name: str, pair: dict[str, TopicDir], side: str, action: str, holds: Any
) -> list[Awaiting]:
    """What awaits ``side`` on topic ``name`` (its directories ``pair`` by inbox side), in the
    listing's order: entry, held, then the STATE.md lines. ``holds``: ``load_holds``, or
    ``None`` to leave the held line out (a topic with a HELD.md is never kept)."""
    out: list[Awaiting] = []
    theirs, mine = pair.get(side), pair.get(ex.other(side))
    if theirs is not None and not theirs.archived:
        out += _entry_line(name, _entries_waiting(theirs, mine, action))
        held = theirs.held and holds is not None
        if held and is_trusted(holds, side, name, theirs.file(HELD_NAME)):
            out.append(Awaiting("held", name))
    return out + _state_lines(ex, name, pair, side)


def _entry_line(name: str, waiting: list[tuple[str, str | None]]) -> list[Awaiting]:
    if not waiting:
        return []
    entry, act = waiting[-1]
    return [Awaiting("entry", name, entry, act, len(waiting))]


def _state_lines(ex: Exchange, name: str, pair: dict[str, TopicDir], side: str) -> list[Awaiting]:
    out: list[Awaiting] = []
    theirs, mine = pair.get(side), pair.get(ex.other(side))
    their_state = (
        peek_state(theirs.file(STATE_NAME)) if theirs is not None and theirs.has_state else None
    )
    if their_state is not None and their_state.status == "unknown" and theirs is not None:
        out.append(_unreadable(name, theirs.file(STATE_NAME), their_state.error, ex))
    if their_state is not None and their_state.status == "done":
        mine_status = "open"
        if mine is not None and mine.has_state:
            my_state = peek_state(mine.file(STATE_NAME))
            mine_status = my_state.status
            if mine_status == "unknown":
                out.append(_unreadable(name, mine.file(STATE_NAME), my_state.error, ex))
        if mine_status != "done":
            out.append(Awaiting("close", name))
    return out


def kept_lines(ex: Exchange, name: str, pair: dict[str, TopicDir]) -> dict[str, list[Any]]:
    """What the tick keeps of topic ``name`` for the monitor (``pair``: its live directories):
    per caller side that has any, its lines for ``--action any`` and for ``--action required``
    (``None``: the same), each ``[kind, entry, action, count, detail]``. Only for a topic with
    no HELD.md whose STATE.md times are not in the future: nothing else in them moves with the
    clock."""
    out: dict[str, list[Any]] = {}
    for side in ex.sides:
        theirs, mine = pair.get(side), pair.get(ex.other(side))
        waiting = _entries_waiting(theirs, mine, "any") if theirs is not None else []
        required = [w for w in waiting if w[1] != "fyi"]  # what scope "required" skips
        rest = _state_lines(ex, name, pair, side)
        scopes = [
            [[a.kind, a.entry, a.action, a.count, a.detail] for a in [*entry, *rest]]
            for entry in (_entry_line(name, waiting), _entry_line(name, required))
        ]
        if scopes[0] or scopes[1]:
            out[side] = [scopes[0], None if scopes[1] == scopes[0] else scopes[1]]
    return out


def _awaiting(
    ex: Exchange, side: str, other: str, action: str, kept: MonitorKept | None
) -> list[Awaiting]:
    out: list[Awaiting] = []
    holds = load_holds(ex)
    if kept is None:
        for name, pair in topic_pairs(ex).items():
            out.extend(_topic(ex, name, pair, side, action, holds))
    else:
        _unchanged_or_listed(ex, kept, side, action, holds, out)
    for debt in late_debts(ex, [side]):  # entries that reached done/ unread
        out.append(Awaiting("unseen", debt.topic, debt.entry))
    return out


def _unchanged_or_listed(
    ex: Exchange, kept: MonitorKept, side: str, action: str, holds: Any, out: list[Awaiting]
) -> None:
    """Every topic's lines into ``out``, by topic: from the tick's ``kept`` records where they
    vouch for it, else from its directories, listed (as ``topic_pairs`` would)."""
    inboxes = {s: str(ex.inbox(s)) for s in ex.sides}
    mtimes = {s: dict(topic_mtimes(inbox)) for s, inbox in inboxes.items()}
    changed = _changed(kept, mtimes, inboxes)
    done: dict[str, set[str]] | None = None  # the archived names, once a topic needs them
    told = kept.lines.get(side, {})
    scope = 1 if action == "required" else 0
    a, b = ex.sides
    for name in sorted(mtimes[a].keys() | mtimes[b].keys()):
        if name not in mtimes[a] or name not in mtimes[b]:  # one side: is the other in done/?
            if done is None:
                done = {s: set(topic_names(ex.inbox(s) / DONE)) for s in ex.sides}
            if any(name in d for d in done.values()):
                changed.add(name)  # half-archived: listed, as topic_pairs would
        if name not in changed:
            scopes = told.get(name)
            lines = (scopes[scope] if scopes[scope] is not None else scopes[0]) if scopes else ()
            for kind, entry, act, count, detail in lines:
                out.append(Awaiting(kind, name, entry, act, count, detail=detail))
            continue
        if done is None:
            done = {s: set(topic_names(ex.inbox(s) / DONE)) for s in ex.sides}
        pair = {}
        for s in ex.sides:
            if name in mtimes[s]:
                pair[s] = list_dir(f"{inboxes[s]}/{name}", name, False)
            elif name in done[s]:  # half-archived: its copy in done/ (as topic_pairs)
                pair[s] = list_dir(f"{ex.inbox(s)}/{DONE}/{name}", name, True)
        out.extend(_topic(ex, name, pair, side, action, holds))


def _changed(
    kept: MonitorKept, mtimes: dict[str, dict[str, int]], inboxes: dict[str, str]
) -> set[str]:
    """The topics the tick's ``kept`` records do not vouch for now (``mtimes``: each inbox's
    topic directories now): a directory not kept, gone, or of another mtime, or a STATE.md
    not as the tick found it (a new or removed one changes its directory's mtime)."""
    changed: set[str] = set()
    for s, found in mtimes.items():
        was = kept.dirs.get(s, {})
        changed.update([name for name, mtime in found.items() if was.get(name) != mtime])
        changed.update(was.keys() - found.keys())
        inbox = inboxes[s]
        for name, (size, mtime) in kept.states.get(s, {}).items():
            if name in changed:
                continue
            try:
                st = os.stat(f"{inbox}/{name}/{STATE_NAME}", follow_symlinks=False)
            except OSError:
                changed.add(name)
                continue
            if st.st_size != size or st.st_mtime_ns != mtime:
                changed.add(name)  # rewritten in place
    return changed


def _unreadable(topic: str, path: str, error: str | None, ex: Exchange) -> Awaiting:
    """A STATE.md whose status does not read: it blocks the archive, and says so."""
    where = os.path.relpath(path, ex.root)
    return Awaiting("state", topic, where, detail=error or "unreadable")

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
from mailslot.exchange.layout import HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.listing import TopicDir, arrivals, topic_pairs

__all__ = ["HEARTBEAT_STALE", "Awaiting", "MonitorResult", "heartbeat_age", "monitor"]

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
    with gc_paused():  # 20,000 listings alive until the end; freed when _awaiting returns
        out = _awaiting(ex, side, other, action)
    beat = heartbeat_age(ex)
    if beat is not None and beat[1] > stale_after:
        out.append(Awaiting("tick", None, since=format_time(beat[0])))
    return MonitorResult(agent, side, other, action, out)


def _awaiting(ex: Exchange, side: str, other: str, action: str) -> list[Awaiting]:
    out: list[Awaiting] = []
    holds = load_holds(ex)
    for name, pair in topic_pairs(ex).items():
        theirs, mine = pair.get(side), pair.get(other)
        if theirs is not None and not theirs.archived:
            waiting = _entries_waiting(theirs, mine, action)
            if waiting:
                entry, act = waiting[-1]
                out.append(Awaiting("entry", name, entry, act, len(waiting)))
            if theirs.held and is_trusted(holds, side, name, theirs.file(HELD_NAME)):
                out.append(Awaiting("held", name))
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
    for debt in late_debts(ex, [side]):  # entries that reached done/ unread
        out.append(Awaiting("unseen", debt.topic, debt.entry))
    return out


def _unreadable(topic: str, path: str, error: str | None, ex: Exchange) -> Awaiting:
    """A STATE.md whose status does not read: it blocks the archive, and says so."""
    where = os.path.relpath(path, ex.root)
    return Awaiting("state", topic, where, detail=error or "unreadable")

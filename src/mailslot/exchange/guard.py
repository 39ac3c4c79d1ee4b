"""The archive guard: archive only what both sides have provably seen. No disk: it reads only
the clocks.

A topic is archived only when both sides are ``done`` AND, for each side, its newest entry
pre-dates the other side's last STATE.md update (a closing reply is the entry most
likely to flip the second side to ``done`` and the least likely to have been read). Checking each
side's newest entry, not only the overall newest, also catches two sides writing past each other.

The failure mode is *do not archive*: a missing or unparseable time, a tie, a time in the future,
an unreadable STATE.md, a newest entry that does not read (its ``action`` unknown, it counts as
owed a reply, and an archive would bury that debt) -- anything that does not resolve leaves the
topic where it is, because an extra tick of delay is invisible and a wrong archive is invisible
forever.

An entry's time is the later of its ``at`` and its arrival (the file's ctime, which a writer
cannot set; a bridge materialising it by rename counts as arrival too): a back-dated ``at`` must
not let an entry nobody read slip under the other side's ``done`` into the archive.

One piece of evidence beats a tie-by-truncation: a hand writer's ``date -u +%H:%M:%SZ`` is
second precision, so a ``done`` written in the same second as the entry arrived reads as *before*
it. If ``updated_at`` is a whole second, the entry arrived inside that second, and STATE.md's own
ctime (which its writer cannot set) is later than the entry's arrival and still inside that
second, STATE.md was demonstrably written after the entry: it acknowledges it
(``acknowledged_within_second``). A STATE.md written before the entry, or any case short of that
evidence, is still held.

A STATE.md acknowledges up to its ``updated_at`` but never past its own writing (its ctime:
``acknowledged_by``), so a ``done`` dated ahead of its writing -- inside the skew allowance -- does
not cover an entry that arrived after it was written.

When the comparison resolves against a side (its acknowledgement is older than, or the same
instant as, the other side's newest entry), that side owes a re-read: the tick puts HELD.md in
its inbox, and re-affirming ``done`` (a fresh ``updated_at``) releases it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from mailslot.core import clock
from mailslot.core.clock import FUTURE_SKEW, format_time

__all__ = ["Decision", "GuardSide", "acknowledged_by", "acknowledged_within_second", "decide"]


@dataclass(frozen=True)
class GuardSide:
    """What the guard needs from one side: its STATE and its own newest entry."""

    status: str
    updated_at: datetime | None = None
    state_error: str | None = None
    newest: str | None = None  # file name of this side's newest entry, None if it wrote none
    newest_at: datetime | None = None  # the entry's own ``at`` (its writer's claim)
    arrived_at: datetime | None = (
        None  # when the file appeared here (ctime; the writer can't set it)
    )
    arrived_ns: int | None = None  # the same, to the nanosecond
    state_ctime_ns: int | None = None  # when this side's STATE.md was last written (its ctime)
    newest_error: str | None = None  # why the newest entry does not read (its action, its 'at')
    arrival_unknown: str | None = None  # why its arrival at its reader's host is not known yet


SECOND_NS = 1_000_000_000


def acknowledged_within_second(
    ack: datetime, state_ctime_ns: int | None, entry_time: datetime, arrived_ns: int | None
) -> bool:
    """Whether a whole-second ``ack`` in the same second as an entry is provably later than it:
    the entry (``entry_time``, the later of its ``at`` and arrival, and ``arrived_ns``) and
    STATE.md's own write (``state_ctime_ns``) both fall inside that second, STATE.md after the
    entry. Anything short of that evidence is ``False`` (the guard holds)."""
    if state_ctime_ns is None or arrived_ns is None or ack.microsecond != 0:
        return False
    second = int(ack.timestamp()) * SECOND_NS
    entry_ns = max(
        arrived_ns, int(entry_time.timestamp()) * SECOND_NS + entry_time.microsecond * 1000
    )
    return second <= entry_ns < state_ctime_ns < second + SECOND_NS


# The kernel stamps ctimes from a coarse clock that lags the real one by up to a scheduler tick
# (4 ms at HZ=250, 10 ms at HZ=100): a file's ctime may read earlier than a time its writer took
# before writing it. The write happened no later than its ctime plus this.
CTIME_GRANULARITY = timedelta(milliseconds=10)


def acknowledged_by(updated_at: datetime, state_ctime_ns: int | None) -> datetime:
    """What a STATE.md acknowledges: up to its ``updated_at``, but never past the moment it was
    written (its ctime, which its writer cannot set, plus ``CTIME_GRANULARITY``). A time dated
    ahead -- a skewed clock inside the skew allowance, a typo -- must not acknowledge an entry
    that arrived after the file."""
    if state_ctime_ns is None:
        return updated_at
    # the ctime on mailslot's clock (``clock.now``: the real one outside tests), by its age
    age = timedelta(microseconds=(time.time_ns() - state_ctime_ns) // 1000)
    written = clock.now() - age + CTIME_GRANULARITY
    return min(updated_at, written)


@dataclass
class Decision:
    """The guard's verdict for one topic."""

    archive: bool = False
    candidate: bool = False  # both sides done: archiving was considered
    holds: dict[str, str] = field(default_factory=dict)  # owing side -> entry to re-read
    reasons: dict[str, str] = field(default_factory=dict)  # owing side -> why held
    waiting: list[str] = field(default_factory=list)  # unresolved comparisons


def decide(sides: dict[str, GuardSide], now: datetime) -> Decision:
    """Decide archive/hold for a topic with exactly two ``sides``; never raises."""
    names = list(sides)
    if len(names) != 2:
        return Decision(waiting=["a topic needs exactly two sides"])
    if any(s.status != "done" for s in sides.values()):
        return Decision()
    d = Decision(candidate=True)
    limit = now + FUTURE_SKEW
    for writer in names:
        other = names[1] if writer == names[0] else names[0]
        mine, theirs = sides[writer], sides[other]
        if mine.newest is None:
            continue
        ack = theirs.updated_at
        resolved = True
        if ack is None:
            d.waiting.append(f"{other}'s STATE.md has no readable updated_at")
            resolved = False
        elif ack > limit:
            d.waiting.append(f"{other}'s STATE.md updated_at {format_time(ack)} is in the future")
            resolved = False
        else:
            ack = acknowledged_by(ack, theirs.state_ctime_ns)
        if mine.newest_at is None:
            d.waiting.append(f"{mine.newest} has no readable 'at'")
            resolved = False
        elif mine.newest_at > limit:
            d.waiting.append(f"{mine.newest} 'at' {format_time(mine.newest_at)} is in the future")
            resolved = False
        if not resolved or ack is None or mine.newest_at is None:
            continue
        if mine.newest_error is not None:  # it counts as owed (index.counts_as_required)
            d.waiting.append(f"{mine.newest} does not read: {mine.newest_error}")
            continue
        if mine.arrival_unknown is not None:  # bridged: no receipt from the reader's host yet
            d.waiting.append(f"{mine.newest}: {mine.arrival_unknown}")
            continue
        when_at = mine.newest_at
        verb = "was written"
        if mine.arrived_at is not None and mine.arrived_at > when_at:
            when_at, verb = mine.arrived_at, "arrived"
        if when_at >= ack and not acknowledged_within_second(
            ack, theirs.state_ctime_ns, when_at, mine.arrived_ns
        ):
            d.holds[other] = mine.newest
            when = "at the same instant as" if when_at == ack else "after"
            d.reasons[other] = (
                f"{mine.newest} ({format_time(when_at)}) {verb} {when} "
                f"{other} last marked it done ({format_time(ack)})"
            )
    for side in names:
        err = sides[side].state_error
        if err:
            d.waiting.append(f"{side}'s STATE.md: {err}")
    d.archive = not d.holds and not d.waiting
    return d

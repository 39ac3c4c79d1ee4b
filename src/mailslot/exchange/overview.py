"""Read-only views for people and agents: the topic list and one topic in full.

These read the tree directly (no tick state), so they are right even where no tick runs. They
never write anything, so a reader that may not write the exchange can use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mailslot.core.errors import NotFound
from mailslot.core.wait import being_written
from mailslot.exchange.entries import Entry, list_entries
from mailslot.exchange.holds import Hold, is_trusted, load_holds, trusted_hold
from mailslot.exchange.inbox import peek_entry, peek_state
from mailslot.exchange.index import TopicView, build_view
from mailslot.exchange.layout import HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.listing import TopicDir, placement, topic_pairs
from mailslot.exchange.safeio import read_regular
from mailslot.exchange.state import SideState, read_state
from mailslot.exchange.topics import find_topic, named_topic
from mailslot.exchange.watch import CUT_SHORT

__all__ = ["WRITING_NOTE", "TopicDetail", "read_topic", "topic_summaries", "topic_summary"]

# An entry file some process still holds open for writing (a hand writer's ``cat > NNNN-x.md``
# that has not finished, or one stalled or killed with a child keeping the file open).
WRITING_NOTE = "still open for writing by another process: shown as it stands, may be incomplete"


def topic_summaries(ex: Exchange, *, include_archived: bool = False) -> list[TopicView]:
    """Every live topic (archived too if asked) as a ``TopicView`` without debts: where it is,
    statuses, counts, last activity (the newest entry's ``at`` per side), the sides held; never
    raises.

    One listing per topic directory (``listing.topic_pairs``; ``done/`` only where needed unless
    archived topics are asked for) and, per side, a header read of STATE.md and of the newest
    entry only (``peek_state``/``peek_entry``: the full parser runs only for a header that needs
    it), so a listing of 10,000 topics stays well under a second.
    """
    holds = load_holds(ex)
    return [
        topic_summary(ex, name, dirs, holds)
        for name, dirs in topic_pairs(ex, include_archived=include_archived).items()
    ]


def topic_summary(
    ex: Exchange, name: str, dirs: dict[str, TopicDir], holds: dict[str, Hold]
) -> TopicView:
    """One topic of ``topic_summaries``, from its directories (inbox side -> ``TopicDir``, as
    ``listing.topic_pairs`` gives them) and the recorded holds (``holds.load_holds``): for a
    reader that keeps a table and reads again only the topics that changed. Never raises."""
    counts = {s: 0 for s in ex.sides}
    status = {s: "open" for s in ex.sides}
    times = []
    held: dict[str, str] = {}
    for inbox_side, d in dirs.items():
        writer = ex.writer_of(inbox_side)
        counts[writer] = len(d.entries)
        if d.has_state:
            status[writer] = peek_state(d.file(STATE_NAME)).status
        elif STATE_NAME in d.strays:  # not a regular file: unreadable, never "open"
            status[writer] = "unknown"
        top = d.newest()
        if top is not None:  # only the newest entry per side is read
            _, _, fname = top
            at = peek_entry(d.file(fname)).at
            if at is not None:
                times.append(at)
        hold = trusted_hold(holds, inbox_side, name, d.file(HELD_NAME)) if d.held else None
        if hold is not None:
            held[inbox_side] = hold.entry or HELD_NAME
    return build_view(
        ex,
        name,
        status,
        counts,
        held=held,
        last_activity=max(times) if times else None,
        where=placement(d.archived for d in dirs.values()),
        debts=False,
    )


@dataclass(frozen=True)
class TopicDetail:
    """A topic in full: where it is, both STATEs, every entry in ``(number, from)`` order."""

    name: str
    where: str
    states: dict[str, SideState]
    entries: list[Entry]
    held: dict[str, str]  # side -> HELD.md text

    def to_json(self, ex: Exchange) -> dict[str, Any]:
        """A JSON-ready dict (paths relative to the root)."""
        return {
            "topic": self.name,
            "where": self.where,
            "states": {s: st.to_json() for s, st in self.states.items()},
            "entries": [e.to_json(ex.root) for e in self.entries],
            "held": self.held,
        }


def read_topic(ex: Exchange, topic: str) -> TopicDetail:
    """Everything in ``topic`` (live or archived; a slug names the newest with it, as
    ``named_topic`` says); ``NotFound`` or ``InvalidName``."""
    topic = named_topic(ex, topic)
    ref = find_topic(ex, topic)
    if ref is None:
        raise NotFound(
            f"no topic {topic} (mailslot exchange topics --all lists them)", path=ex.root
        )
    held = {}
    holds = load_holds(ex)
    for side, d in ref.dirs.items():
        if not is_trusted(holds, side, topic, d / HELD_NAME):
            continue  # absent, or not placed by the tick: a stray file, not a hold
        try:
            held[side] = read_regular(d / HELD_NAME).decode("utf-8", "replace")
        except OSError:
            pass
    return TopicDetail(
        topic,
        ref.status,
        {s: read_state(ex, topic, s) for s in ex.sides},
        [_with_notes(e) for e in list_entries(ex, topic)],
        held,
    )


def _with_notes(entry: Entry) -> Entry:
    """``entry`` with a note added to its warning when it may not be whole: some process still
    holds its file open for writing (``WRITING_NOTE``), or it ends part-way through a line
    (``CUT_SHORT``, as ``exchange watch`` says). A snapshot read shows it as it stands, never as
    whole."""
    if being_written(entry.path) is True:
        note = WRITING_NOTE
    elif entry.error is None and entry.body and not entry.body.endswith("\n"):
        note = CUT_SHORT
    else:
        return entry
    return entry.replace(warning=f"{entry.warning}; {note}" if entry.warning else note)

"""The view of a topic (``TopicView``, made by ``build_view``), what each side owes, and INDEX.md.

INDEX.md is the answer to "is anything waiting": every live topic with both sides' status, entry
counts, last activity, holds and what each side owes. It holds no time of its own generation, so a
tick with nothing new writes the same bytes and git sees nothing to commit (no churn).

Debts, per side (each side sweeps its own): ``reply`` when the other side's newest
``action: required`` entry (a later ``fyi`` P.S. does not answer it) has no entry from this side
that arrived after it; ``close`` when the other side is ``done`` and this side is not;
``re-read`` when a hold waits for this side; ``unseen`` when an entry in an archived topic
arrived after the acknowledgement the archive stood on (nobody watches ``done/``).

"After" is arrival order, and never a lower number (``answers``): a hand writer that skips the
send lock can reuse a number, and the other side's same-numbered ``fyi`` written *before* a
``required`` entry does not answer it; an entry's arrival is its ctime (which its writer cannot
back-date, but which any ``chmod -R`` moves to now), so a lower-numbered entry whose ctime was
bumped answers nothing. Two arrivals in the same instant of a coarse clock fall back to the
number. Every place that decides a debt (tick/INDEX.md,
sweep, monitor, ``state done``) uses ``answers`` and ``owed_entry``.

An entry whose ``action`` cannot be read (a header the parser refuses, a file this side may not
open) counts as ``required`` (``counts_as_required``): fail safe, an entry nobody can classify is
owed a reply, never silently dropped from the debts. Its ``reply`` debt carries a ``detail``
naming the file and why it does not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from mailslot.core.clock import format_time
from mailslot.core.record import Record
from mailslot.exchange.layout import Exchange
from mailslot.exchange.listing import LIVE

__all__ = [
    "Arrival",
    "Debt",
    "Owed",
    "TopicView",
    "answers",
    "build_view",
    "compute_debts",
    "counts_as_required",
    "index_row",
    "md_cell",
    "owed_entry",
    "reason_code",
    "render_index",
    "render_index_rows",
    "short_error",
    "unreadable_detail",
]

Arrival = tuple[int, int, str]
"""``(ctime_ns, number, file name)`` of one entry: the order in which debts are decided."""


def answers(reply: Arrival | None, asked: Arrival) -> bool:
    """Whether ``reply`` (the answering side's last-arrived entry) answers ``asked``: it arrived
    after it (in the same instant, the higher number answers) AND its number is not lower. A
    ctime is bumped by any ``chmod``/``chown`` (a recursive permission fix makes an old entry
    "arrive" now), so arrival alone would let an older, lower-numbered entry erase a debt."""
    if reply is None:
        return False
    reply_ns, reply_number, _ = reply
    asked_ns, asked_number, _ = asked
    return reply_number >= asked_number and (reply_ns, reply_number) > (asked_ns, asked_number)


def counts_as_required(action: str | None) -> bool:
    """Whether an entry whose ``action`` reads as ``action`` (``None``: it does not read) is owed
    a reply: ``required``, and anything that is not provably ``fyi`` (fail safe)."""
    return action != "fyi"


def unreadable_detail(name: str, error: str | None) -> str:
    """The ``detail`` of a ``reply`` debt on an entry whose ``action`` does not read."""
    why = short_error(error or "no action", name)
    return f"{name} does not read ({why}); counted as action: required"


def short_error(error: str, name: str) -> str:
    """A parser's ``error`` about file ``name`` without the path it starts with (INDEX.md is
    committed and read on every host: the file is named by the line it sits in)."""
    head, sep, tail = error.partition(f"/{name}: ")
    return tail if sep and head.startswith("/") else error


def owed_entry(
    theirs: Iterable[Arrival], mine_last: Arrival | None, is_required: Callable[[str], bool]
) -> Arrival | None:
    """The newest (by arrival) of ``theirs`` that ``is_required`` and that ``mine_last`` does not
    answer, or ``None``. ``theirs`` is read newest first and ``is_required`` asked only for
    entries ``mine_last`` does not answer, so an answered topic reads no file (an earlier arrival
    may still carry a higher number than the answer: each is checked, by name)."""
    for a in sorted(theirs, reverse=True):
        if answers(mine_last, a):
            continue
        _, _, name = a
        if is_required(name):
            return a
    return None


class Debt(NamedTuple):
    """Something ``side`` owes on ``topic``: ``reply``, ``close``, ``re-read`` or ``unseen``."""

    topic: str
    side: str
    reason: str
    entry: str | None = None
    detail: str | None = None  # why, when the entry itself does not read

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; ``detail`` only when there is one (what a debt always carried
        stays exactly as it was)."""
        out = {"topic": self.topic, "side": self.side, "reason": self.reason, "entry": self.entry}
        if self.detail is not None:
            out["detail"] = self.detail
        return out


class Owed(NamedTuple):
    """A side's newest ``action: required`` entry that the other side has not answered
    (``owed_entry``), and why it counts when its action does not read (``unreadable_detail``)."""

    number: int
    name: str
    detail: str | None = None


class TopicView(Record):
    """One topic as people and agents are shown it: where it is, each side's status and entry
    count, last activity, holds, why a done/done topic waits, and what each side owes.

    ``build_view`` makes every one (the tick for INDEX.md, ``sweep``, ``exchange topics`` and
    the MCP tools), so they cannot disagree. Keys are sides: the side whose status, entries and
    required entry these are; ``held`` is keyed by the owing side.
    """

    __match_args__ = (
        "name",
        "status",
        "counts",
        "last_activity",
        "held",
        "waiting",
        "debts",
        "required",
        "where",
    )
    __slots__ = __match_args__
    name: str
    status: dict[str, str]  # side -> open|in-progress|blocked|done|unknown
    counts: dict[str, int]  # side -> entries written by that side
    last_activity: datetime | None
    held: dict[str, str]  # owing side -> entry it must re-read
    waiting: list[str]  # why a done/done topic did not archive
    debts: list[Debt]
    required: dict[str, Owed]  # side -> its entry owed a reply
    where: str  # live | archived | half-archived (listing.placement)

    def __init__(
        self,
        name: str,
        status: dict[str, str],
        counts: dict[str, int],
        last_activity: datetime | None = None,
        held: dict[str, str] | None = None,
        waiting: list[str] | None = None,
        debts: list[Debt] | None = None,
        required: dict[str, Owed] | None = None,
        where: str = LIVE,
    ) -> None:
        self.name = name
        self.status = status
        self.counts = counts
        self.last_activity = last_activity
        self.held = {} if held is None else held
        self.waiting = [] if waiting is None else waiting
        self.debts = [] if debts is None else debts
        self.required = {} if required is None else required
        self.where = where

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``exchange topics --json``): ``held`` lists the sides held."""
        return {
            "topic": self.name,
            "where": self.where,
            "status": self.status,
            "counts": self.counts,
            "last_activity": format_time(self.last_activity) if self.last_activity else None,
            "held": list(self.held),
        }


def build_view(
    ex: Exchange,
    name: str,
    status: dict[str, str],
    counts: dict[str, int],
    *,
    required: dict[str, Owed] | None = None,
    held: dict[str, str] | None = None,
    waiting: list[str] | None = None,
    last_activity: datetime | None = None,
    where: str = LIVE,
    debts: bool = True,
) -> TopicView:
    """The one ``TopicView`` of topic ``name`` from what each side's files say, with its debts
    (``compute_debts``) unless ``debts`` is false (a listing that shows none)."""
    view = TopicView(
        name,
        status,
        counts,
        last_activity,
        held if held is not None else {},
        waiting if waiting is not None else [],
        [],
        required if required is not None else {},
        where,
    )
    if debts:
        view.debts = compute_debts(ex, view)
    return view


def compute_debts(ex: Exchange, view: TopicView) -> list[Debt]:
    """What each side owes on ``view`` (reply, close, re-read); pure."""
    out = []
    for side in ex.sides:
        other = ex.other(side)
        asked = view.required.get(other)  # their newest required entry, unanswered (owed_entry)
        if asked is not None:
            out.append(Debt(view.name, side, "reply", asked.name, asked.detail))
        if view.status.get(other) == "done" and view.status.get(side) != "done":
            out.append(Debt(view.name, side, "close"))
        if side in view.held:
            out.append(Debt(view.name, side, "re-read", view.held[side]))
    return out


# Reasons are free text built from files the other side wrote (a STATE.md value can land in one),
# so a cell carries a fixed code a reader can trust plus the text escaped and shortened.
_CODES = (
    ("stray file", "stray-files"),
    ("in the future", "future-time"),
    ("does not read", "unreadable-entry"),
    ("no readable", "unreadable-time"),
    ("STATE.md:", "state-error"),
    ("exactly two sides", "layout"),
)
_MD_META = set("\\`*_{}[]()#!|~")
CELL_CHARS = 160


def reason_code(reason: str) -> str:
    """A fixed code for a guard's ``waiting`` reason (``unresolved`` when none fits)."""
    for needle, code in _CODES:
        if needle in reason:
            return code
    return "unresolved"


def md_cell(text: str, limit: int = CELL_CHARS) -> str:
    """``text`` safe inside a markdown table cell: one line, control characters dropped,
    markdown and HTML metacharacters escaped, at most ``limit`` characters (then ``...``)."""
    flat = "".join(c if c.isprintable() else " " for c in text)
    if len(flat) > limit:
        flat = flat[: limit - 3] + "..."
    out = []
    for c in flat:
        if c == "<":
            out.append("&lt;")
        elif c == ">":
            out.append("&gt;")
        elif c == "&":
            out.append("&amp;")
        elif c in _MD_META:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _cell(view: TopicView, side: str) -> str:
    return f"{view.status.get(side, 'open')} ({view.counts.get(side, 0)})"


def index_row(ex: Exchange, view: TopicView) -> str:
    """``view``'s line in INDEX.md's table of topics."""
    a, b = ex.sides
    last = format_time(view.last_activity) if view.last_activity else "-"
    notes = [f"HELD for {s} ({md_cell(e, 60)})" for s, e in sorted(view.held.items())]
    notes += [f"waiting: {reason_code(w)}: {md_cell(w)}" for w in view.waiting]
    note = "; ".join(notes) or "-"
    return f"| `{view.name}` | {_cell(view, a)} | {_cell(view, b)} | {last} | {note} |"


def render_index(ex: Exchange, views: list[TopicView], late: Iterable[Debt] = ()) -> str:
    """The INDEX.md text for the live topics ``views`` (sorted by name) and the ``unseen``
    debts ``late`` found in archived topics."""
    debts = [d for v in views for d in v.debts]
    return render_index_rows(ex, [index_row(ex, v) for v in views], [*debts, *late])


def render_index_rows(ex: Exchange, rows: list[str], debts: list[Debt]) -> str:
    """The INDEX.md text from the live topics' table ``rows`` (``index_row``, by topic) and
    every debt (the live topics' in the same order, then the ``unseen`` ones)."""
    a, b = ex.sides
    lines = [
        "# Exchange index",
        "",
        f"Generated by `mailslot exchange tick`. Sides: **{a}** (reads `to-{a}/`) and **{b}** "
        f"(reads `to-{b}/`). Status (entries written) per side; archived topics are under "
        "`done/` on both sides.",
        "",
    ]
    lines += ["## Waiting on someone", ""]
    if not debts:
        lines += ["Nothing: no side owes a reply, a close or a re-read.", ""]
    for side in (a, b):
        mine = [d for d in debts if d.side == side]
        if mine:
            lines.append(f"**{side}** owes:")
            for d in mine:
                what = {
                    "reply": "a reply to",
                    "close": "a close (other side is done)",
                    "re-read": "a re-read (HELD) of",
                    "unseen": "a read of (arrived after the archive, in done/)",
                }[d.reason]
                tail = f" `{d.entry}`" if d.entry else ""
                if d.detail:
                    tail += f" ({md_cell(d.detail)})"
                lines.append(f"- `{d.topic}`: {what}{tail}")
            lines.append("")
    lines += [
        "## Topics",
        "",
        f"| topic | {a} | {b} | last activity | hold / note |",
        "|---|---|---|---|---|",
    ]
    lines += rows
    if not rows:
        lines.append("| (no live topics) | | | | |")
    return "\n".join(lines) + "\n"

"""The time picture of an exchange, drawn here as inline SVG (no plotting in the browser): entries
per day for the last ``DAYS`` days, and how long ``required`` entries waited for an answer.

An answer is the other side's first entry to *arrive* after the required one (arrival order,
as the debt sweep decides it), and the wait is from the required entry's ``at`` to the answer's
``at``. Entries come from ``exchange.entries.list_entries`` (the channel's own parser) for the
topics active in the window, at most ``TOPICS_MAX`` of them, newest first. Everything drawn is a
number or a date the page made; no text from a file reaches the SVG.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from mailslot.core.clock import now
from mailslot.core.errors import MailslotError
from mailslot.exchange.entries import list_entries
from mailslot.exchange.layout import Exchange

__all__ = ["DAYS", "Picture", "TopicMarks", "draw", "measure", "topic_marks"]

# A month: long enough to see a trend, short enough to read one bar per day.
DAYS = 30
# Topics read for the picture at most, the most recently active first: each is read whole
# (about 1.5 ms a topic of ten entries here), and a month rarely has more live ones; past this
# the picture says it covers only the newest.
TOPICS_MAX = 500


@dataclass(frozen=True)
class Picture:
    """Per day: entries written, and the median wait (hours) of required entries answered."""

    days: list[date]
    entries: list[int]
    answer_hours: list[float | None]
    unanswered: int
    topics: int
    capped: bool


@dataclass(frozen=True)
class TopicMarks:
    """What one topic adds to the picture, by day of each entry's ``at``: entries written, the
    waits (hours) of its required entries that were answered, the required ones not answered."""

    entries: dict[date, int]
    waits: dict[date, list[float]]
    unanswered: dict[date, int]


def topic_marks(ex: Exchange, name: str) -> TopicMarks | None:
    """The marks of topic ``name`` (its entries read whole), or None when it does not read."""
    try:
        entries = list_entries(ex, name)
    except MailslotError:
        return None
    counts: dict[date, int] = {}
    waits: dict[date, list[float]] = {}
    unanswered: dict[date, int] = {}
    for e in entries:
        if e.at is not None:
            counts[e.at.date()] = counts.get(e.at.date(), 0) + 1
    by_arrival = sorted(entries, key=lambda e: e.arrival)
    for i, asked in enumerate(by_arrival):
        if asked.action != "required" or asked.at is None:
            continue
        day = asked.at.date()
        answer = next((r for r in by_arrival[i + 1 :] if r.side != asked.side), None)
        if answer is None or answer.at is None:
            unanswered[day] = unanswered.get(day, 0) + 1
            continue
        waits.setdefault(day, []).append(max(0.0, (answer.at - asked.at).total_seconds() / 3600))
    return TopicMarks(counts, waits, unanswered)


def measure(
    ex: Exchange,
    topics: list[tuple[str, datetime | None]],
    kept: dict[str, TopicMarks | None] | None = None,
) -> Picture:
    """The picture of ``topics`` (name, last activity), those active in the last ``DAYS``.

    ``kept``: marks already read, by topic; a topic not in it is read and added, and the topics
    no longer drawn are dropped from it (a reader that keeps it drops the topics that changed)."""
    today = now().date()
    first = today - timedelta(days=DAYS - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=now().tzinfo)
    active = [
        n
        for n, at in sorted(topics, key=lambda t: t[1] or since, reverse=True)
        if at and at >= since
    ]
    capped = len(active) > TOPICS_MAX
    counts = {first + timedelta(days=i): 0 for i in range(DAYS)}
    waits: dict[date, list[float]] = {d: [] for d in counts}
    unanswered = 0
    drawn = active[:TOPICS_MAX]
    marks = {} if kept is None else kept
    for name in drawn:
        if name not in marks:
            marks[name] = topic_marks(ex, name)
        m = marks[name]
        if m is None:
            continue
        for day, n in m.entries.items():
            if day in counts:
                counts[day] += n
        for day, hours in m.waits.items():
            if day in waits:
                waits[day] += hours
        unanswered += sum(n for day, n in m.unanswered.items() if day in counts)
    if kept is not None:
        for name in kept.keys() - set(drawn):
            del kept[name]
    days = sorted(counts)
    return Picture(
        days,
        [counts[d] for d in days],
        [statistics.median(waits[d]) if waits[d] else None for d in days],
        unanswered,
        min(len(active), TOPICS_MAX),
        capped,
    )


_W, _H, _PAD = 720, 140, 30


def _shown(v: float, unit: str) -> str:
    if unit != "h":
        return f"{v:.3g} {unit}"
    if v < 1 / 60:
        return "under a minute"
    return f"{v * 60:.0f} min" if v < 1 else f"{v:.1f} h"


def _bars(values: list[float | None], css: str, label: str, unit: str, days: list[date]) -> str:
    top = max((v for v in values if v is not None), default=0) or 1
    step = (_W - 2 * _PAD) / max(1, len(values))
    parts = [
        f'<svg class="picture {css}" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" '
        f'role="img" aria-label="{label}">',
        f"<title>{label}</title>",
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#888"/>',
        f'<text x="{_PAD}" y="14" font-size="12" fill="#333">'
        f"{label} (max {_shown(top, unit)})</text>",
    ]
    for i, (d, v) in enumerate(zip(days, values, strict=True)):
        if v is None:
            continue
        h = (_H - 2 * _PAD - 10) * v / top
        x = _PAD + i * step
        y = _H - _PAD - h
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(1.0, step - 2):.1f}" height="{h:.1f}">'
            f"<title>{d.isoformat()}: {_shown(v, unit)}</title></rect>"
        )
    parts.append(
        f'<text x="{_PAD}" y="{_H - 8}" font-size="11" fill="#333">{days[0].isoformat()}</text>'
        f'<text x="{_W - _PAD}" y="{_H - 8}" font-size="11" fill="#333" '
        f'text-anchor="end">{days[-1].isoformat()}</text></svg>'
    )
    return "".join(parts)


def draw(pic: Picture) -> str:
    """The picture as two inline SVG charts (numbers and dates only) and a one-line note."""
    per_day = _bars(
        [float(n) for n in pic.entries], "entries", "entries per day", "entries", pic.days
    )
    waits = _bars(pic.answer_hours, "waits", "median wait for an answer", "h", pic.days)
    note = (
        f"<p>{sum(pic.entries)} entries in {pic.topics} topics over {DAYS} days; "
        f"{pic.unanswered} required entries still unanswered"
        f"{'; only the newest topics are counted' if pic.capped else ''}.</p>"
    )
    return per_day + waits + note

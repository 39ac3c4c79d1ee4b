"""The relay's latency table, from the stamps the relay writes (T0, seen, T1, T2).

A shell-script relay measured, not estimated: file transport ~0.002 s, a held wait 5.6-16.7 s, a
scheduled fallback ~30 s, manager think time ~10-13 s. These rows are the same stages read back from
the mailbox itself, so the table is evidence: every figure names the lines it came from.
"""

from __future__ import annotations

from typing import Any

from mailslot.core.errors import NotFound
from mailslot.core.fsio import read_from
from mailslot.core.record import Record
from mailslot.relay.lines import TurnLine, parse_inbox
from mailslot.relay.mailbox import NOTES_MAX_BYTES, open_relay, scan

__all__ = ["STAGES", "Stats", "stats"]

# The notes files are each side's own diagnostics (seen lines and notes of up to 16 KiB each);
# stats reads them whole, so a bounded read: the bound every notes write keeps.
NOTES_READ_MAX_BYTES = NOTES_MAX_BYTES

STAGES = (
    ("transport", "File transport (ask written -> replier woke)"),
    ("think", "Replier think time (woke -> reply written)"),
    ("reply_transport", "Reply transport (reply written -> read, held wait)"),
    ("held", "Held-open wait (ask written -> reply read)"),
    ("recovered", "Recovered turns (ask written -> reply read)"),
)


class Stats(Record):
    """Per-turn stamps and the per-stage summary (milliseconds)."""

    __match_args__ = ("turns", "stages")
    __slots__ = ("stages", "turns")
    turns: list[dict[str, Any]]
    stages: list[dict[str, Any]]

    def __init__(
        self,
        turns: list[dict[str, Any]] | None = None,  # None: each a fresh empty list
        stages: list[dict[str, Any]] | None = None,
    ) -> None:
        self.turns = [] if turns is None else turns
        self.stages = [] if stages is None else stages

    def to_json(self) -> dict[str, Any]:
        """``{"turns": [...], "stages": [{"stage", "label", "n", "median_ms", ...}]}``."""
        return {"turns": self.turns, "stages": self.stages}

    def table(self) -> str:
        """The latency table as markdown, plus a one-line summary."""

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v / 1000:.3f} s"

        rows = ["| Stage | n | median | min | max |", "|---|---|---|---|---|"]
        for s in self.stages:
            rows.append(
                f"| {s['label']} | {s['n']} | {ms(s['median_ms'])} | {ms(s['min_ms'])} "
                f"| {ms(s['max_ms'])} |"
            )
        done = [t for t in self.turns if t["T2"] is not None]
        recovered = sum(1 for t in done if t["recovered"])
        rows.append(
            f"\n{len(self.turns)} turns, {len(done)} delivered, {recovered} recovered, "
            f"{len(self.turns) - len(done)} open or unread"
        )
        return "\n".join(rows)


def _notes(path: Any) -> list[TurnLine]:
    try:
        return parse_inbox(read_from(path, 0, limit=NOTES_READ_MAX_BYTES))[0]
    except NotFound:
        return []


def stats(root: Any) -> Stats:
    """Build the table for the relay in ``root``; ``NotFound`` if it is not one."""
    relay = open_relay(root)
    conv = scan(relay)
    seen: dict[str, int] = {}
    acks = dict(conv.acks)
    for name in (relay.worker, relay.manager):
        for line in _notes(relay.notes(name)):
            if line.author != name:
                continue
            at = line.ms("at")
            if line.kind == "seen" and at is not None:
                seen.setdefault(line.id, at)
            elif line.kind == "ack":
                acks.setdefault(line.id, line)
    out = Stats()
    samples: dict[str, list[float]] = {key: [] for key, _ in STAGES}
    for tid, ask in sorted(conv.turns.items(), key=lambda kv: (kv[0][0], kv[1].number)):
        if ask.prefix not in "CQ":
            continue
        rid = {"C": "R", "Q": "A"}[ask.prefix] + tid[1:]
        rep = conv.turns.get(rid)
        ack = acks.get(rid)
        t0, t1 = ask.stamp, rep.stamp if rep else None
        t2 = ack.ms("T2") if ack else None
        woke = seen.get(tid)
        recovered = bool(ack and "RECOVERED" in ack.flags)
        out.turns.append(
            {"id": tid, "reply_id": rid, "T0": t0, "seen": woke, "T1": t1, "T2": t2,
             "recovered": recovered}
        )  # fmt: skip
        if t0 is not None and woke is not None:
            samples["transport"].append(woke - t0)
        if woke is not None and t1 is not None:
            samples["think"].append(t1 - woke)
        if t0 is not None and t2 is not None:
            samples["recovered" if recovered else "held"].append(t2 - t0)
        if t1 is not None and t2 is not None and not recovered:
            samples["reply_transport"].append(t2 - t1)
    import statistics  # here: `relay ask` loads this package, and statistics loads decimal

    for key, label in STAGES:
        xs = samples[key]
        out.stages.append(
            {
                "stage": key,
                "label": label,
                "n": len(xs),
                "median_ms": statistics.median(xs) if xs else None,
                "min_ms": min(xs) if xs else None,
                "max_ms": max(xs) if xs else None,
            }
        )
    return out

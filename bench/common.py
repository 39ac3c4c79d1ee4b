"""Shared pieces of the benchmark: a result row, percentiles, the table.

Each ``bench/b_*.py`` module exposes ``run(tmp: Path) -> list[Result]``; ``bench/run.py`` runs them
in name order, prints one table and writes ``bench/results/latest.json``.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Result:
    name: str
    unit: str  # "ms", "us", "msg/s", "req/s", "chars", "bytes", "s"
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    value: float | None = None  # a single figure (throughput, size, total time)
    n: int = 0
    target: str = ""
    ok: bool | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pct(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    s = sorted(samples)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))
    return s[k]


def dist(
    name: str,
    samples: Sequence[float],
    unit: str,
    *,
    target: str = "",
    ok: bool | None = None,
    note: str = "",
) -> Result:
    """A latency row from raw samples (already in ``unit``)."""
    return Result(
        name,
        unit,
        pct(samples, 50),
        pct(samples, 90),
        pct(samples, 99),
        n=len(samples),
        target=target,
        ok=ok,
        note=note,
        extra={"mean": statistics.fmean(samples) if samples else None},
    )


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v != v:  # NaN
        return "n/a"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}"


def table(rows: Sequence[Result]) -> str:
    head = ("benchmark", "unit", "p50", "p90", "p99", "value", "n", "target", "ok", "note")
    body = [
        (
            r.name,
            r.unit,
            fmt(r.p50),
            fmt(r.p90),
            fmt(r.p99),
            fmt(r.value),
            str(r.n or ""),
            r.target,
            {True: "PASS", False: "FAIL", None: ""}[r.ok],
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=False)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False))  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths]), *(line(b) for b in body)])


def settle() -> None:
    """Write back what building a fixture left dirty before timing anything: a tree of 100,000
    files just written (and committed) keeps the disk busy for seconds, which would time the
    kernel's writeback, not the code under test."""
    os.sync()

"""Shared pieces of the benchmark: a result row, percentiles, comparisons, the table, the peers.

Each ``bench/b_*.py`` module exposes ``run(tmp: Path) -> list[Result]``; ``bench/run.py`` runs them
in name order, resolves each row's comparisons (``Vs``) against the rows of the same run, prints
one table and writes ``bench/results/latest.json``.

A target is a ratio to a baseline measured in the same run wherever one exists (a peer doing the
same work, the bare kernel mechanism, the bare disk walk), so a busy or slow machine moves both
sides of it together; absolute targets remain only where nothing comparable can be measured.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass
class Vs:
    """This row's p50 beside the p50 of the row keyed ``base``, measured in the same run.

    With ``max_ratio`` the target is p50 / base p50 <= max_ratio; with ``max_over`` it is
    p50 - base p50 <= max_over (in the row's unit); with neither the ratio is for reference.
    """

    base: str
    label: str = ""  # short name of the baseline in the table (default: its row name)
    max_ratio: float | None = None
    max_over: float | None = None
    # filled in by ``compare``
    base_p50: float | None = None
    ratio: float | None = None
    ok: bool | None = None


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
    key: str = ""  # stable id another row's ``Vs.base`` names
    vs: list[Vs] = field(default_factory=list)
    need: str = "all"  # "all": every target must hold; "any": one is enough (``ok`` is one)

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
    key: str = "",
    vs: Iterable[Vs] = (),
    need: str = "all",
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
        key=key,
        vs=[replace(v) for v in vs],  # each row its own: compare() fills them in
        need=need,
    )


def _vs_target(v: Vs, label: str) -> str:
    if v.max_ratio is not None:
        return f"<= {v.max_ratio:g}x {label}"
    if v.max_over is not None:
        return f"<= {label} + {v.max_over:g}"
    return ""


def compare(rows: Sequence[Result]) -> None:
    """Fill in every ``Vs`` from the rows of this run and fold its targets into ``ok``.

    A baseline that did not run (``--only``) or has no figure (a peer not installable) leaves
    its comparison at n/a; the row's verdict then rests on what could be compared, and on its
    absolute target if it has one.
    """
    by_key = {r.key: r for r in rows if r.key}
    for r in rows:
        verdicts = []
        texts = []
        for v in r.vs:
            base = by_key.get(v.base)
            v.label = v.label or (base.name if base else v.base)
            if (t := _vs_target(v, v.label)) != "":
                texts.append(t)
            if base is None or base.p50 is None or r.p50 is None or base.p50 != base.p50:
                continue
            v.base_p50 = base.p50
            v.ratio = r.p50 / base.p50 if base.p50 > 0 else float("inf")
            if v.max_ratio is not None:
                v.ok = v.ratio <= v.max_ratio
            elif v.max_over is not None:
                v.ok = r.p50 - base.p50 <= v.max_over
            if v.ok is not None:
                verdicts.append(v.ok)
        if texts and not r.target:
            r.target = "p50 " + (" or " if r.need == "any" else " and ").join(texts)
        if verdicts:
            if r.need == "any":  # one target is enough, the absolute one among them
                rel = any(verdicts)
                r.ok = rel if r.ok is None else (r.ok or rel)
            else:
                rel = all(verdicts)
                r.ok = rel if r.ok is None else (r.ok and rel)


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


def _ratio(v: Vs) -> str:
    if v.ratio is None:
        return "n/a"
    return f"{v.ratio:.1f}x" if v.ratio >= 10 else f"{v.ratio:.3g}x"


def table(rows: Sequence[Result]) -> str:
    """Row, its figure (p50 or a single value), baseline/peer and ratio, target, verdict."""
    head = ("benchmark", "unit", "p50|value", "p90", "p99", "n", "baseline/peer (p50)", "ratio")
    head += ("target", "ok", "note")
    body = [
        (
            r.name,
            r.unit,
            fmt(r.p50 if r.p50 is not None else r.value),
            fmt(r.p90),
            fmt(r.p99),
            str(r.n or ""),
            " | ".join(f"{v.label}: {fmt(v.base_p50) if v.base_p50 else 'n/a'}" for v in r.vs),
            " | ".join(_ratio(v) for v in r.vs),
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


def mailslot_exe() -> str:
    """The ``mailslot`` command of the interpreter running the benchmark."""
    return shutil.which("mailslot") or str(Path(sys.executable).parent / "mailslot")


# -- the disk alone: what any reader of a tree pays --------------------------------------------


def walk(sides: Iterable[Path], *, stat: bool = True) -> int:
    """Scandir each of ``sides`` and every topic directory in it (``done/`` is not a topic: pass
    it as a side), and with ``stat`` lstat every entry of those topics: the least any reader
    that notices a change in a tree of topics must do. Returns the number of entries."""
    n = 0
    for side in sides:
        with os.scandir(side) as it:
            topics = [e.path for e in it if e.name != "done" and e.is_dir(follow_symlinks=False)]
        for topic in topics:
            with os.scandir(topic) as it:
                for e in it:
                    if stat:
                        e.stat(follow_symlinks=False)
                    n += 1
    return n


def timed_ms(fn: Callable[[], object]) -> float:
    """The wall time of one call of ``fn``, in ms."""
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


# -- processes blocked in a wait ---------------------------------------------------------------

_BLOCKED = ("poll", "select", "nanosleep")  # wchan of a process sleeping in a wait or a sleep


def wait_blocked(pid: int, timeout: float = 10.0) -> bool:
    """Wait until process ``pid`` sleeps in poll/select/epoll or a timed sleep (its main
    thread's ``/proc/PID/wchan``), i.e. it has armed its wait and checked once; False when that
    cannot be seen (not Linux, hidden wchan) or at the timeout, after which callers go anyway."""
    wchan = Path(f"/proc/{pid}/wchan")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            where = wchan.read_text()
        except OSError:
            return False
        if any(w in where for w in _BLOCKED):
            return True
        time.sleep(0.0005)
    return False


# -- the peers: other tools doing the same work, installed by the benchmark itself ---------------

PEERS = ("letterbox==1.2.2", "agent-chat-plugin==0.7.5")
PEER_VENV = HERE / "results" / ".peers-venv"
PEER_DRIVER = HERE / "peer_driver.py"


@dataclass(frozen=True)
class Peers:
    """The peers' venv: ``python`` and ``bin``, or ``why`` (one line) it could not be made."""

    python: Path | None
    bin: Path | None
    why: str = ""

    def na(self, name: str, unit: str) -> Result:
        """The row of a peer figure that could not be measured."""
        return Result(name, unit, note=f"n/a (peer not installable: {self.why})")


@functools.cache
def peers() -> Peers:
    """Create (once; cached between runs by a stamp) a venv with the peer packages, made with
    the running interpreter's ``-m venv``; on failure (no network) say why in one line."""
    tag = hashlib.sha256(f"{sys.version}|{'|'.join(PEERS)}".encode()).hexdigest()[:12]
    stamp = PEER_VENV / f".installed-{tag}"
    python, bin_ = PEER_VENV / "bin" / "python", PEER_VENV / "bin"
    if stamp.exists():
        return Peers(python, bin_)
    print(f"#   installing peers into {PEER_VENV}: {' '.join(PEERS)}", file=sys.stderr)
    shutil.rmtree(PEER_VENV, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(PEER_VENV)],
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PEERS],
    ]
    for cmd in steps:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return Peers(None, None, f"{type(e).__name__}: {e}".splitlines()[0])
        if p.returncode != 0:
            lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in lines if "ERROR" in ln] or lines or [f"exit {p.returncode}"]
            return Peers(None, None, errors[-1].strip()[:160])
    stamp.touch()
    return Peers(python, bin_)

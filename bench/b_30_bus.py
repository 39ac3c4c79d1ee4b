"""Shared-directory bus: log append, outbox put/take, and a take race.

The log append reads the agent's lines to count its waking, so it is measured on a log that
already holds a year of a busy fleet (5,000 lines), as well as on a fresh one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from common import Result, Vs, dist, pct, timed_ms

from mailslot.bus import layout, log, outbox

APPENDS = 300
ITEMS = 300
RACERS = 8
RACE_ITEMS = 400
PREFILL = 5000
AGED_TAKEN = 10_000
AGED_ROUNDS = 60

TAKER = r"""
import sys
from pathlib import Path
from mailslot.bus import outbox
root = Path(sys.argv[1])
sys.stdin.readline()
n = 0
while True:
    try:
        outbox.take(root, "beacon")
        n += 1
    except outbox.OutboxEmpty:
        break
print(n)
"""


def _append_samples(root: Path, agent: str) -> list[float]:
    samples = []
    for i in range(APPENDS):
        t = time.perf_counter_ns()
        log.append(root, agent, f"run {i}: delivered the OG card to outbox/", new_waking=True)
        samples.append((time.perf_counter_ns() - t) / 1e6)
    return samples


def _aged(tmp: Path, src: Path) -> list[Result]:
    """A put then a take, in turn, on a new bus and on one whose consumer has taken
    ``AGED_TAKEN`` items before (each with its taker's record, as a take leaves them): a take
    must cost what it takes, not the history in ``taken/``. A put still numbers past every name
    in ``taken/``, so it lists it whole."""
    new, aged = tmp / "new", tmp / "aged"
    for root in (new, aged):
        layout.init(root, consumer="beacon")
    bus = layout.Layout.at(aged)
    for n in range(1, AGED_TAKEN + 1):
        (bus.taken / f"{n:06d}-og-card.png").write_bytes(b"card")
        (bus.taken_records / f"{n:06d}-og-card.png.json").write_text('{"taken_by": "beacon"}\n')
    new_puts: list[float] = []
    new_takes: list[float] = []
    puts: list[float] = []
    takes: list[float] = []
    # a put then a take on each bus in turn, so a busy moment slows both alike; the aged bus's
    # first take sweeps taken/records/ (due once in ten minutes), and is that round's warm-up
    for i in range(AGED_ROUNDS + 1):
        for root, put_into, take_into in ((new, new_puts, new_takes), (aged, puts, takes)):
            put_into.append(timed_ms(partial(outbox.put, root, "lantern", src, note="OG card")))
            take_into.append(timed_ms(partial(outbox.take, root, "beacon")))
            if i == 0:
                put_into.clear()
                take_into.clear()
    label = f"{AGED_TAKEN:,} items taken before"
    return [
        dist("bus: outbox take, one item waiting", new_takes, "ms", key="bus.take.one"),
        dist(
            f"bus: outbox take, one item waiting, {label}",
            takes,
            "ms",
            vs=[Vs("bus.take.one", "new bus", max_ratio=1.5)],
        ),
        dist("bus: outbox put, into an empty outbox", new_puts, "ms", key="bus.put.one"),
        dist(
            f"bus: outbox put, into an empty outbox, {label}",
            puts,
            "ms",
            vs=[Vs("bus.put.one", "new bus")],
            note="numbering lists taken/ whole",
        ),
    ]


def run(tmp: Path) -> list[Result]:
    rows = []
    root = tmp / "shared"
    layout.init(root, consumer="beacon")

    fresh = _append_samples(root, "lantern")
    rows.append(
        dist(
            "bus: log append (fsync, fresh log)",
            fresh,
            "ms",
            target="p50 <= 2 ms",
            ok=pct(fresh, 50) <= 2,
        )
    )
    with (root / "LOG.md").open("a", encoding="utf-8") as f:
        for i in range(PREFILL):
            who = ("beacon", "tidal", "lantern")[i % 3]
            f.write(
                f"2026-01-01T00:00:00Z \u2014 [{who.title()}] w{i // 3 + 1:02d}: "
                "delivered the OG card to outbox/, needs Beacon to integrate\n"
            )
    busy = _append_samples(root, "tidal")
    rows.append(
        dist(
            f"bus: log append (fsync, {PREFILL:,}-line log)",
            busy,
            "ms",
            target="p50 <= 2 ms",
            ok=pct(busy, 50) <= 2,
        )
    )

    src = tmp / "og-card.png"
    src.write_bytes(os.urandom(10_000))
    puts = []
    for _ in range(ITEMS):
        t = time.perf_counter_ns()
        outbox.put(root, "lantern", src, note="OG card")
        puts.append((time.perf_counter_ns() - t) / 1e6)
    rows.append(
        dist(
            "bus: outbox put (10 KB, durable)",
            puts,
            "ms",
            target="p50 <= 5 ms",
            ok=pct(puts, 50) <= 5,
        )
    )
    takes = []
    for _ in range(ITEMS):
        t = time.perf_counter_ns()
        outbox.take(root, "beacon")
        takes.append((time.perf_counter_ns() - t) / 1e6)
    rows.append(
        dist(
            "bus: outbox take",
            takes,
            "ms",
            target="p50 <= 5 ms",
            ok=pct(takes, 50) <= 5,
        )
    )
    rows += _aged(tmp, src)

    race = tmp / "race"
    layout.init(race, consumer="beacon")
    small = tmp / "item.txt"
    small.write_bytes(b"x" * 100)
    for _ in range(RACE_ITEMS):
        outbox.put(race, "lantern", small)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TAKER, str(race)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(RACERS)
    ]
    time.sleep(1.0)  # let the interpreters start: the race, not the start, is measured
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    counts = [int(p.communicate(timeout=300)[0]) for p in procs]
    wall = time.perf_counter() - start
    taken = len(os.listdir(race / "outbox/taken")) - 1  # minus records/
    ok = sum(counts) == RACE_ITEMS == taken
    rows.append(
        Result(
            f"bus: take race ({RACERS} procs, {RACE_ITEMS} items)",
            "items/s",
            value=RACE_ITEMS / wall,
            n=RACE_ITEMS,
            target="each taken once",
            ok=ok,
            note=f"per process {min(counts)}-{max(counts)} items, {wall:.2f}s wall",
        )
    )

    exe = shutil.which("mailslot") or str(Path(sys.executable).parent / "mailslot")
    cli = []
    env = {**os.environ, "MAILSLOT_ROOT": str(root)}
    for i in range(15):
        t = time.perf_counter()
        subprocess.run(
            [exe, "log", "append", "--as", "cli", "--new-waking", f"run {i}"],
            capture_output=True,
            check=True,
            env=env,
        )
        cli.append((time.perf_counter() - t) * 1e3)
    rows.append(dist("bus: `mailslot log append` (wall)", cli, "ms", note="what an agent pays"))
    return rows

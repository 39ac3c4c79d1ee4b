"""Exchange: ``tick`` with nothing new over 10,000 topics / 100,000 entries, against
the disk rather than a clock. The tree is written directly (as a foreign agent would), then one
baseline tick parses and commits it; the timed ticks find nothing new, interleaved with a bare
walk of the same tree (scandir of every topic directory, lstat of every entry) and a listing
alone (the scandirs), so the tick is a ratio to what the disk itself costs in this run.
``exchange.send`` is measured beside the peers' sends in ``b_61_send_vs_peers``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from common import Result, Vs, dist, settle, timed_ms, walk

from mailslot.exchange.create import create_exchange
from mailslot.exchange.layout import DONE, Exchange, load_exchange
from mailslot.exchange.tick import TICK_GIT, tick

HEAVY = True  # 100,000 files and a git repo: bench/run.py runs this module last

TOPICS = 10_000
ENTRIES_PER_TOPIC = 10  # 100,000 entries
TICKS = 9


def _build(root: Path) -> None:
    for t in range(TOPICS):
        topic = f"2026-11-{1 + t % 28:02d}-topic-{t:05d}"
        dirs = {s: root / f"to-{s}" / topic for s in ("claude", "olu")}
        for d in dirs.values():
            d.mkdir()
        for n in range(1, ENTRIES_PER_TOPIC + 1):
            writer = "claude" if n % 2 else "olu"
            inbox = "olu" if writer == "claude" else "claude"
            at = f"2026-11-{1 + t % 28:02d}T10:{n:02d}:00Z"
            action = "required" if n == ENTRIES_PER_TOPIC else "fyi"
            (dirs[inbox] / f"{n:04d}-{writer}.md").write_text(
                f"---\nfrom: {writer}\nat: {at}\naction: {action}\n---\nentry {n} of {topic}\n"
            )
        if t % 3 == 0:
            (dirs["olu"] / "STATE.md").write_text(
                "status: done\ntags: []\nupdated_at: 2026-11-01T09:00:00Z\nupdated_by: claude\n"
            )


def _quiet_tick_ms(ex: Exchange) -> float:
    """One tick, timed in ms; it must find nothing new and commit nothing."""
    t0 = time.perf_counter()
    r = tick(ex)
    ms = (time.perf_counter() - t0) * 1000
    assert not r.new_entries and r.commit is None and not r.errors
    return ms


def run(tmp: Path) -> list[Result]:
    rows: list[Result] = []
    root = tmp / "big"
    create_exchange(root, ["claude", "olu"])
    # gc in the foreground, so the temp dir is not removed under a detached git gc at the end
    subprocess.run(["git", "-C", str(root), "config", "gc.autoDetach", "false"], check=True)
    t0 = time.monotonic()
    _build(root)
    built = time.monotonic() - t0
    ex = load_exchange(root)
    t0 = time.monotonic()
    first = tick(ex)
    baseline = time.monotonic() - t0
    assert not first.errors, first.errors
    settle()
    sides = [ex.inbox(s) for s in ex.sides]
    sides += [d / DONE for d in sides if (d / DONE).is_dir()]
    entries = walk(sides)  # and warms the same caches the tick finds warm
    ticks: list[float] = []
    walks: list[float] = []
    lists: list[float] = []
    for _ in range(TICKS):
        ticks.append(_quiet_tick_ms(ex))
        walks.append(timed_ms(lambda: walk(sides)))
        lists.append(timed_ms(lambda: walk(sides, stat=False)))
    disk = [Vs("tick.walk", "walk", max_ratio=1.0), Vs("tick.list", "listing")]
    rows.append(
        dist(
            "exchange tick, nothing new (10k topics / 100k entries, git)",
            ticks,
            "ms",
            key="tick.quiet",
            vs=disk,
            note=f"tree built in {built:.1f}s; baseline tick {baseline:.1f}s; "
            f"load {os.getloadavg()[0]:.1f}",
        )
    )
    rows.append(
        dist(
            "bare walk of the same tree: scandir every topic, lstat every entry",
            walks,
            "ms",
            key="tick.walk",
            note=f"baseline, interleaved with the ticks; {entries:,} entries",
        )
    )
    rows.append(
        dist(
            "listing alone of the same tree: scandir every topic",
            lists,
            "ms",
            key="tick.list",
            note="baseline, interleaved with the ticks",
        )
    )
    # Every 10 minutes a tick also asks git whether anything it does not scan changed (an edit
    # inside an archived topic); that tick, aged into being here, for reference.
    git_path = ex.meta / TICK_GIT
    periodic = []
    for _ in range(3):
        checked = json.loads(git_path.read_bytes())
        git_path.write_text(json.dumps({**checked, "git_checked_ns": 0}))
        periodic.append(_quiet_tick_ms(ex))
    rows.append(
        dist(
            "exchange tick, nothing new, with its 10-minute git check",
            periodic,
            "ms",
            vs=[Vs("tick.walk", "walk")],
            note="for reference: one tick in five on a 2-minute timer",
        )
    )
    return rows

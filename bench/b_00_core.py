"""Core primitives: durable create, locked append, cross-process wake; and the wake mechanisms
hand-run agents use, measured in the same run (fswatch -1 respawned per wait, a 1 s poller). The
command's start time is measured beside the peers' in ``b_62_start_vs_peers``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import Result, Vs, dist, pct

from mailslot.core.cursor import CursorStore, SeenSet
from mailslot.core.fsio import locked_append, numbered_create

WAKES = 300
SEEN_KEYS = 10_000
SEEN_ROUNDS = 300

WAITER = r"""
import os, sys, time
from pathlib import Path
from mailslot.core.wait import Watch
log = Path(sys.argv[1]); n = int(sys.argv[2])
out = os.fdopen(1, "w", buffering=1)
offset = 0
with Watch([log]) as w:          # armed once, before the first check
    out.write("ready\n")
    for _ in range(n):
        while True:
            size = os.stat(log).st_size
            if size > offset:
                break
            w.wait(10)
        woke = time.monotonic_ns()
        with open(log, "rb") as f:
            f.seek(offset); data = f.read()
        offset += len(data)
        sent = int(data.split()[-1])
        out.write(f"{(woke - sent) / 1e6}\n")
"""

SPAWN_WAITER = r"""
import os, subprocess, sys, time
log = sys.argv[1]; n = int(sys.argv[2]); mode = sys.argv[3]
out = os.fdopen(1, "w", buffering=1)
offset = os.stat(log).st_size
for _ in range(n):
    if mode == "fswatch":
        p = subprocess.Popen(["fswatch", "-1", log], stdout=subprocess.DEVNULL)
        time.sleep(0.3)                # let fswatch arm before the writer goes
        out.write("ready\n")
        p.wait()
    else:
        out.write("ready\n")
        while os.stat(log).st_size <= offset:
            time.sleep(1.0)            # a hand-run agent's scheduled check
    woke = time.monotonic_ns()
    data = open(log, "rb").read()[offset:]
    offset += len(data)
    out.write(f"{(woke - int(data.split()[-1])) / 1e6}\n")
"""


def _cross_process(
    tmp: Path, name: str, script: str, n: int, *extra: str, jitter: float = 0.0
) -> list[float]:
    log = tmp / f"{name}.log"
    log.touch()
    p = subprocess.Popen(
        [sys.executable, "-c", script, str(log), str(n), *extra], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    samples = []
    for i in range(n):
        assert p.stdout.readline().strip() == "ready"
        if jitter:
            time.sleep(jitter * ((i * 7919) % 100) / 100)  # spread the poller's phase
        else:
            time.sleep(0.002)  # the waiter is blocked in wait(), not still arming
        locked_append(log, f"{time.monotonic_ns()}\n")
        samples.append(float(p.stdout.readline()))
    p.wait(timeout=30)
    return samples


def _persistent_wake(tmp: Path) -> list[float]:
    log = tmp / "wake.log"
    log.touch()
    p = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(log), str(WAKES)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    samples = []
    for _ in range(WAKES):
        time.sleep(0.002)  # let the waiter block again
        locked_append(log, f"{time.monotonic_ns()}\n")
        samples.append(float(p.stdout.readline()))
    p.wait(timeout=30)
    return samples


def _seen_marks(tmp: Path) -> list[Result]:
    """A reader with 10,000 keys already seen takes one more: the seen-mark as every delivery
    writes it (re-read what was appended, append the key), beside rewriting the whole set
    atomically without fsync (what each delivery used to cost), interleaved."""
    store = CursorStore("bench", tmp / "state")
    keys = {f"2026-11-29-t{i // 4:05d}/{i % 4 + 1:04d}-claude" for i in range(SEEN_KEYS)}
    store.save_seen("reader", SeenSet(set(keys)))
    log = store.seen_log("reader")
    log.load()
    whole = SeenSet(set(keys))
    took: list[float] = []
    rewrote: list[float] = []
    for i in range(SEEN_ROUNDS):
        key = f"2026-11-30-new/{i + 1:04d}-claude"
        t = time.perf_counter_ns()
        log.load()
        log.add([key])
        took.append((time.perf_counter_ns() - t) / 1e3)
        whole.keys.add(key)
        t = time.perf_counter_ns()
        store.save_seen("rewritten", whole)
        rewrote.append((time.perf_counter_ns() - t) / 1e3)
    return [
        dist(
            f"seen-mark: take 1 key, {SEEN_KEYS:,} seen (load what was appended + append)",
            took,
            "us",
            key="core.seen",
            vs=[Vs("core.seen.rewrite", "whole-set rewrite", max_ratio=0.1)],
            note="no fsync: a power cut re-delivers, never loses",
        ),
        dist(
            f"seen-mark: the whole {SEEN_KEYS:,}-key set rewritten (temp + rename, no fsync)",
            rewrote,
            "us",
            key="core.seen.rewrite",
            note="baseline: what every delivery wrote before the seen-mark was appended",
        ),
    ]


def run(tmp: Path) -> list[Result]:
    rows = []

    # Durable create: temp + fsync + link + dir fsync, numbered across a sibling dir.
    a, b = tmp / "to-olu" / "t", tmp / "to-claude" / "t"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    body = "---\nfrom: claude\nat: 2026-11-29T18:14:00.123Z\naction: fyi\n---\n" + "x" * 400
    create = []
    for _ in range(500):
        t = time.perf_counter_ns()
        numbered_create(a, "claude.md", body, siblings=[b], lock=tmp / "send.lock")
        create.append((time.perf_counter_ns() - t) / 1e6)
    p50 = pct(create, 50)
    rows.append(
        dist(
            "durable create (numbered, fsync)",
            create,
            "ms",
            target="p50 <= 1.5 ms",
            ok=p50 <= 1.5,
            key="core.create",
        )
    )

    # Locked append without fsync.
    log = tmp / "LOG.md"
    line = "2026-11-29 — [claude] w01: delivered the OG card to outbox/\n"
    appends = []
    for _ in range(20000):
        t = time.perf_counter_ns()
        locked_append(log, line)
        appends.append((time.perf_counter_ns() - t) / 1e3)
    rows.append(
        dist(
            "locked append (no fsync)",
            appends,
            "us",
            target="p50 <= 20 us",
            ok=pct(appends, 50) <= 20,
        )
    )
    fs = []
    for _ in range(300):
        t = time.perf_counter_ns()
        locked_append(log, line, fsync=True)
        fs.append((time.perf_counter_ns() - t) / 1e3)
    rows.append(dist("locked append (fsync)", fs, "us", note="for reference"))

    rows += _seen_marks(tmp)

    # Cross-process wake: one process blocked in Watch.wait, another appends.
    wake = _persistent_wake(tmp)
    rows.append(
        dist(
            "wake latency, cross-process (inotify)",
            wake,
            "ms",
            key="core.wake",
            target="p50 <= 0.5, p99 <= 5 ms",
            ok=pct(wake, 50) <= 0.5 and pct(wake, 99) <= 5,
        )
    )

    # The hand-run agents' mechanisms, same machine, same run.
    if shutil.which("fswatch"):
        fsw = _cross_process(tmp, "fswatch", SPAWN_WAITER, 15, "fswatch")
        rows.append(
            dist(
                "hand-run: fswatch -1 respawned per wait",
                fsw,
                "ms",
                note=f"mailslot p50 is {pct(fsw, 50) / pct(wake, 50):,.0f}x faster",
            )
        )
    else:
        rows.append(
            Result(
                "hand-run: fswatch -1 respawned per wait",
                "ms",
                note="skipped: fswatch not installed (make sysdeps)",
            )
        )
    poll = _cross_process(tmp, "poll", SPAWN_WAITER, 8, "poll", jitter=0.9)
    rows.append(
        dist(
            "hand-run: 1 s poller",
            poll,
            "ms",
            note=f"mailslot p50 is {pct(poll, 50) / pct(wake, 50):,.0f}x faster",
        )
    )

    return rows

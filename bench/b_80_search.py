"""Search: a query over 100,000 messages, a refresh that finds nothing new, the first index, and
whether indexing keeps up with 500 new messages a second.

The corpus is what a busy fleet leaves after months: an exchange of 6,000 topics with 60,000
entries, 20 chats of 1,000 messages, a LOG.md of 15,000 lines and 5,000 peer inbox messages,
written by hand the way foreign agents write (no mailslot involved), so nothing is pre-indexed.
Words follow a Zipf law over a 5,000-word vocabulary, so some words are in half the messages and
most are rare, as in real text. Queries mix rare and common words, two-word ANDs, phrases,
prefixes and a ``from:`` filter; each is timed once per round with the index already current
(``fresh=False``) and again with the refresh a one-shot ``mailslot search`` does (``fresh=True``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from common import Result, dist, settle

from mailslot.search import refresh, search
from mailslot.search.store import Index

HEAVY = True  # builds a 100,000-message tree: run after the light modules

TOPICS = 6000
ENTRIES_PER_TOPIC = 10
CHATS = 20
CHAT_MESSAGES = 1000
LOG_LINES = 15000
PEER_ITEMS = 5000
TOTAL = TOPICS * ENTRIES_PER_TOPIC + CHATS * CHAT_MESSAGES + LOG_LINES + PEER_ITEMS
VOCABULARY = 5000
ROUNDS = 10
RATE = 500  # new messages per second in the keep-up run
KEEP_UP_SECONDS = 10

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "den", "gar", "pol", "tri", "zu"]


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class _Text:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(self.rng)
        weights = [1 / (i + 1) for i in range(len(self.words))]
        self.cum = list(_accumulate(weights))

    def sentence(self, n: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum, k=n))


def _accumulate(xs: list[float]) -> list[float]:
    out, total = [], 0.0
    for x in xs:
        total += x
        out.append(total)
    return out


def _entry(sender: str, body: str, at: str) -> str:
    return f"---\nfrom: {sender}\nat: '{at}'\naction: fyi\n---\n{body}\n"


def _chat_block(sender: str, body: str, at: str) -> str:
    return f"\n---MSG---\nFROM: {sender}\nTIME: {at}\n---\n{body}\n"


def _build(root: Path, text: _Text) -> None:
    """An exchange, chats, a bus and a peer inbox, all under ``root``."""
    meta = root / ".mailslot"
    meta.mkdir(parents=True)
    (meta / "config").write_text("version: 1\nsides: [claude, olu]\nhumans: {}\ngit: false\n")
    for side in ("claude", "olu"):
        (root / f"to-{side}" / "done").mkdir(parents=True)
    at = "2026-11-29T18:14:00.000Z"
    for t in range(TOPICS):
        topic = f"2026-11-{1 + t % 28:02d}-t{t}-{text.sentence(1)}"
        archived = t % 3 == 0
        for side, other in (("olu", "claude"), ("claude", "olu")):
            d = root / f"to-{side}" / ("done" if archived else "") / topic
            d.mkdir(parents=True)
            for n in range(ENTRIES_PER_TOPIC // 2):
                number = 2 * n + (1 if side == "olu" else 2)
                (d / f"{number:04d}-{other}.md").write_text(_entry(other, text.sentence(30), at))
    for c in range(CHATS):
        blocks = [_chat_block(f"agent{i % 5}", text.sentence(20), at) for i in range(CHAT_MESSAGES)]
        (root / f"chat-2026-11-29-{c:06d}.txt").write_text("".join(blocks).lstrip("\n"))
    lines = [
        f"2026-11-29T18:14:03Z — [Agent{i % 7}] w{i // 7 + 1:02d}: {text.sentence(12)}\n"
        for i in range(LOG_LINES)
    ]
    (root / "LOG.md").write_text("# LOG\n" + "".join(lines))
    inbox = root / "peer" / "inbox"
    inbox.mkdir(parents=True)
    for i in range(PEER_ITEMS):
        record = {"from": f"peer{i % 9}", "subject": text.sentence(4), "body": text.sentence(25)}
        record["received_at"] = at
        (inbox / f"20261129T181400.{i:06d}Z-peer{i % 9}-{i:08x}.json").write_text(
            json.dumps(record)
        )


def _queries(text: _Text) -> list[str]:
    w = text.words
    common, middling, rare = w[:20], w[100:300], w[2000:]
    rng = random.Random(7)
    out = []
    for _ in range(8):
        out += [
            rng.choice(rare),
            rng.choice(middling),
            rng.choice(common),
            f"{rng.choice(middling)} {rng.choice(common)}",
            f'"{rng.choice(common)} {rng.choice(common)}"',
            rng.choice(middling)[:4] + "*",
            f"{rng.choice(middling)} from:agent3",
        ]
    return out


_WRITER = r"""
import os, sys, time
from pathlib import Path
root, rate, seconds = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
at = "2026-11-30T09:00:00.000Z"
chat = root / "chat-2026-11-29-000000.txt"
start = time.monotonic()
n = 0
sys.stdout.write(f"{time.time()}\n"); sys.stdout.flush()
while n < rate * seconds:
    due = start + n / rate
    wait = due - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    kind = n % 5
    word = f"fresh{n}"
    if kind < 2:
        d = root / "to-olu" / f"2026-11-30-live{n // 50}"
        d.mkdir(exist_ok=True)
        (d / f"{n % 50 + 1:04d}-claude.md").write_text(
            f"---\nfrom: claude\nat: '{at}'\naction: fyi\n---\n{word} arrived\n")
    elif kind < 4:
        with open(chat, "a") as f:
            f.write(f"\n---MSG---\nFROM: agent1\nTIME: {at}\n---\n{word} said\n")
    else:
        with open(root / "LOG.md", "a") as f:
            f.write(f"2026-11-30T09:00:00Z — [Agent2] w99: {word} logged\n")
    n += 1
print(n)
"""


def _keep_up(root: Path, base: Path) -> Result:
    """A writer adds RATE messages/s for KEEP_UP_SECONDS; a loop refreshes as fast as it can.
    Lag: how long after a message was written the index held it (by count, at each refresh)."""
    with Index(root, base=base) as ix:
        before = ix.count()
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root), str(RATE), str(KEEP_UP_SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    t0 = float(proc.stdout.readline())
    lags: list[float] = []
    seen = 0
    refreshes = 0
    deadline = time.monotonic() + KEEP_UP_SECONDS + 30
    expected = RATE * KEEP_UP_SECONDS
    while seen < expected and time.monotonic() < deadline:
        r = refresh(root, base=base)
        refreshes += 1
        done = time.time()
        now_seen = min(r.total - before, expected)
        for i in range(seen, now_seen):
            lags.append((done - (t0 + i / RATE)) * 1e3)
        seen = max(seen, now_seen)
    proc.wait()
    rate = seen / max(1e-9, (time.time() - t0))
    ok = seen == expected and sorted(lags)[len(lags) // 2] <= 1000
    return dist(
        f"search: lag from write to indexed, {RATE} new msg/s for {KEEP_UP_SECONDS}s",
        lags,
        "ms",
        target="all indexed, p50 lag <= 1 s",
        ok=ok,
        note=f"{seen}/{expected} indexed in {refreshes} refreshes ({rate:.0f} msg/s overall)",
    )


def run(tmp: Path) -> list[Result]:
    root = tmp / "world"
    base = tmp / "state"
    text = _Text(42)
    _build(root, text)
    settle()
    rows = []

    t, cpu = time.perf_counter(), time.process_time()
    first = refresh(root, base=base)
    took, cpu = time.perf_counter() - t, time.process_time() - cpu
    assert first.total == TOTAL, first
    rows.append(
        Result(
            f"search: first index of {TOTAL:,} messages",
            "msg/s",
            value=TOTAL / took,
            note=f"{took:.1f}s wall, {cpu:.1f}s CPU ({TOTAL / cpu:,.0f} msg per CPU-second)",
        )
    )

    queries = _queries(text)
    stale, fresh, hits = [], [], 0
    for _ in range(ROUNDS):
        for q in queries:
            t = time.perf_counter()
            hits += len(search([root], q, fresh=False, base=base))
            stale.append((time.perf_counter() - t) * 1e3)
    fresh_cpu = []
    for q in queries:
        t, cpu = time.perf_counter(), time.process_time()
        search([root], q, fresh=True, base=base)
        fresh.append((time.perf_counter() - t) * 1e3)
        fresh_cpu.append((time.process_time() - cpu) * 1e3)
    p50 = sorted(stale)[len(stale) // 2]
    rows.append(
        dist(
            f"search: query over {TOTAL:,} messages (index current)",
            stale,
            "ms",
            target="p50 <= 30 ms",
            ok=p50 <= 30,
            note=f"{len(queries)} queries x {ROUNDS}; {hits / len(stale):.1f} hits per query",
        )
    )
    rows.append(
        dist(
            f"search: refresh finding nothing new + query, {TOTAL:,} messages",
            fresh,
            "ms",
            note=f"CPU p50 {sorted(fresh_cpu)[len(fresh_cpu) // 2]:.0f} ms; 12,000 topic dirs",
        )
    )
    rows.append(_keep_up(root, base))
    size = sum(p.stat().st_size for p in (base / "search").iterdir())
    rows.append(
        Result("search: index size on disk", "bytes", value=size, note=f"{TOTAL:,} messages")
    )
    os.sync()
    return rows

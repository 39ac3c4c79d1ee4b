"""A watcher racing many writers, in real processes: every entry delivered exactly once."""

from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
import sys
from pathlib import Path

import pytest
from exhelp import GENEROUS

from mailslot.exchange import list_entries, list_topics, load_exchange, send

PER_WRITER = 15
WRITERS = 3

COLLECTOR = r"""
import json, sys
from pathlib import Path
from mailslot.exchange.layout import load_exchange
from mailslot.exchange.watch import Watcher
ex = load_exchange(Path(sys.argv[1])); want = int(sys.argv[2])
got = []
with Watcher(ex, "olu") as w:
    print("ready", flush=True)
    while len(got) < want:
        got += [i.key for i in w.watch(60).items]
print(json.dumps(got), flush=True)
"""


def _writer(root: str, n: int, start: mp.synchronize.Event) -> None:
    ex = load_exchange(Path(root))
    start.wait()
    for i in range(PER_WRITER):
        # alternate: a brand-new topic, then an entry in an existing one
        slug = f"w{n}-t{i}" if i % 2 == 0 else f"w{n}-t{i - 1}"
        send(ex, "claude", slug, "fyi" if i % 3 else "required", f"writer {n} message {i}")


@pytest.mark.slow
def test_every_entry_from_racing_writers_is_delivered_exactly_once(ex) -> None:
    total = PER_WRITER * WRITERS
    collector = subprocess.Popen(
        [sys.executable, "-c", COLLECTOR, str(ex.root), str(total)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert collector.stdout is not None
    assert collector.stdout.readline().strip() == "ready"
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(ex.root), n, start)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(GENEROUS)
        assert p.exitcode == 0
    out, err = collector.communicate(timeout=GENEROUS * 2)
    assert collector.returncode == 0, err
    delivered = json.loads(out.strip().splitlines()[-1])
    written = [
        f"{t.name}/{e.number:04d}-{e.sender}"
        for t in list_topics(ex)
        for e in list_entries(ex, t.name)
    ]
    assert len(written) == total
    assert sorted(delivered) == sorted(written)  # none missed, none twice

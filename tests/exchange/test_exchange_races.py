"""Concurrent writers from both sides, in real processes: unique numbers, nothing overwritten."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
from pathlib import Path

import pytest

from mailslot.exchange import list_entries, load_exchange, send

PER_PROCESS = 25


def _writer(root: str, agent: str, topic: str, start: mp.synchronize.Event) -> None:
    ex = load_exchange(Path(root))
    start.wait()
    for i in range(PER_PROCESS):
        send(ex, agent, topic, "fyi", f"{agent} message {i} from pid")


@pytest.mark.slow
def test_concurrent_sends_from_both_sides_never_share_a_number(ex) -> None:
    topic = send(ex, "claude", "race", "fyi", "opening").topic
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    agents = ["claude", "olu", "will", "olu", "claude", "olu"]
    procs = [ctx.Process(target=_writer, args=(str(ex.root), a, topic, start)) for a in agents]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    entries = list_entries(ex, topic)
    numbers = [e.number for e in entries]
    assert len(entries) == 1 + PER_PROCESS * len(agents)
    assert sorted(numbers) == list(range(1, len(entries) + 1))  # unique and gapless
    bodies = [e.body for e in entries[1:]]
    for a in set(agents):
        mine = [b for b in bodies if b.startswith(f"{a} message")]
        assert len(mine) == PER_PROCESS * agents.count(a)  # nothing overwritten or lost
    assert all(e.error is None for e in entries)


@pytest.mark.slow
def test_concurrent_cli_sends_from_both_sides(ex) -> None:
    topic = send(ex, "olu", "cli-race", "fyi", "opening").topic
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mailslot",
                "--root",
                str(ex.root),
                "--as",
                agent,
                "exchange",
                "send",
                "--topic",
                topic,
                "--action",
                "fyi",
                f"from {agent} #{i}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
        for agent in ("claude", "olu")
    ]
    paths = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        paths.append(out.strip())
    assert len(set(paths)) == len(paths) == 12
    numbers = sorted(int(Path(p).name[:4]) for p in paths)
    assert numbers == list(range(2, 14))
    for p in paths:
        side = "claude" if "-claude.md" in p else "olu"
        assert p.startswith("to-olu/" if side == "claude" else "to-claude/")

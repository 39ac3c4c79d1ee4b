"""Writers in other processes while the index is refreshed: nothing is lost, nothing doubled."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from search_helpers import Roots

from mailslot.search import refresh, search
from mailslot.search.store import Index

pytestmark = pytest.mark.slow

N = 60  # messages per writer

WRITER = r"""
import sys
from pathlib import Path
from mailslot import chat
from mailslot.bus import log
from mailslot.exchange import load_exchange, send
kind, root, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    word = f"{kind}token{i}"
    if kind == "entry":
        send(load_exchange(root), "olu" if i % 2 else "claude", f"busy-{i % 7}", "fyi", word)
    elif kind == "said":
        chat.say(root, word, "alice")
    else:
        log.append(root, f"agent{i}", word, new_waking=True)
print("done")
"""

REFRESHER = r"""
import sys
from mailslot.search import refresh
for _ in range(int(sys.argv[2])):
    refresh(sys.argv[1])
print("done")
"""


def test_writers_and_refreshers_racing_lose_and_double_nothing(roots: Roots) -> None:
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, kind, str(where), str(N)])
        for kind, where in (
            ("entry", roots.ex.root),
            ("said", roots.chat_file),
            ("line", roots.bus),
        )
    ]
    refreshers = [
        subprocess.Popen([sys.executable, "-c", REFRESHER, str(r), "15"]) for r in roots.all
    ]
    while any(w.poll() is None for w in writers):
        for r in roots.all:
            refresh(r)
        time.sleep(0.01)
    for p in writers + refreshers:
        assert p.wait(timeout=120) == 0
    time.sleep(0.05)
    final = [refresh(r) for r in roots.all]
    assert sum(r.total for r in final) == 7 + 3 * N
    for kind in ("entry", "said", "line"):
        for i in range(N):
            assert len(search(roots.all, f"{kind}token{i}", fresh=False)) == 1
    with Index(roots.ex.root) as ix:  # one row per message, however many refreshed at once
        names = ix.db.execute("SELECT count(*), count(DISTINCT path) FROM msg").fetchone()
        assert names[0] == names[1] == 3 + N


def test_a_message_written_within_the_same_clock_tick_is_not_missed(roots: Roots) -> None:
    """A topic directory listed in the same mtime tick as a write to it is listed again."""
    from mailslot.exchange import send

    for i in range(30):
        send(roots.ex, "olu", "gate-bug", "fyi", f"tick{i}")
        refresh(roots.ex.root)  # often in the same 4 ms tick as the send
    assert all(search([roots.ex.root], f"tick{i}", fresh=False) for i in range(29))
    assert search([roots.ex.root], "tick29")

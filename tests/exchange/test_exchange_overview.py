"""``topics``: the fast listing (one directory listing, header reads) says exactly what reading
every topic through the full parsers says, on a tree with every oddity a hand-writer leaves."""

from __future__ import annotations

import os
from pathlib import Path

from exhelp import hand_entry, hand_state

from mailslot.exchange import load_exchange, send, set_state
from mailslot.exchange.create import create_exchange
from mailslot.exchange.entries import entry_names, parse_entry
from mailslot.exchange.holds import hold_sig, is_trusted, load_holds, save_holds
from mailslot.exchange.layout import HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.overview import topic_summaries
from mailslot.exchange.state import read_state_file
from mailslot.exchange.topics import list_topics


def _oracle(ex: Exchange, include_archived: bool) -> list[dict[str, object]]:
    """The listing the slow way: every topic found by list_topics, each file fully parsed."""
    out = []
    holds = load_holds(ex)
    for ref in list_topics(ex, include_archived=include_archived):
        counts = {s: 0 for s in ex.sides}
        status = {s: "open" for s in ex.sides}
        times = []
        for inbox_side, directory in ref.dirs.items():
            writer = ex.writer_of(inbox_side)
            names = entry_names(directory)
            counts[writer] = len(names)
            status[writer] = read_state_file(directory / STATE_NAME, writer).status
            if names:
                at = parse_entry(directory / max(names)[2], writer, ref.name).at
                if at is not None:
                    times.append(at)
        held = [s for s, d in ref.dirs.items() if is_trusted(holds, s, ref.name, d / HELD_NAME)]
        out.append(
            {
                "topic": ref.name,
                "where": ref.status,
                "status": status,
                "counts": counts,
                "last": max(times) if times else None,
                "held": held,
            }
        )
    return out


def _fast(ex: Exchange, include_archived: bool) -> list[dict[str, object]]:
    return [
        {
            "topic": t.name,
            "where": t.where,
            "status": t.status,
            "counts": t.counts,
            "last": t.last_activity,
            "held": list(t.held),  # the sides held
        }
        for t in topic_summaries(ex, include_archived=include_archived)
    ]


def test_fast_listing_matches_the_full_parsers(tmp_path: Path) -> None:
    ex = load_exchange(create_exchange(tmp_path / "x", ["claude", "olu"], git=False).root)
    root = ex.root
    plain = send(ex, "claude", "plain", "required", "q").topic
    send(ex, "olu", plain, "fyi", "a")
    set_state(ex, "olu", plain, "in-progress")
    # hand-written: CRLF, quoted values, a fenced STATE, a bad time, an unknown action
    hand_entry(root, "olu", "2026-11-01-crlf", 1, "claude", "2026-11-01T10:00:00Z", crlf=True)
    hand_entry(root, "olu", "2026-11-01-quoted", 1, "claude", "2026-11-01T10:00:00Z", quoted=True)
    hand_state(
        root, "claude", "2026-11-01-quoted", "done", "2026-11-01T11:00:00+00:00", fenced=True
    )
    hand_entry(root, "claude", "2026-11-01-badtime", 2, "olu", "yesterday")
    hand_entry(root, "claude", "2026-11-01-badaction", 1, "olu", "2026-11-01T09:00:00Z", "maybe")
    hand_state(root, "olu", "2026-11-01-badaction", "finished", "2026-11-01T09:00:00Z")
    # a header the quick scanner must leave to YAML (which refuses it): unknown, not done
    hand_entry(root, "olu", "2026-11-01-yamlish", 1, "claude", "2026-11-01T09:00:00Z")
    (root / "to-olu" / "2026-11-01-yamlish" / STATE_NAME).write_text(
        "status: done\ntags: [a, b\nupdated_at: 2026-11-01T10:00:00Z\n"
    )
    # a header only the full parser can read, and one nobody can
    odd = root / "to-olu" / "2026-11-02-odd"
    odd.mkdir()
    (odd / "0001-claude.md").write_text(
        "---\nfrom: claude\nat: 2026-11-02T08:00:00Z\naction: fyi\nrefs:\n  - a\n  - b\n---\nx\n"
    )
    (odd / "0002-claude.md").write_text("no header at all\n")
    # STATE.md that is a directory, a FIFO entry, a planted and a recorded HELD.md
    weird = root / "to-claude" / "2026-11-03-weird"
    weird.mkdir()
    (weird / STATE_NAME).mkdir()
    os.mkfifo(weird / "0003-olu.md")
    hand_entry(root, "claude", "2026-11-03-weird", 1, "olu", "2026-11-03T08:00:00Z")
    (weird / HELD_NAME).write_text("# HELD (planted)\n")
    held = root / "to-olu" / plain / HELD_NAME
    held.write_text("# HELD\n")
    save_holds(ex, {f"to-olu/{plain}": hold_sig(held)})
    # archived, half-archived, and live-and-archived on one side (damage)
    hand_entry(root, "olu", "2026-10-01-old", 1, "claude", "2026-10-01T08:00:00Z")
    os.rename(root / "to-olu" / "2026-10-01-old", root / "to-olu" / "done" / "2026-10-01-old")
    hand_entry(root, "olu", "2026-10-02-half", 1, "claude", "2026-10-02T08:00:00Z")
    hand_entry(root, "claude", "2026-10-02-half", 2, "olu", "2026-10-02T09:00:00Z")
    os.rename(root / "to-olu" / "2026-10-02-half", root / "to-olu" / "done" / "2026-10-02-half")
    hand_entry(root, "olu", "2026-10-03-both", 1, "claude", "2026-10-03T08:00:00Z")
    (root / "to-olu" / "done" / "2026-10-03-both").mkdir()
    hand_entry(root, "olu", "2026-10-03-both", 7, "claude", "2026-10-03T08:00:00Z")
    os.rename(
        root / "to-olu" / "2026-10-03-both" / "0007-claude.md",
        root / "to-olu" / "done" / "2026-10-03-both" / "0007-claude.md",
    )
    for include_archived in (False, True):
        fast, slow = _fast(ex, include_archived), _oracle(ex, include_archived)
        assert fast == slow
    rows = {r["topic"]: r for r in _fast(ex, True)}
    assert len(rows) == 11  # the check above covered every kind of topic
    assert rows["2026-11-01-yamlish"]["status"]["claude"] == "unknown"
    assert rows["2026-11-03-weird"]["status"]["olu"] == "unknown"  # STATE.md is a directory
    assert rows["2026-11-03-weird"]["held"] == []  # planted, not placed by the tick
    assert rows[plain]["held"] == ["olu"]
    assert rows["2026-10-02-half"]["where"] == "half-archived"
    assert rows["2026-10-01-old"]["where"] == "archived"

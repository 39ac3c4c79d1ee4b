"""A long-lived watcher woken by one entry renamed into a topic it listed (the common wake, read
in one pass): what it delivers is what a fresh look delivers -- the sender checked against the
side's members and the body's ``from`` claim, the path the entry's own, the time parsed as the
strict parser parses it."""

from __future__ import annotations

import os
import threading

import pytest
from exhelp import GENEROUS

from mailslot.exchange import send
from mailslot.exchange.entries import parse_entry
from mailslot.exchange.layout import Exchange
from mailslot.exchange.watch import Delivered, Watcher, mark_all_seen


def _renamed_in_while_blocked(ex: Exchange, w: Watcher, topic: str, name: str, text: str):
    """The entry's temp written first, then renamed in once ``w`` is blocked in its watch."""
    d = ex.inbox("olu") / topic
    tmp = d / f".{name}.partial"
    tmp.write_text(text)
    got: list[object] = []
    armed = threading.Event()
    t = threading.Thread(
        target=lambda: got.append(w.watch(GENEROUS, on_armed=armed.set)), daemon=True
    )
    t.start()
    assert armed.wait(GENEROUS)
    os.rename(tmp, d / name)
    t.join(GENEROUS)
    (res,) = got
    (item,) = res.items  # type: ignore[attr-defined]
    assert isinstance(item, Delivered) and item.entry is not None
    return item, d / name


@pytest.mark.parametrize(
    ("name", "claimed", "warned"),
    [
        ("0002-claude.md", "claude", None),
        ("0002-will.md", "will", None),  # a human on claude's side
        ("0002-mallory.md", "mallory", "file name says 'mallory', who is not on claude's side"),
        ("0002-claude.md", "olu", "body claims from 'olu'; the transport says 'claude'"),
    ],
)
def test_an_entry_renamed_in_reads_as_a_fresh_look_reads_it(
    ex: Exchange, name: str, claimed: str, warned: str | None
) -> None:
    topic = send(ex, "claude", "wake", "fyi", "opening").topic
    mark_all_seen(ex, "olu")
    text = f"---\nfrom: {claimed}\nat: 2026-11-29T18:14:00.5+01:00\naction: required\n---\nhi\n"
    with Watcher(ex, "olu") as w:
        item, path = _renamed_in_while_blocked(ex, w, topic, name, text)
    entry = item.entry
    assert entry is not None
    assert item.path == path and str(item.path) == str(path) and entry.path == path
    full = parse_entry(path, "claude", topic)
    assert entry.at is not None and full.at is not None
    assert entry.at.isoformat() == full.at.isoformat()  # the same instant, in UTC alike
    assert (entry.at, entry.action, entry.body, entry.meta) == (
        full.at,
        full.action,
        full.body,
        full.meta,
    )
    if warned is None:
        assert entry.verified and entry.warning is None
    else:
        assert entry.warning is not None and warned in entry.warning
        assert entry.verified == (not name.endswith("mallory.md"))


def test_an_impossible_time_reads_as_the_strict_parser_reads_it(ex: Exchange) -> None:
    topic = send(ex, "claude", "wake", "fyi", "opening").topic
    mark_all_seen(ex, "olu")
    text = "---\nfrom: claude\nat: 2026-02-30T18:14:00Z\naction: required\n---\nhi\n"
    with Watcher(ex, "olu") as w:
        item, path = _renamed_in_while_blocked(ex, w, topic, "0002-claude.md", text)
    assert item.entry is not None
    full = parse_entry(path, "claude", topic)
    assert full.at is None and (item.entry.at, item.entry.error) == (full.at, full.error)

"""``follow`` keeps the index current from file events, without a search asking for it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from exhelp import HAND_HEAD, finish_writer, now_stamp, open_writer
from search_helpers import Roots, hand_entry

from mailslot import chat
from mailslot.bus import log
from mailslot.exchange import send
from mailslot.search import Refreshed, events, follow, search
from mailslot.web import peer
from shared_helpers import with_watch_limit


@pytest.fixture
def following(roots: Roots, monkeypatch) -> Iterator[list[Refreshed]]:
    monkeypatch.setattr(events, "RESCAN_SECONDS", 3600.0)  # only events can wake it
    reports: list[Refreshed] = []
    stop = threading.Event()
    t = threading.Thread(
        target=follow, args=(roots.all, stop), kwargs={"on_refresh": reports.append}
    )
    t.start()
    deadline = time.monotonic() + 30
    while len(reports) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    yield reports
    stop.set()
    t.join(timeout=30)
    assert not t.is_alive()


def _indexed(roots: Roots, word: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if search(roots.all, word, fresh=False):
            return True
        time.sleep(0.01)
    return False


def test_messages_on_every_channel_are_indexed_as_they_land(
    roots: Roots, following: list[Refreshed]
) -> None:
    assert len(following) >= 3 and sum(r.total for r in following[:3]) == 7
    send(roots.ex, "olu", "gate-bug", "fyi", "an aardvark in an old topic")
    assert _indexed(roots, "aardvark")
    send(roots.ex, "claude", "new-topic", "fyi", "a bandicoot in a new topic")
    assert _indexed(roots, "bandicoot")
    chat.say(roots.chat_file, "a capybara said", "alice")
    assert _indexed(roots, "capybara")
    log.append(roots.bus, "lantern", "a dingo logged")
    assert _indexed(roots, "dingo")
    peer.store(roots.bus / "peer" / "inbox", "beacon", None, "an echidna mailed")
    assert _indexed(roots, "echidna")


def test_an_entry_written_in_place_is_indexed_when_its_writer_closes_it(
    roots: Roots, following: list[Refreshed]
) -> None:
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    entry = topic / "0009-olu.md"
    before = len(following)
    writer = open_writer(entry, HAND_HEAD.format(at=now_stamp()) + "the first half: numbat\n")
    try:
        deadline = time.monotonic() + 10
        while len(following) == before:  # its events were taken and its topic refreshed
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not search(roots.all, "numbat", fresh=False)
        assert following[-1].held == (str(entry.relative_to(roots.ex.root)),)
        finish_writer(writer, "the second half: quoll\n")
    finally:
        writer.kill()
    assert _indexed(roots, "quoll")
    (hit,) = search(roots.all, "numbat quoll", fresh=False)
    assert hit.link.endswith("/0009-olu.md#0009-olu")
    assert sum(r.added for r in following if r.root == str(roots.ex.root)) == 3 + 1  # once


def test_a_root_its_events_cover_is_refreshed_on_events_alone(roots: Roots, monkeypatch) -> None:
    """No timer: idle roots whose every topic is watched are not refreshed again until an event
    says so; a root with topics beyond the watch cap is, and finds a write to one of them."""
    monkeypatch.setattr(events, "RESCAN_SECONDS", 0.02)  # a rescan would come at once
    reports: list[Refreshed] = []
    stop = threading.Event()
    t = threading.Thread(
        target=follow, args=(roots.all, stop), kwargs={"on_refresh": reports.append}
    )
    t.start()
    try:
        deadline = time.monotonic() + 30
        while len(reports) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.5)  # twenty-five rescans' worth of quiet
        assert len(reports) == 3, reports
        log.append(roots.bus, "lantern", "a wallaby logged")
        assert _indexed(roots, "wallaby")
        assert str(roots.bus) in [r.root for r in reports[3:]]  # the root the event named
        time.sleep(0.1)  # the last of that burst's events (an appender's files elsewhere)
        settled = len(reports)
        time.sleep(0.5)
        assert len(reports) == settled, reports[settled:]  # and quiet again: no timer
    finally:
        stop.set()
        t.join(timeout=30)
    assert not t.is_alive()


def test_topics_beyond_the_watch_cap_are_found_at_the_rescan(roots: Roots, monkeypatch) -> None:
    monkeypatch.setattr(events, "WATCH_TOPICS_MAX", 1)  # the newest topic only
    monkeypatch.setattr(events, "RESCAN_SECONDS", 0.05)
    stop = threading.Event()
    t = threading.Thread(target=follow, args=([roots.ex.root], stop))
    t.start()
    try:
        assert _indexed(roots, "gate")  # the first refresh
        topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))  # older than lunch
        assert topic not in events.watch_paths(roots.ex.root)
        hand_entry(topic, 9, "olu", "a potoroo, unwatched", "2026-11-29T18:14:00Z")
        assert _indexed(roots, "potoroo")
    finally:
        stop.set()
        t.join(timeout=30)
    assert not t.is_alive()


# follow() in a process of its own, each refresh's report one JSON line on stdout.
_FOLLOW = """
import json, sys, threading
from pathlib import Path
from mailslot.search import follow
def said(r):
    print(json.dumps(r._asdict()), flush=True)
follow([Path(p) for p in sys.argv[1:]], threading.Event(), on_refresh=said)
"""


def test_past_the_watch_limit_directories_are_polled_and_said_so(roots: Roots) -> None:
    """A real inotify watch limit of 3 (a user namespace of its own): the follower polls what
    it cannot watch, says so once, and still indexes what lands."""
    argv = with_watch_limit(3, [sys.executable, "-c", _FOLLOW, str(roots.ex.root)])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert json.loads(p.stdout.readline())["total"] == 3
        send(roots.ex, "olu", "gate-bug", "fyi", "a quokka in a polled topic")
        assert _indexed(roots, "quokka")
    finally:
        p.kill()
        _, err = p.communicate(timeout=30)
    assert err.count("cannot be watched (the inotify watch limit?)") == 1, err


def test_watched_topics_are_capped_newest_first(roots: Roots, monkeypatch) -> None:
    send(roots.ex, "olu", "zz-latest", "fyi", "x")
    everything = events.watch_paths(roots.ex.root)
    topics = [p for p in everything if p.parent.name.startswith("to-") and p.name != "done"]
    assert len(topics) == 4  # gate-bug on both sides, lunch and zz-latest in olu's outbox
    monkeypatch.setattr(events, "WATCH_TOPICS_MAX", 1)
    watched = events.watch_paths(roots.ex.root)
    (only,) = [p for p in watched if p.parent.name.startswith("to-") and p.name != "done"]
    assert only.name.endswith("-zz-latest")
    assert roots.ex.root in everything and (roots.bus / "peer" / "inbox") in events.watch_paths(
        roots.bus
    )


def test_a_root_that_does_not_refresh_is_said_once_and_again_when_that_changes(
    tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(events, "RESCAN_SECONDS", 0.02)  # many rescans while it is empty
    empty = tmp_path / "chats"
    empty.mkdir()
    stop = threading.Event()
    refreshed: list[Refreshed] = []
    t = threading.Thread(
        target=follow, args=([empty], stop), kwargs={"on_refresh": refreshed.append}
    )

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == events.__name__]

    def settle(check) -> None:
        deadline = time.monotonic() + 10
        while not check():
            assert time.monotonic() < deadline, said()
            time.sleep(0.01)
        time.sleep(0.3)  # a dozen rescans more

    with caplog.at_level("WARNING", logger=events.__name__):
        t.start()
        try:
            settle(lambda: len(said()) >= 1)
            assert len(said()) == 1 and "nothing to search here" in said()[0]
            chat.new_chat("lunch", empty, "alice", "soup?", state=tmp_path / "state")
            settle(lambda: bool(refreshed))
            assert len(said()) == 2 and said()[1].endswith("refreshed again")
            for f in empty.glob("chat-*.txt"):
                f.unlink()
            settle(lambda: len(said()) >= 3)
            assert len(said()) == 3 and "nothing to search here" in said()[2]
        finally:
            stop.set()
            t.join(timeout=30)


def test_events_name_the_topics_to_refresh_or_the_whole_root(roots: Roots) -> None:
    """Real events on the directories ``watch_paths`` names: an entry names its topic, a new
    topic is named by its inbox's event (and armed, so its next entry is an event too), a chat
    message or a peer message names no topic, events lost refresh every root whole."""
    from mailslot.core.wait import Watch

    ex, bus = roots.ex.root, roots.bus
    with Watch() as watch:
        for root in (ex, bus):
            for p in events.watch_paths(root):
                watch.add(p)
        old = send(roots.ex, "olu", "gate-bug", "fyi", "one more").topic
        new = send(roots.ex, "claude", "brand-new", "fyi", "first").topic
        peer.store(bus / "peer" / "inbox", "beacon", None, "mail")
        log.append(bus, "lantern", "a line")
        watch.wait(5)
        changed = events.changed_topics([ex, bus], watch.take_changes(), watch)
        assert changed == {ex: {old, new}, bus: set()}
        send(roots.ex, "olu", new, "fyi", "second, in the topic armed just now")
        watch.wait(5)
        assert events.changed_topics([ex, bus], watch.take_changes(), watch) == {ex: {new}}
        (ex / "to-olu" / "done").rename(ex / "to-olu" / "done-moved")
        watch.wait(5)
        assert events.changed_topics([ex, bus], watch.take_changes()) == {ex: None}
    assert events.changed_topics([ex, bus], None) == {ex: None, bus: None}
    assert events.changed_topics([ex, bus], {}) == {}

"""``follow`` keeps the index current from file events, without a search asking for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from exhelp import HAND_HEAD, now_stamp, open_writer
from search_helpers import Roots

from mailslot import chat
from mailslot.bus import log
from mailslot.exchange import send
from mailslot.search import Refreshed, events, follow, search
from mailslot.web import peer


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
        assert writer.stdin is not None
        writer.stdin.write("the second half: quoll\n")
        writer.stdin.close()
        assert writer.wait(30) == 0
    finally:
        writer.kill()
    assert _indexed(roots, "quoll")
    (hit,) = search(roots.all, "numbat quoll", fresh=False)
    assert hit.link.endswith("/0009-olu.md#0009-olu")
    assert sum(r.added for r in following if r.root == str(roots.ex.root)) == 3 + 1  # once


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

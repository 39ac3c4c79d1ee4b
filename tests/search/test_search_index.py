"""The index follows the files incrementally, is private, and is never the source of truth."""

from __future__ import annotations

import os
import stat

import pytest
from exhelp import HAND_HEAD, finish_writer, now_stamp, open_writer
from search_helpers import Roots, hand_entry, links

from mailslot import chat
from mailslot.bus import log
from mailslot.core.cursor import state_dir
from mailslot.core.errors import CannotOpen
from mailslot.exchange import send
from mailslot.search import refresh, reindex, search, sources
from mailslot.search.store import index_path
from mailslot.web import peer


def _settle(*dirs: os.PathLike[str]) -> None:
    """Age directories past the racy window, as minutes of quiet would."""
    for d in dirs:
        st = os.stat(d)
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns - 10**10))


def test_a_second_refresh_reads_nothing_when_nothing_changed(roots: Roots) -> None:
    first = [refresh(r) for r in roots.all]
    assert sum(r.added for r in first) == 7
    again = [refresh(r) for r in roots.all]
    assert [(r.added, r.removed) for r in again] == [(0, 0)] * 3
    assert [r.total for r in again] == [r.total for r in first]


def test_new_messages_on_every_channel_are_found_on_the_next_search(roots: Roots) -> None:
    assert not links(roots.all, "zebra")
    send(roots.ex, "olu", "gate-bug", "fyi", "a zebra at the gate")
    send(roots.ex, "claude", "zoo", "fyi", "zebra topic of its own")
    chat.say(roots.chat_file, "zebra crossing", "alice")
    log.append(roots.bus, "lantern", "saw a zebra")
    peer.store(roots.bus / "peer" / "inbox", "beacon", None, "zebra mail")
    assert {h.channel for h in search(roots.all, "zebra")} == {"exchange", "chat", "log", "peer"}
    assert len(search(roots.all, "zebra")) == 5


def test_a_new_entry_in_a_settled_topic_is_found(roots: Roots) -> None:
    refresh(roots.ex.root)
    topic = next(roots.ex.inbox("olu").glob("*-gate-bug"))
    _settle(topic, topic.parent)
    assert refresh(roots.ex.root).added == 0
    send(roots.ex, "claude", "gate-bug", "fyi", "quokka sighting")
    assert links([roots.ex.root], "quokka") == [f"to-olu/{topic.name}/0003-claude.md#0003-claude"]


def test_hand_written_entries_are_read_like_our_own(roots: Roots) -> None:
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    hand_entry(topic, 7, "olu", "written by hand: wombat", "2026-11-29T18:14:00+00:00")
    hit = search([roots.ex.root], "wombat")[0]
    assert hit.sender == "olu" and hit.at == "2026-11-29T18:14:00.000Z"
    # a sender the directory does not vouch for is named by the side that wrote it
    hand_entry(topic, 8, "mallory", "impostor wombat", "2026-11-29T18:15:00Z")
    impostor = next(h for h in search([roots.ex.root], "impostor"))
    assert impostor.sender == "olu" and impostor.name == "0008-mallory.md"


def test_an_archived_topic_is_still_found_at_its_new_place(roots: Roots) -> None:
    refresh(roots.ex.root)
    for side in roots.ex.sides:
        inbox = roots.ex.inbox(side)
        (inbox / "done").mkdir(exist_ok=True)
        for topic in inbox.glob("*-gate-bug"):
            topic.rename(inbox / "done" / topic.name)
    found = links([roots.ex.root], "tuesday")
    assert len(found) == 1 and found[0].startswith("to-olu/done/")
    assert refresh(roots.ex.root).total == 3


def test_removed_messages_and_sources_leave_the_index(roots: Roots) -> None:
    refresh(roots.bus)
    (msg,) = peer.inbox_messages(roots.bus / "peer" / "inbox")
    peer.process(roots.bus / "peer" / "inbox", msg.id)
    (hit,) = search([roots.bus], "turnstile")
    assert hit.thread == "processed" and hit.path.startswith("peer/inbox/processed/")
    roots.chat_file.unlink()
    (roots.chats / "chat-notes.txt").write_text("---MSG---\nFROM: bob\nTIME: x\n---\nhello\n\n")
    assert not links([roots.chats], "rollout")
    assert links([roots.chats], "hello")


def test_a_chat_rewritten_in_place_is_indexed_again_from_the_start(roots: Roots) -> None:
    refresh(roots.chats)
    data = roots.chat_file.read_bytes()
    roots.chat_file.write_bytes(data.replace(b"rollout", b"rolltop") + b"")  # same size
    chat.say(roots.chat_file, "and more after the edit", "alice")
    assert not links([roots.chats], "rollout")
    assert len(links([roots.chats], "rolltop")) == 2


def test_a_log_cut_back_is_indexed_again(roots: Roots) -> None:
    refresh(roots.bus)
    log_md = roots.bus / "LOG.md"
    log_md.write_text("# LOG\n2026-11-29T18:14:03Z — [Beacon] w01: only the wapiti line\n")
    assert not links([roots.bus], "gate card")
    assert links([roots.bus], "wapiti") == ["LOG.md#L2"]


def test_deleting_the_index_loses_nothing(roots: Roots) -> None:
    before = search(roots.all, "gate")
    for r in roots.all:
        os.unlink(index_path(r))
    assert search(roots.all, "gate") == before
    assert [reindex(r).total for r in roots.all] == [3, 2, 2]
    assert search(roots.all, "gate") == before


def test_a_corrupt_index_is_rebuilt(roots: Roots) -> None:
    before = search([roots.ex.root], "gate")
    path = index_path(roots.ex.root)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    path.write_bytes(b"this is not a database at all" * 200)
    assert search([roots.ex.root], "gate") == before


def test_the_index_is_private_and_in_the_state_dir(roots: Roots) -> None:
    refresh(roots.ex.root)
    path = index_path(roots.ex.root)
    assert path.parent == state_dir() / "search"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for extra in path.parent.iterdir():
        assert stat.S_IMODE(extra.stat().st_mode) & 0o077 == 0, extra
    assert not any(p.name.endswith(".sqlite") for p in roots.ex.root.rglob("*"))


def test_an_index_name_that_is_a_symlink_is_not_followed(roots: Roots, tmp_path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    path = index_path(roots.ex.root)
    path.parent.mkdir(parents=True, mode=0o700)
    path.symlink_to(target)
    with pytest.raises(CannotOpen, match="symlink"):
        search([roots.ex.root], "gate")
    assert target.read_text() == "keep me"


def test_one_root_given_twice_or_by_two_spellings_is_searched_once(roots: Roots) -> None:
    spelled = roots.ex.root / "to-olu" / ".."
    assert search([roots.ex.root, spelled.resolve()], "tuesday") == search(
        [roots.ex.root], "tuesday"
    )


def test_a_refresh_held_by_another_process_is_a_clear_lock_busy(roots: Roots, monkeypatch) -> None:
    import subprocess
    import sys

    from mailslot.core.errors import LockBusy
    from mailslot.search import store

    refresh(roots.ex.root)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(30)",
            str(index_path(roots.ex.root)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(store, "BUSY_TIMEOUT_MS", 200)
        with pytest.raises(LockBusy, match="another process"):
            refresh(roots.ex.root)
        assert links([roots.ex.root], "tuesday", fresh=False)  # reading never waits
    finally:
        holder.kill()
        holder.wait()
    assert links([roots.ex.root], "tuesday")


def test_an_index_directory_made_open_is_made_private(roots: Roots) -> None:
    directory = state_dir() / "search"
    directory.mkdir(parents=True, mode=0o755)
    os.chmod(directory, 0o755)
    refresh(roots.ex.root)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_refresh_told_which_topics_changed_reads_only_those(roots: Roots) -> None:
    """``refresh(root, topics=...)``: the named topics are brought up to date (a new entry, a
    topic gone, a new topic), the others are taken as unchanged until a whole refresh."""
    import shutil

    refresh(roots.ex.root)
    gate = next(roots.ex.inbox("olu").glob("*-gate-bug")).name
    lunch = next(roots.ex.inbox("claude").glob("*-lunch")).name
    send(roots.ex, "claude", gate, "fyi", "a quokka at the gate")
    send(roots.ex, "olu", lunch, "fyi", "a numbat at lunch")
    assert refresh(roots.ex.root, topics=[gate]).added == 1
    assert links([roots.ex.root], "quokka", fresh=False)
    assert not links([roots.ex.root], "numbat", fresh=False)  # not named: not looked at
    new = send(roots.ex, "claude", "brand-new", "fyi", "a bilby").topic
    shutil.rmtree(roots.ex.inbox("claude") / lunch)
    done = refresh(roots.ex.root, topics=[lunch, new, "no-such-topic"])
    assert (done.added, done.removed) == (1, 1)  # the bilby; lunch's one entry forgotten
    assert links([roots.ex.root], "bilby", fresh=False)
    assert not links([roots.ex.root], "numbat", fresh=False)
    assert refresh(roots.ex.root).total == done.total  # a whole refresh agrees


def test_an_entry_written_in_place_is_indexed_only_once_whole(roots: Roots, monkeypatch) -> None:
    """A hand writer's ``cat > NNNN-x.md``: held back while its writer has it open, its topic
    looked at again on each refresh (its directory does not change as the entry grows), and
    indexed once, whole, when closed."""
    monkeypatch.setattr(sources, "RACY_NS", 0)  # directories settle at once, as 2 s later
    refresh(roots.ex.root)
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    entry = topic / "0009-olu.md"
    writer = open_writer(entry, HAND_HEAD.format(at=now_stamp()) + "the first half: numbat\n")
    try:
        for _ in range(2):  # the second with the topic directory unchanged since the first
            r = refresh(roots.ex.root)
            assert not links([roots.ex.root], "numbat", fresh=False)
            assert r.held == (f"to-claude/{topic.name}/0009-olu.md",), r
            assert r.again is not None and r.added == 0
        finish_writer(writer, "the second half: quoll\n")
    finally:
        writer.kill()
    r = refresh(roots.ex.root)
    assert (r.added, r.held, r.again) == (1, (), None)
    (hit,) = search([roots.ex.root], "numbat quoll", fresh=False)
    assert hit.link == f"to-claude/{topic.name}/0009-olu.md#0009-olu"
    assert refresh(roots.ex.root).added == 0  # once, not again

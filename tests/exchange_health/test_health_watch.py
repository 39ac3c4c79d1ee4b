"""watch: wakes on kernel events for new entries, brand-new topics and renames; the cursor is the
caller's own; --peek moves nothing; archived-before-read entries are still delivered."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from exhelp import GENEROUS, RENAMED_IN, hand_entry, run, spawn, wait_armed

from mailslot.core.clock import format_time
from mailslot.core.cursor import CursorStore
from mailslot.core.errors import Conflict, WaitTimeout
from mailslot.core.wait import Watch
from mailslot.exchange import send, set_state
from mailslot.exchange.holds import hold_sig, save_holds
from mailslot.exchange.listing import list_dir, relisted
from mailslot.exchange.watch import WATCH_NAMESPACE, Watcher, cursor_key, mark_all_seen, watch


def _watch_proc(root: Path, *extra: str):
    return spawn("--root", str(root), "--as", "olu", "exchange", "watch", "--json", *extra)


def test_waiter_blocked_before_a_send_wakes(ex) -> None:
    topic = send(ex, "claude", "gate-bug", "fyi", "opening").topic
    mark_all_seen(ex, "olu")
    proc = _watch_proc(ex.root, "--timeout", str(GENEROUS))
    try:
        wait_armed(proc, 3)  # inbox, done/, the topic dir
        r = send(ex, "claude", topic, "required", "Is the gate fixed?")
        out, err = proc.communicate(timeout=GENEROUS)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    items = json.loads(out)["items"]
    assert [i["path"] for i in items] == [r.relpath]
    assert (
        items[0]["from"] == "claude"
        and items[0]["action"] == "required"
        and items[0]["body"] == "Is the gate fixed?\n"
    )


def test_brand_new_topic_written_by_hand_wakes_the_waiter(ex) -> None:
    send(ex, "claude", "old", "fyi", "known topic")
    mark_all_seen(ex, "olu")
    proc = _watch_proc(ex.root, "--timeout", str(GENEROUS))
    try:
        wait_armed(proc, 3)
        # a foreign agent: mkdir a new topic, write a dot-temp, rename into place
        path = hand_entry(
            ex.root, "olu", "2026-11-29-weekly-review", 1, "claude", format_time(), **RENAMED_IN
        )
        out, err = proc.communicate(timeout=GENEROUS)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    items = json.loads(out)["items"]
    assert [i["path"] for i in items] == [str(path.relative_to(ex.root))]
    assert items[0]["topic"] == "2026-11-29-weekly-review"


def test_peek_then_watch_return_the_same_entry_then_timeout(ex) -> None:
    r = send(ex, "claude", "gate-bug", "required", "question")
    first = run(ex.root, "exchange", "watch", "--peek", "--timeout", "5", "--json", agent="olu")
    second = run(ex.root, "exchange", "watch", "--timeout", "5", "--json", agent="olu")
    third = run(ex.root, "exchange", "watch", "--timeout", "0.3", agent="olu", ok=False)
    p1 = [i["path"] for i in json.loads(first.stdout)["items"]]
    p2 = [i["path"] for i in json.loads(second.stdout)["items"]]
    assert p1 == p2 == [r.relpath]
    assert json.loads(first.stdout)["peek"] is True
    assert third.exit_code == 3 and "timeout" in third.stderr


def test_peek_writes_nothing(ex, _isolated_state) -> None:
    send(ex, "claude", "gate-bug", "required", "question")
    watch(ex, "olu", timeout=1, peek=True)
    assert not list(Path(_isolated_state).rglob("*.json"))


def test_text_output_is_path_and_frontmatter(ex) -> None:
    r = send(ex, "claude", "gate-bug", "required", "body text stays out of the text form")
    out = run(ex.root, "exchange", "watch", "--timeout", "5", agent="olu").stdout
    assert out.splitlines()[0] == r.relpath
    assert "  from: claude" in out and "  action: required" in out
    assert "body text" not in out


def test_missing_cursor_delivers_everything_and_mark_all_seen_starts_from_now(ex) -> None:
    for i in range(3):
        send(ex, "claude", f"t{i}", "fyi", f"m{i}")
    assert len(watch(ex, "olu", timeout=1, peek=True).items) == 3
    assert mark_all_seen(ex, "olu") == 3
    with pytest.raises(WaitTimeout):
        watch(ex, "olu", timeout=0.2)
    r = send(ex, "claude", "t0", "fyi", "new after set-up")
    assert [i.path for i in watch(ex, "olu", timeout=5).items] == [r.path]


def test_entry_archived_before_it_was_read_is_still_delivered(ex) -> None:
    """A closing reply filed into done/ before the other side read it still reaches that side."""
    topic = send(ex, "olu", "close-race", "fyi", "olu opens").topic
    mark_all_seen(ex, "olu")
    set_state(ex, "olu", topic, "done")
    reply = send(ex, "claude", topic, "fyi", "the closing reply")
    set_state(ex, "claude", topic, "done")
    for side in ("claude", "olu"):  # archived as a tick (or a person) would: plain moves
        os.rename(ex.inbox(side) / topic, ex.inbox(side) / "done" / topic)
    items = watch(ex, "olu", timeout=5).items
    assert [(i.key, i.archived) for i in items] == [(f"{topic}/0002-claude", True)]
    assert items[0].path == ex.inbox("olu") / "done" / topic / reply.path.name


def test_archive_move_does_not_redeliver(ex) -> None:
    topic = send(ex, "claude", "moved", "fyi", "read before the move").topic
    assert len(watch(ex, "olu", timeout=5).items) == 1
    os.rename(ex.inbox("olu") / topic, ex.inbox("olu") / "done" / topic)
    with pytest.raises(WaitTimeout):
        watch(ex, "olu", timeout=0.2)


def test_required_scope_ignores_fyi_but_leaves_it_unseen(ex) -> None:
    send(ex, "claude", "a", "fyi", "just so you know")
    req = send(ex, "claude", "b", "required", "answer me")
    got = watch(ex, "olu", timeout=5, action="required").items
    assert [i.path for i in got] == [req.path]
    with pytest.raises(WaitTimeout):
        watch(ex, "olu", timeout=0.2, action="required")
    rest = watch(ex, "olu", timeout=5).items
    assert [i.entry.action for i in rest if i.entry] == ["fyi"]


def test_human_reads_its_sides_inbox_with_its_own_cursor(ex) -> None:
    r = send(ex, "olu", "for-claude", "required", "to the claude side")
    assert [i.path for i in watch(ex, "will", timeout=5).items] == [r.path]
    assert [i.path for i in watch(ex, "claude", timeout=5).items] == [r.path]
    store = CursorStore(WATCH_NAMESPACE)
    assert store.load(cursor_key(ex, "will")) != store.load(cursor_key(ex, "olu"))
    with pytest.raises(Conflict):
        watch(ex, "stranger", timeout=0.1)


def test_cursor_is_keyed_by_exchange_root(ex, tmp_path) -> None:
    from mailslot.exchange.create import create_exchange

    other = create_exchange(tmp_path / "y", ["claude", "olu"], git=False)
    send(ex, "claude", "one", "fyi", "in x")
    send(other, "claude", "one", "fyi", "in y")
    assert len(watch(ex, "olu", timeout=5).items) == 1
    assert len(watch(other, "olu", timeout=5).items) == 1  # not hidden by x's cursor


def test_two_watchers_for_one_caller_never_both_take_an_entry(ex) -> None:
    topic = send(ex, "claude", "race", "fyi", "opening").topic
    mark_all_seen(ex, "olu")
    procs = [_watch_proc(ex.root, "--timeout", "5") for _ in range(2)]
    try:
        for p in procs:
            wait_armed(p, 3)
        send(ex, "claude", topic, "fyi", "only one of you gets this")
        results = [p.communicate(timeout=GENEROUS) for p in procs]
    finally:
        for p in procs:
            p.kill()
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3], results
    answers = [json.loads(out) for out, _ in results]
    delivered = [a["items"] for a in answers if not a.get("timed_out")]
    assert len(delivered) == 1 and len(delivered[0]) == 1
    assert [a["items"] for a in answers if a.get("timed_out")] == [[]]  # the loser got nothing


def test_held_marker_is_delivered_once(ex) -> None:
    topic = send(ex, "claude", "held", "fyi", "x").topic
    mark_all_seen(ex, "olu")
    held = ex.inbox("olu") / topic / "HELD.md"
    held.write_text("# HELD: re-read\n")
    save_holds(ex, {f"to-olu/{topic}": hold_sig(held)})  # as the tick records the holds it placed
    items = watch(ex, "olu", timeout=5).items
    assert [(i.kind, i.topic) for i in items] == [("held", topic)]
    with pytest.raises(WaitTimeout):
        watch(ex, "olu", timeout=0.2)


def test_half_written_hand_entry_is_delivered_whole(ex) -> None:
    """A foreign agent that writes in place: the first event sees a torn file; wait for the rest."""
    topic = send(ex, "claude", "torn", "fyi", "x").topic
    mark_all_seen(ex, "olu")
    result: list[object] = []
    w = Watcher(ex, "olu")
    armed = threading.Event()
    t = threading.Thread(
        target=lambda: result.append(w.watch(GENEROUS, on_armed=armed.set)), daemon=True
    )
    t.start()
    assert armed.wait(GENEROUS)
    path = ex.inbox("olu") / topic / "0002-claude.md"
    with open(path, "w") as f:
        f.write("---\nfrom: claude\n")
        f.flush()
        os.fsync(f.fileno())
        f.write(f"at: {format_time()}\naction: required\n---\nthe whole body\n")
    t.join(GENEROUS)
    (res,) = result
    (item,) = res.items  # type: ignore[attr-defined]
    assert item.entry.error is None and item.entry.body == "the whole body\n"


def test_crlf_hand_entry_reads_like_our_own(ex) -> None:
    hand_entry(
        ex.root,
        "olu",
        "2026-11-29-crlf",
        1,
        "claude",
        "2026-11-29T18:14:00+00:00",
        "required",
        crlf=True,
        **RENAMED_IN,
    )
    (item,) = watch(ex, "olu", timeout=5).items
    assert item.entry is not None and item.entry.action == "required" and item.entry.error is None


def test_long_lived_watcher_follows_a_topic_directory_replaced_under_its_name(ex) -> None:
    """A kernel watch follows an inode: a new directory under an old name must be armed anew."""
    topic = send(ex, "claude", "swap", "fyi", "first").topic
    with Watcher(ex, "olu") as w:
        assert len(w.watch(5).items) == 1
        live = ex.inbox("olu") / topic
        os.rename(live, ex.inbox("olu") / "done" / topic)  # archived ...
        with pytest.raises(WaitTimeout):
            w.watch(0.2)
        live.mkdir()  # ... and a fresh directory of the same name appears (a bridge, a person)
        with pytest.raises(WaitTimeout):
            w.watch(0.2)
        armed = threading.Event()
        result: list[object] = []
        t = threading.Thread(
            target=lambda: result.append(w.watch(GENEROUS, on_armed=armed.set)), daemon=True
        )
        t.start()
        assert armed.wait(GENEROUS)
        time.sleep(0.3)  # let it block in wait: the entry must wake it, not its first look
        hand_entry(ex.root, "olu", topic, 2, "claude", format_time(), **RENAMED_IN)
        t.join(GENEROUS / 2)  # a watch that was never woken would still be blocked here
    (res,) = result
    assert [i.key for i in res.items] == [f"{topic}/0002-claude"]  # type: ignore[attr-defined]


def test_peek_then_ack_survives_a_failed_run(ex) -> None:
    """A run that fails must not consume the message; peek, work, then ack."""
    send(ex, "claude", "ackme", "required", "do the thing")
    peeked = json.loads(
        run(ex.root, "exchange", "watch", "--peek", "--timeout", "5", "--json", agent="olu").stdout
    )
    (key,) = [i["key"] for i in peeked["items"]]
    # the agent run dies here: nothing acked, so the next watch delivers it again
    again = run(ex.root, "exchange", "watch", "--peek", "--timeout", "5", "--json", agent="olu")
    assert [i["key"] for i in json.loads(again.stdout)["items"]] == [key]
    r = run(ex.root, "exchange", "watch", "--ack", key, agent="olu")
    assert "marked 1" in r.stdout
    assert (
        run(ex.root, "exchange", "watch", "--timeout", "0.2", agent="olu", ok=False).exit_code == 3
    )
    bad = run(
        ex.root, "exchange", "watch", "--ack", "2026-01-01-nope/0001-claude", agent="olu", ok=False
    )
    assert bad.exit_code == 1 and "not in to-olu/" in bad.stderr


def test_watch_json_timeout_answers_with_no_items(ex) -> None:
    import json as _json

    from click.testing import CliRunner

    from mailslot.cli import cli

    r = CliRunner().invoke(
        cli,
        ["--root", str(ex.root), "--as", "olu", "exchange", "watch", "--timeout", "0", "--json"],
    )
    assert r.exit_code == 3
    assert _json.loads(r.stdout) == {
        "agent": "olu",
        "side": "olu",
        "peek": False,
        "items": [],
        "timed_out": True,
    }


def test_a_watch_whose_output_fails_marks_nothing(ex) -> None:
    r = send(ex, "claude", "shown", "fyi", "only once it was shown")

    def closed_pipe(result: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        watch(ex, "olu", timeout=5, show=closed_pipe)
    shown: list[list[str]] = []
    got = watch(ex, "olu", timeout=5, show=lambda res: shown.append([i.key for i in res.items]))
    assert [i.path for i in got.items] == [r.path] and shown == [[i.key for i in got.items]]
    with pytest.raises(WaitTimeout):
        watch(ex, "olu", timeout=0.2)


def test_the_seen_set_forgets_topics_and_holds_that_are_gone(ex) -> None:
    import shutil

    gone = send(ex, "claude", "gone", "fyi", "removed later").topic
    kept = send(ex, "claude", "kept", "fyi", "archived later").topic
    held = ex.inbox("olu") / kept / "HELD.md"
    held.write_text("# HELD: re-read\n")
    save_holds(ex, {f"to-olu/{kept}": hold_sig(held)})
    assert len(watch(ex, "olu", timeout=5).items) == 3
    shutil.rmtree(ex.inbox("olu") / gone)
    held.unlink()
    os.rename(ex.inbox("olu") / kept, ex.inbox("olu") / "done" / kept)
    new = send(ex, "claude", "new", "fyi", "marks again").topic
    assert [i.topic for i in watch(ex, "olu", timeout=5).items] == [new]
    seen = CursorStore(WATCH_NAMESPACE).load_seen(cursor_key(ex, "olu")).keys
    assert {k.partition("/")[0] for k in seen} == {kept, new}
    assert not any("HELD.md" in k for k in seen)
    with pytest.raises(WaitTimeout):  # the archived topic's keys were kept: nothing re-delivered
        watch(ex, "olu", timeout=0.2)


def test_a_listing_updated_from_event_names_is_the_listing_made_anew(tmp_path: Path) -> None:
    """What a long-lived watcher keeps: each step's names, looked at again, say what a fresh
    listing of the directory says (entries, STATE.md, HELD.md, strays; dot-temps ignored)."""
    d = tmp_path / "2026-11-29-topic"
    d.mkdir()
    (d / "0001-claude.md").write_text("one")
    steps = [
        lambda: (d / ".incoming").write_text("two"),
        lambda: os.rename(d / ".incoming", d / "0002-olu.md"),
        lambda: (d / "0002-alice.md").write_text("placed before 0002-olu"),
        lambda: (d / "STATE.md").write_text("status: open\n"),
        lambda: (d / "HELD.md").write_text("# HELD\n"),
        lambda: (d / "notes.txt").write_text("a stray"),
        lambda: (d / "0001-claude.md").write_text("rewritten in place"),
        lambda: (d / "0001-claude.md").unlink(),
        lambda: (d / "0001-claude.md").mkdir(),  # an entry's name, not a file: a stray
        lambda: os.symlink("0002-olu.md", d / "0003-olu.md"),  # never an entry
        lambda: (d / "HELD.md").unlink(),
        lambda: os.rename(d / "notes.txt", d / "0004-claude.md"),
        lambda: os.rename(d / "STATE.md", d / ".gone"),
    ]
    with Watch([d]) as w:
        listing = list_dir(d, d.name, False)
        for step in steps:
            step()
            assert w.wait(5.0)
            changed = w.take_changed_names()
            assert changed is not None and changed.get(d)
            listing = relisted(listing, changed[d] or ())
            assert listing == list_dir(d, d.name, False), step
    assert [e[2] for e in listing.entries] == ["0002-alice.md", "0002-olu.md", "0004-claude.md"]
    assert listing.strays == ("0001-claude.md", "0003-olu.md") and not listing.held


def test_a_long_lived_watcher_sees_an_entry_turned_into_a_stray(ex) -> None:
    topic = send(ex, "claude", "turned", "fyi", "first").topic
    with Watcher(ex, "olu") as w:
        assert len(w.watch(5).items) == 1
        path = ex.inbox("olu") / topic / "0002-claude.md"
        path.mkdir()  # a directory under an entry's name: shown once as a stray
        (item,) = w.watch(5).items
        assert (item.kind, item.key) == ("stray", f"{topic}/0002-claude.md:stray")
        path.rmdir()
        hand_entry(ex.root, "olu", topic, 3, "claude", format_time(), **RENAMED_IN)
        (item,) = w.watch(5).items
        assert (item.kind, item.key) == ("entry", f"{topic}/0003-claude")


def test_a_directory_at_the_seen_mark_is_a_warning_and_a_fresh_reader(ex) -> None:
    send(ex, "claude", "marked", "fyi", "one")
    watch(ex, "olu", timeout=5)
    mark = CursorStore(WATCH_NAMESPACE).path_for(cursor_key(ex, "olu"))
    mark.unlink()
    mark.mkdir()  # a user's stray `mkdir`, or a tool that made the name a directory
    r = run(ex.root, "exchange", "watch", "--timeout", "5", "--json", agent="olu")
    out = json.loads(r.stdout)  # exit 0: delivered as to a fresh reader, no crash
    (warning,) = out["warnings"]
    assert f"seen-mark {mark} is a directory" in warning and "fresh reader" in warning
    assert ".tmp" not in warning and [i["body"] for i in out["items"]] == ["one\n"]
    with Watcher(ex, "olu") as w:  # one watcher takes each thing once, in memory
        assert len(w.watch(5).items) == 1
        send(ex, "claude", "marked", "fyi", "two")
        assert [i.entry.body for i in w.watch(5).items if i.entry] == ["two\n"]
        with pytest.raises(WaitTimeout):
            w.watch(0.2)
    assert mark.is_dir() and not list(mark.iterdir())  # left as it was: the user's to remove
    mark.rmdir()
    assert len(watch(ex, "olu", timeout=5).items) == 2  # marked on disk again from here
    with pytest.raises(WaitTimeout):
        watch(ex, "olu", timeout=0.2)


def _mark_fails(limit: int) -> None:
    """In the child: files may not grow past ``limit`` bytes (EFBIG, SIGXFSZ ignored), as a
    full state dir refuses the seen-mark's write; the output is a pipe, which no limit holds."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_seen_mark_that_cannot_be_written_after_the_output_is_a_warning(ex) -> None:
    send(ex, "claude", "marked", "fyi", "one")
    watch(ex, "olu", timeout=5)  # the seen-mark exists from here on
    mark = CursorStore(WATCH_NAMESPACE).path_for(cursor_key(ex, "olu"))
    r = send(ex, "claude", "marked", "fyi", "two")
    argv = [sys.executable, "-m", "mailslot", "--root", str(ex.root), "--as", "olu"]
    size = mark.stat().st_size
    for extra in ([], ["--json"]):
        p = subprocess.run(
            [*argv, "exchange", "watch", "--timeout", "5", *extra],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: _mark_fails(size),
        )
        assert p.returncode == 0, p.stderr  # shown: delivered, though not marked
        assert str(r.path.relative_to(ex.root)) in p.stdout
        assert f"mailslot: warning: seen-mark {mark} cannot be stored" in p.stderr
        assert "delivers these entries again" in p.stderr and mark.stat().st_size == size
    again = watch(ex, "olu", timeout=5)  # once the state dir takes the mark
    assert [i.path for i in again.items] == [r.path] and not again.warnings
    with pytest.raises(WaitTimeout):
        watch(ex, "olu", timeout=0.2)


_LONG_LIVED_MARK_FAILS = r"""
import json, os, resource, signal, sys
from pathlib import Path
from mailslot.exchange.layout import load_exchange
from mailslot.exchange.watch import Watcher
ex, mark = load_exchange(Path(sys.argv[1])), Path(sys.argv[2])
topic = next(ex.inbox("olu").glob("*-marked"))
out = []
with Watcher(ex, "olu") as w:
    w.watch(5)  # the first take: the general way, marked
    head = "---\nfrom: claude\nat: 2026-12-01T10:00:00Z\naction: fyi\n---\n"
    (topic / ".incoming").write_text(head + "two\n")
    os.rename(topic / ".incoming", topic / "0002-claude.md")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (mark.stat().st_size, resource.RLIM_INFINITY))
    for limited in (True, False):
        r = w.watch(5)
        out.append([[i.key for i in r.items], r.warnings, mark.stat().st_size])
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print(json.dumps(out))
"""


def test_a_long_lived_watcher_whose_seen_mark_cannot_be_written_delivers_again(ex) -> None:
    """The common wake's mark failing is a warning too, and the entry is not taken as seen."""
    send(ex, "claude", "marked", "fyi", "one")
    mark = CursorStore(WATCH_NAMESPACE).path_for(cursor_key(ex, "olu"))
    p = subprocess.run(
        [sys.executable, "-c", _LONG_LIVED_MARK_FAILS, str(ex.root), str(mark)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    (failed, stored) = json.loads(p.stdout)
    assert failed[0] == stored[0] and len(failed[0]) == 1 and failed[0][0].endswith("0002-claude")
    assert any("cannot be stored" in w for w in failed[1]) and stored[2] > failed[2]
    with pytest.raises(WaitTimeout):  # marked on disk by the second delivery
        watch(ex, "olu", timeout=0.2)


def _take_all(w: Watcher, want: int) -> list[str]:
    """Keys a long-lived watcher delivers over as many wakes as it takes to get ``want``."""
    keys: list[str] = []
    while len(keys) < want:
        keys += [i.key for i in w.watch(5).items]
    return keys


def test_a_wake_on_one_topic_also_delivers_what_came_to_others_meanwhile(ex) -> None:
    """A long-lived watcher looks again only at the topics its events name: entries written to
    several topics between two wakes are all delivered, each once."""
    a = send(ex, "claude", "a", "fyi", "a1").topic
    b = send(ex, "claude", "b", "fyi", "b1").topic
    c = send(ex, "claude", "c", "fyi", "c1").topic
    with Watcher(ex, "olu") as w:
        assert len(w.watch(5).items) == 3
        hand_entry(ex.root, "olu", b, 2, "claude", format_time(), **RENAMED_IN)
        assert [i.key for i in w.watch(5).items] == [f"{b}/0002-claude"]
        for n in range(3, 6):  # a burst into a, b and c between two wakes
            for topic in (a, b, c):
                hand_entry(ex.root, "olu", topic, n, "claude", format_time(), **RENAMED_IN)
        got = _take_all(w, 9)
        assert sorted(got) == sorted(f"{t}/{n:04d}-claude" for t in (a, b, c) for n in (3, 4, 5))
        hand_entry(ex.root, "olu", c, 6, "claude", format_time(), **RENAMED_IN)
        assert [i.key for i in w.watch(5).items] == [f"{c}/0006-claude"]
        with pytest.raises(WaitTimeout):
            w.watch(0.2)


def test_lost_events_make_a_long_lived_watcher_look_at_everything_again(ex) -> None:
    """Events lost to a full kernel queue (IN_Q_OVERFLOW) say nothing of which topics changed:
    the next wake lists every topic again, so an entry whose event was lost is delivered."""
    a = send(ex, "claude", "flooded", "fyi", "a1").topic
    b = send(ex, "claude", "quiet", "fyi", "b1").topic
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    with Watcher(ex, "olu") as w:
        assert len(w.watch(5).items) == 2
        flood = ex.inbox("olu") / a / ".flood"
        flood.write_text("x")
        for _ in range(limit):  # two events a rename: the queue overflows, later events are lost
            os.rename(flood, flood.with_name(".flood2"))
            os.rename(flood.with_name(".flood2"), flood)
        hand_entry(ex.root, "olu", b, 2, "claude", format_time(), **RENAMED_IN)
        assert [i.key for i in w.watch(5).items] == [f"{b}/0002-claude"]
        with pytest.raises(WaitTimeout):
            w.watch(0.2)


def test_an_entry_written_into_an_archived_topic_is_delivered_by_its_own_directory(ex) -> None:
    """done/<topic> is not watched and writing into it leaves done/'s own mtime as it was: a
    long-lived watcher tells it changed by the topic directory's own stat before it blocks
    again, however old the listing it kept (and however recent the change before it)."""
    old = send(ex, "claude", "archived", "fyi", "read, then archived").topic
    live = send(ex, "claude", "live", "fyi", "live").topic
    done = ex.inbox("olu") / "done"
    os.rename(ex.inbox("olu") / old, done / old)
    hour_ago = time.time() - 3600
    os.utime(done / old, (hour_ago, hour_ago))  # a listing of it is kept, not redone each wake
    with Watcher(ex, "olu") as w:
        assert len(w.watch(5).items) == 2
        done_mtime = (done).stat().st_mtime_ns
        for n in (2, 3):  # the second lands right after the first wake listed the first
            hand_entry(ex.root, "olu", f"done/{old}", n, "claude", format_time(), **RENAMED_IN)
            hand_entry(ex.root, "olu", live, n, "claude", format_time(), **RENAMED_IN)
            got = _take_all(w, 2)
            assert sorted(got) == [f"{old}/{n:04d}-claude", f"{live}/{n:04d}-claude"]
            items = {i.key: i for i in w.pending()}
            assert not items
        assert done.stat().st_mtime_ns == done_mtime
        with pytest.raises(WaitTimeout):
            w.watch(0.2)


def test_a_long_lived_watcher_whose_seen_mark_is_removed_delivers_everything_again(ex) -> None:
    """Keys gone from the seen-mark (removed by hand: a fresh reader) are seen at the next take:
    the watcher looks at every topic again rather than at what it had found unseen."""
    first = send(ex, "claude", "one", "fyi", "first").topic
    with Watcher(ex, "olu") as w:
        assert [i.key for i in w.watch(5).items] == [f"{first}/0001-claude"]
        CursorStore(WATCH_NAMESPACE).path_for(cursor_key(ex, "olu")).unlink()
        second = send(ex, "claude", "two", "fyi", "second").topic
        assert [i.key for i in w.watch(5).items] == [f"{second}/0001-claude"]
        assert [i.key for i in w.watch(5).items] == [f"{first}/0001-claude"]
        with pytest.raises(WaitTimeout):
            w.watch(0.2)


def test_a_long_lived_watcher_whose_output_failed_shows_the_same_entries_again(ex) -> None:
    """Nothing is marked when the output fails: the next wait of the same watcher shows the same
    entries at once, with no new event on their topics."""
    topic = send(ex, "claude", "shown", "fyi", "first").topic
    with Watcher(ex, "olu") as w:
        assert len(w.watch(5).items) == 1
        hand_entry(ex.root, "olu", topic, 2, "claude", format_time(), **RENAMED_IN)

        def closed_pipe(result: object) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        with pytest.raises(BrokenPipeError):
            w.watch(5, show=closed_pipe)
        assert [i.key for i in w.watch(0.5).items] == [f"{topic}/0002-claude"]
        with pytest.raises(WaitTimeout):
            w.watch(0.2)

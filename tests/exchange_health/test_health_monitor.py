"""monitor: stable output, changed only by relevant change, and it writes nothing at all."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from exhelp import RENAMED_IN, hand_entry, hand_state, run, snapshot

from mailslot.core.clock import format_time
from mailslot.exchange import send, set_state
from mailslot.exchange.holds import hold_sig, save_holds
from mailslot.exchange.monitor import monitor
from mailslot.exchange.tick import tick


def _mon(ex, agent: str = "olu", scope: str = "any") -> str:
    return run(ex.root, "exchange", "monitor", "--action", scope, agent=agent).stdout


def _git_status(root) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout


def test_same_output_twice_changed_by_a_new_topic(ex) -> None:
    send(ex, "claude", "gate-bug", "required", "question")
    first, second = _mon(ex), _mon(ex)
    assert first == second and "gate-bug: 0001-claude.md (required) awaits you" in first
    hand_entry(
        ex.root, "olu", "2026-11-29-brand-new", 1, "claude", format_time(), "fyi", **RENAMED_IN
    )
    third = _mon(ex)
    assert third != second and "2026-11-29-brand-new" in third


def test_required_scope_is_unchanged_by_fyi(ex) -> None:
    topic = send(ex, "claude", "gate-bug", "required", "question").topic
    before = _mon(ex, scope="required")
    send(ex, "claude", topic, "fyi", "an fyi in the same topic")
    send(ex, "claude", "chatter", "fyi", "an fyi in a new topic")
    assert _mon(ex, scope="required") == before
    assert _mon(ex, scope="any") != before  # the unscoped monitor does see them
    send(ex, "claude", topic, "required", "a second question")
    assert _mon(ex, scope="required") != before


def test_monitor_writes_nothing(ex, _isolated_state) -> None:
    send(ex, "claude", "gate-bug", "required", "question")
    tick(ex).raise_for_errors()  # commit, so the tree is clean
    assert _git_status(ex.root) == ""
    before = snapshot(ex.root, _isolated_state)
    time.sleep(0.01)
    for agent in ("olu", "claude", "will"):
        for scope in ("any", "required"):
            _mon(ex, agent, scope)
            run(ex.root, "exchange", "monitor", "--json", agent=agent)
    assert snapshot(ex.root, _isolated_state) == before
    assert _git_status(ex.root) == ""


def test_nothing_awaits_prints_nothing_and_a_reply_clears_the_line(ex) -> None:
    assert _mon(ex) == ""
    topic = send(ex, "claude", "q", "required", "question").topic
    assert _mon(ex) != ""
    send(ex, "olu", topic, "fyi", "answer")
    assert _mon(ex) == ""
    assert "q: 0002-olu.md (fyi) awaits you" in _mon(ex, agent="claude")


def test_acknowledged_by_state_is_not_awaiting(ex) -> None:
    topic = send(ex, "claude", "q", "required", "question").topic
    time.sleep(0.002)  # the STATE time must come after the entry's millisecond
    set_state(ex, "olu", topic, "in-progress")
    assert _mon(ex) == ""


def test_counts_several_unanswered_entries(ex) -> None:
    topic = send(ex, "claude", "q", "required", "one").topic
    send(ex, "claude", topic, "required", "two")
    assert "q: 0002-claude.md (required) awaits you (+1 earlier)" in _mon(ex)


def test_held_close_and_stale_tick_lines(ex) -> None:
    topic = send(ex, "claude", "t", "fyi", "x").topic
    set_state(ex, "claude", topic, "done")
    out = _mon(ex)
    assert f"{topic}: claude is done, you are not" in out
    held = ex.inbox("olu") / topic / "HELD.md"
    held.write_text("# HELD\n")
    assert f"{topic}: HELD.md" not in _mon(ex)  # not placed by the tick: not a hold
    save_holds(ex, {f"to-olu/{topic}": hold_sig(held)})  # as the tick records the holds it placed
    assert f"{topic}: HELD.md" in _mon(ex)
    tick(ex)
    assert "tick:" not in _mon(ex)
    beat = ex.meta / "heartbeat"
    old = time.time() - 3600
    os.utime(beat, (old, old))
    stale = _mon(ex)
    assert "tick: last heartbeat" in stale and "not running" in stale
    assert _mon(ex) == stale  # stable while it stays dead


def test_hand_written_foreign_entries_and_state(ex) -> None:
    hand_entry(
        ex.root,
        "olu",
        "2026-11-29-x",
        1,
        "claude",
        "2026-11-29T10:00:00Z",
        "required",
        crlf=True,
        **RENAMED_IN,
    )
    assert "2026-11-29-x: 0001-claude.md (required)" in _mon(ex, scope="required")
    # a hand acknowledgement dated before the entry arrived does not cover it (ctime counts)
    hand_state(ex.root, "claude", "2026-11-29-x", "in-progress", "2026-11-29T11:00:00Z", "olu")
    assert "0001-claude.md (required)" in _mon(ex, scope="required")
    hand_state(ex.root, "claude", "2026-11-29-x", "in-progress", format_time(), "olu")
    assert _mon(ex, scope="required") == ""


def test_unreadable_action_stays_visible_when_scoped(ex) -> None:
    d = ex.inbox("olu") / "2026-11-29-odd"
    d.mkdir()
    (d / "0001-claude.md").write_text("---\nfrom: claude\nat: 2026-11-29T10:00:00Z\n---\nhi\n")
    assert "0001-claude.md (action?)" in _mon(ex, scope="required")


def test_real_cli_output_is_byte_identical(ex, run_cli) -> None:
    send(ex, "claude", "gate-bug", "required", "question")
    args = ("--root", str(ex.root), "--as", "olu", "exchange", "monitor")
    a, b = run_cli(*args), run_cli(*args)
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout != ""


def test_monitor_api_json(ex) -> None:
    send(ex, "claude", "gate-bug", "required", "question")
    d = monitor(ex, "olu").to_json()
    assert d["side"] == "olu" and d["awaiting"][0]["kind"] == "entry"


def test_state_from_the_future_acknowledges_nothing(ex) -> None:
    topic = send(ex, "claude", "q", "required", "question").topic
    hand_state(ex.root, "claude", topic, "in-progress", "2099-01-01T00:00:00Z", "olu")
    assert "awaits you" in _mon(ex)


def test_a_manual_run_cannot_swallow_a_change_the_scheduler_has_not_seen(ex) -> None:
    """A hand-triggered job that updated the scheduler's baseline would let the real tick see
    'no change' and lose the message. The monitor keeps no baseline, so the scheduler's own
    diff still sees the change after any number of manual runs."""
    scheduler_baseline = _mon(ex, scope="required")  # the scheduler's last real tick
    send(ex, "claude", "new-work", "required", "please look")
    for _ in range(3):
        _mon(ex, scope="required")  # someone "tests" it by hand
    assert _mon(ex, scope="required") != scheduler_baseline  # the next real tick wakes the agent


def _every_case(ex) -> None:
    """Topics in every shape the monitor tells apart, each directory settled (an old mtime)."""
    now = format_time()
    send(ex, "claude", "asked", "required", "a question")
    t = send(ex, "claude", "mixed", "required", "a question").topic
    send(ex, "claude", t, "fyi", "and a P.S.")  # the newest is fyi: the scopes differ
    t = send(ex, "claude", "acked", "required", "a question").topic
    hand_state(ex.root, "claude", t, "in-progress", format_time(), "olu")
    t = send(ex, "claude", "closing", "fyi", "that settles it").topic
    set_state(ex, "claude", t, "done")
    t = send(ex, "claude", "answered", "required", "a question").topic
    send(ex, "olu", t, "fyi", "an answer")
    t = send(ex, "olu", "mine", "required", "olu asks").topic
    hand_state(ex.root, "olu", t, "no such status", now, "claude")  # does not read
    t = send(ex, "claude", "future", "required", "a question").topic
    hand_state(ex.root, "claude", t, "in-progress", "2099-01-01T00:00:00Z", "olu")
    old = time.time() - 3600
    for d in ex.root.glob("to-*/20*"):
        os.utime(d, (old, old))


def _without_the_ticks_records(ex, agent: str, scope: str, monkeypatch) -> str:
    from mailslot.exchange import monitor as mon

    with monkeypatch.context() as m:
        m.setattr(mon, "load_monitor", lambda *args: None)
        return monitor(ex, agent, action=scope).text()


def test_what_the_tick_kept_says_exactly_what_the_files_say(ex, monkeypatch) -> None:
    _every_case(ex)
    tick(ex)
    tick(ex)  # every directory now settled in the tick's records
    for agent in ("olu", "claude"):
        for scope in ("any", "required"):
            kept = monitor(ex, agent, action=scope).text()
            assert kept == _without_the_ticks_records(ex, agent, scope, monkeypatch)


@pytest.mark.parametrize("damaged", ["lines", "states"])
def test_kept_records_of_the_wrong_shape_are_read_afresh(ex, monkeypatch, damaged) -> None:
    """The monitor looks at what it takes of the tick's records (its caller's lines, every
    STATE.md's size and mtime): a topic whose record is damaged there is read from the
    directories, whichever side's it is."""
    import json

    _every_case(ex)
    tick(ex)
    tick(ex)
    path = ex.meta / "tick-monitor.json"
    data = json.loads(path.read_text())
    count = 0
    for kept in data[damaged].values():
        for name, record in kept.items():
            if damaged == "lines":
                record[0] = [["entry", 7, None, "many", None]]  # a line no tick writes
            else:
                kept[name] = [record[0]]  # a size with no mtime
            count += 1
    assert count
    path.write_text(json.dumps(data))
    for agent in ("olu", "claude"):
        for scope in ("any", "required"):
            kept_text = monitor(ex, agent, action=scope).text()
            assert kept_text == _without_the_ticks_records(ex, agent, scope, monkeypatch)


def test_a_quiet_exchange_is_answered_without_opening_an_entry(ex, monkeypatch) -> None:
    from mailslot.exchange import monitor as mon

    _every_case(ex)
    tick(ex)
    tick(ex)
    send(ex, "olu", "later", "fyi", "a topic that changes the state")
    old = time.time() - 3600
    for d in ex.root.glob("to-*/*-later"):
        os.utime(d, (old, old))
    tick(ex)  # writes the whole state anew: what the monitor takes must go with it
    opened: list[str] = []
    real = mon.peek_entry
    monkeypatch.setattr(mon, "peek_entry", lambda p: opened.append(str(p)) or real(p))
    out = monitor(ex, "olu", action="required").text()
    assert "asked: 0001-claude.md (required) awaits you" in out
    assert [p for p in opened if "-future" not in p] == []  # a future STATE is read each time


def test_a_change_after_the_tick_is_seen_at_once(ex) -> None:
    _every_case(ex)
    tick(ex)
    tick(ex)
    topic = next(ex.inbox("olu").glob("*-answered")).name
    assert topic not in _mon(ex)
    send(ex, "claude", topic, "required", "one more question")  # a new name in the directory
    assert f"{topic}: 0003-claude.md (required) awaits you" in _mon(ex)
    acked = next(ex.inbox("claude").glob("*-acked")).name
    assert f"{acked}: olu is done" not in _mon(ex, "claude")
    hand_state(ex.root, "claude", acked, "done", format_time(), "olu")  # in place: same mtime dir
    assert f"{acked}: olu is done, you are not" in _mon(ex, "claude")

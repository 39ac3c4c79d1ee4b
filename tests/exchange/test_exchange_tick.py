"""The tick beyond the guard: git retries and gating, the diff's edge cases, the lock, INDEX."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from exhelp import hand_entry, hand_state, run, send_cli, tick

from mailslot.core import clock

T = "2026-11-01-gate-bug"


@pytest.fixture(autouse=True)
def far_clock() -> None:
    """Hand-written times in this module are in 2098 and the clock reads 2098-11-02 noon: the
    files' real arrival times (ctime, which the guard also compares) are then all older than
    every hand-written time, so each case is decided by the times it writes."""
    clock.set_clock(lambda: datetime(2098, 11, 2, 12, tzinfo=UTC))


def git(root, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def test_failed_commit_fails_the_tick_and_is_retried(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    lock = root / ".git" / "index.lock"
    lock.write_text("")  # another git process, as far as git can tell
    r = run(root, "exchange", "tick", "--json", ok=False)
    assert r.exit_code == 1 and "git" in r.stderr
    assert json.loads(r.stdout)["new_entries"] == [f"to-claude/{T}/0001-olu.md"]  # reported
    lock.unlink()
    out = tick(root)  # nothing new, but git was not clean: it commits now
    assert out["new_entries"] == [] and out["commit"]
    assert f"to-claude/{T}/0001-olu.md" in git(root, "ls-files")


def test_a_hand_edit_outside_topics_is_committed(ex) -> None:
    root = ex.root
    tick(root)
    with (root / "CONVENTION.md").open("a") as f:
        f.write("\nLocal note: olu reads every 2 minutes.\n")
    out = tick(root)
    assert out["commit"] and git(root, "status", "--porcelain") == ""


def _archive_then_edit(root: Path, text: str) -> None:
    """Archive topic T by the tick, then change its entry where the tick does not scan."""
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_state(root, "claude", T, "done", "2098-11-01T10:00:00Z")
    hand_state(root, "olu", T, "done", "2098-11-01T10:00:00Z")
    assert tick(root)["archived"] == [T]
    (root / "to-claude" / "done" / T / "0001-olu.md").write_text(text)


def test_an_edit_inside_an_archived_topic_is_committed_by_the_periodic_check(ex) -> None:
    root = ex.root
    _archive_then_edit(root, "tampered\n")
    git_path = root / ".mailslot" / "tick-git.json"
    checked = json.loads(git_path.read_text())
    assert checked["git_clean"] and checked["git_checked_ns"] > 0
    git_path.write_text(json.dumps({**checked, "git_checked_ns": 0}))  # checked long ago
    assert tick(root)["commit"]
    assert "tampered" in git(root, "show", f"HEAD:to-claude/done/{T}/0001-olu.md")


def test_the_periodic_git_check_of_a_quiet_exchange_leaves_the_records_alone(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    tick(root)
    records = root / ".mailslot" / "tick-state.json"
    git_path = root / ".mailslot" / "tick-git.json"
    before = records.stat().st_mtime_ns, records.read_bytes()
    git_path.write_text(json.dumps({**json.loads(git_path.read_text()), "git_checked_ns": 0}))
    out = tick(root)
    assert out["commit"] is None and not out["new_entries"]
    assert (records.stat().st_mtime_ns, records.read_bytes()) == before
    assert json.loads(git_path.read_text())["git_checked_ns"] > 0  # the check ran and is kept


def test_git_check_times_kept_by_an_older_tick_move_to_their_own_file(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    tick(root)
    records = root / ".mailslot" / "tick-state.json"
    git_path = root / ".mailslot" / "tick-git.json"
    old = {**json.loads(records.read_text()), **json.loads(git_path.read_text())}
    records.write_text(json.dumps(old))  # as the tick before this change kept them
    git_path.unlink()
    out = tick(root)
    assert out["commit"] is None and not out["new_entries"]  # nothing mistaken for new
    assert "git_checked_ns" not in json.loads(records.read_text())
    assert json.loads(git_path.read_text())["git_checked_ns"] == old["git_checked_ns"]


def test_an_older_ticks_word_on_git_wins_over_the_git_file(ex) -> None:
    # An old install's tick ran after ours and could not commit (git_clean false in the tick
    # state, where it keeps that); our tick-git.json still says clean and recent.
    root = ex.root
    _archive_then_edit(root, "edited later\n")
    records = root / ".mailslot" / "tick-state.json"
    state = json.loads(records.read_text())
    checked = json.loads((root / ".mailslot" / "tick-git.json").read_text())
    records.write_text(json.dumps({**state, **checked, "git_clean": False}))
    assert tick(root)["commit"]
    assert git(root, "status", "--porcelain") == ""


def test_a_git_file_with_wrong_types_means_check_git_now(ex) -> None:
    root = ex.root
    _archive_then_edit(root, "edited later\n")
    git_path = root / ".mailslot" / "tick-git.json"
    git_path.write_text('{"git_clean": true, "git_checked_ns": null, "root": ""}')
    assert tick(root)["commit"]  # not a crash, and not a skipped check
    assert json.loads(git_path.read_text())["git_checked_ns"] > 0


def test_corrupt_tick_state_reports_everything_as_new(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    tick(root)
    (root / ".mailslot" / "tick-state.json").write_text("{not json")
    r = run(root, "exchange", "tick", "--json")
    assert "treating everything as new" in r.stderr
    assert json.loads(r.stdout)["new_entries"] == [f"to-claude/{T}/0001-olu.md"]


def test_a_deleted_entry_is_reported(ex) -> None:
    root = ex.root
    p = hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_entry(root, "claude", T, 2, "olu", "2098-11-01T09:01:00Z")
    tick(root)
    p.unlink()
    assert tick(root)["removed"] == [f"to-claude/{T}/0001-olu.md"]


def test_state_changes_are_reported_once(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    tick(root)
    hand_state(root, "claude", T, "blocked", "2098-11-01T09:05:00Z")
    out = tick(root)
    assert out["state_changes"] == [{"topic": T, "side": "olu", "from": "open", "to": "blocked"}]
    assert tick(root)["state_changes"] == []


def test_index_lists_statuses_counts_activity_and_debts(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z", "required")
    hand_entry(root, "olu", "2026-11-02-other", 1, "claude", "2098-11-02T08:00:00Z")
    hand_state(root, "olu", "2026-11-02-other", "done", "2098-11-02T08:01:00Z")
    out = tick(root)
    index = (root / "INDEX.md").read_text()
    assert f"| `{T}` | open (0) | open (1) | 2098-11-01T09:00:00.000Z |" in index
    assert "**claude** owes:" in index and f"`{T}`: a reply to `0001-olu.md`" in index
    assert "**olu** owes:" in index and "a close" in index
    assert {(d["topic"], d["side"], d["reason"]) for d in out["debts"]} == {
        (T, "claude", "reply"),
        ("2026-11-02-other", "olu", "close"),
    }


@pytest.mark.slow
def test_concurrent_ticks_never_overlap(ex) -> None:
    for n in range(1, 30):
        hand_entry(ex.root, "claude", f"2026-11-01-t{n:02d}", 1, "olu", "2098-11-01T09:00:00Z")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mailslot",
                "--root",
                str(ex.root),
                "exchange",
                "tick",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    # exactly one run saw the 29 new entries; the others ran after it and saw nothing new
    counts = sorted(len(r["new_entries"]) for r in results)
    assert counts == [0, 0, 0, 29]
    assert git(ex.root, "status", "--porcelain") == ""


def test_archive_target_taken_fails_loudly_and_moves_nothing(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_state(root, "claude", T, "done", "2098-11-01T10:00:00Z")
    hand_state(root, "olu", T, "done", "2098-11-01T10:00:00Z")
    (root / "to-olu" / "done" / T).mkdir(parents=True)
    (root / "to-olu" / "done" / T / "stray.txt").write_text("x")
    r = run(root, "exchange", "tick", "--json", ok=False)
    assert r.exit_code == 1 and "settle it by hand" in r.stderr
    assert json.loads(r.stdout)["archived"] == []
    assert (root / "to-olu" / T).is_dir() and (root / "to-claude" / T).is_dir()


def test_archive_waits_for_the_send_lock_and_a_stuck_one_fails_loudly(ex, monkeypatch) -> None:
    import fcntl
    import os

    from mailslot.exchange import tick as tick_mod

    monkeypatch.setattr(tick_mod, "SEND_LOCK_WAIT_SECONDS", 0.3)
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_state(root, "claude", T, "done", "2098-11-01T10:00:00Z")
    hand_state(root, "olu", T, "done", "2098-11-01T10:00:00Z")
    fd = os.open(ex.send_lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a writer holds the lock and never lets go
        r = tick_mod.tick(ex)
    finally:
        os.close(fd)
    assert r.archived == [] and any("send lock" in e for e in r.errors), r.errors
    assert (root / "to-olu" / T).is_dir() and (root / "INDEX.md").read_text().count(T)
    assert tick(root)["archived"] == [T]  # released: the next tick archives


def _age_tree(root) -> None:
    """Make every topic directory look settled: modified at one fixed moment long ago, so a
    directory aged twice has the same mtime, as an untouched one would."""
    import os

    old = 1_700_000_000
    for d in root.glob("to-*/*-*-*-*"):
        os.utime(d, (old, old))


def _full_listing_never(monkeypatch) -> None:
    from mailslot.exchange import scan

    monkeypatch.setattr(scan, "ROTATION", 10**9)  # no directory's turn for a full listing


def test_settled_directories_still_see_state_rewritten_in_place(ex, monkeypatch) -> None:
    _full_listing_never(monkeypatch)
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_entry(root, "olu", T, 2, "claude", "2098-11-01T09:10:00Z")
    hand_state(root, "olu", T, "done", "2098-11-01T09:20:00Z")
    hand_state(root, "claude", T, "in-progress", "2098-11-01T09:21:00Z")
    _age_tree(root)
    tick(root)
    tick(root)  # now from the records: nothing listed
    # olu overwrites its STATE.md in place (plain open/write): the directory mtime stays
    mtime = (root / "to-claude" / T).stat().st_mtime_ns
    hand_state(root, "claude", T, "done", "2098-11-01T09:30:00Z")
    assert (root / "to-claude" / T).stat().st_mtime_ns == mtime
    out = tick(root)
    assert out["state_changes"] == [
        {"topic": T, "side": "olu", "from": "in-progress", "to": "done"}
    ]
    assert out["archived"] == [T]


def test_settled_directories_still_see_the_newest_entry_rewritten(ex, monkeypatch) -> None:
    _full_listing_never(monkeypatch)
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_state(root, "claude", T, "done", "2098-11-01T09:20:00Z")
    hand_state(root, "olu", T, "done", "2098-11-01T09:30:00Z")
    (root / "to-olu" / T).mkdir(exist_ok=True)
    hand_entry(root, "olu", T, 2, "claude", "2098-11-01T09:25:00Z")  # olu acked before: hold
    _age_tree(root)
    assert tick(root)["held"] == [T]
    _age_tree(root)  # HELD.md changed to-olu's mtime: settle it again
    tick(root)
    # the entry's 'at' is corrected in place to before olu's ack: the hold must go
    hand_entry(root, "olu", T, 2, "claude", "2098-11-01T09:05:00Z")
    _age_tree(root)
    out = tick(root)
    assert out["rewritten"] and out["released"] == [T] and out["archived"] == [T]


def _one_entry_settled(ex, monkeypatch) -> Path:
    """Topic T with one entry in ``to-claude/``, ticked twice with every directory settled and
    no full listing outside a directory's slot; the exchange's root."""
    _full_listing_never(monkeypatch)
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    _age_tree(root)
    tick(root)
    tick(root)
    return root


def test_a_new_entry_in_a_settled_directory_is_seen(ex, monkeypatch) -> None:
    root = _one_entry_settled(ex, monkeypatch)
    hand_entry(root, "claude", T, 2, "olu", "2098-11-01T09:01:00Z")
    assert tick(root)["new_entries"] == [f"to-claude/{T}/0002-olu.md"]
    topics = json.loads(run(root, "exchange", "topics", "--json").stdout)["topics"]
    assert topics[0]["counts"]["olu"] == 2


def _rewrite_an_old_entry_in_place(root: Path) -> None:
    """Two entries in topic T, ticked with every directory settled; then the first rewritten
    in place (``0001-olu.md``, smaller, the same name) and the tree settled again."""
    p = hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z", body="x" * 5000)
    hand_entry(root, "claude", T, 2, "olu", "2098-11-01T09:01:00Z", "required")
    _age_tree(root)
    tick(root)
    p.write_text("---\nfrom: olu\nat: 2098-11-01T09:00:00Z\naction: fyi\n---\nsmall\n")
    _age_tree(root)


def test_an_old_entry_rewritten_in_place_is_found_by_the_full_listing(ex, monkeypatch) -> None:
    from mailslot.exchange import scan

    _full_listing_never(monkeypatch)
    root = ex.root
    _rewrite_an_old_entry_in_place(root)
    assert tick(root)["rewritten"] == []  # not this directory's turn yet
    monkeypatch.setattr(scan, "ROTATION", 1)  # every directory's turn
    out = tick(root)
    assert [w["path"] for w in out["rewritten"]] == [f"to-claude/{T}/0001-olu.md"]
    # the newest entry, rewritten in place too, is read again in its slot: nothing owed now
    q = hand_entry(root, "claude", T, 2, "olu", "2098-11-01T09:01:00Z", "fyi", body="no.\n")
    _age_tree(root)
    out = tick(root)
    assert [w["path"] for w in out["rewritten"]] == [f"to-claude/{T}/{q.name}"]
    assert out["debts"] == []


def test_ticks_in_a_row_give_every_directory_its_full_listing_within_the_rotation(ex) -> None:
    from mailslot.exchange import scan

    root = ex.root
    _rewrite_an_old_entry_in_place(root)
    found = []
    # All within a few seconds, as on a timer whose period the rotation's span divides: the
    # turn moves with each run, not with the clock.
    for _ in range(2 * scan.ROTATION):
        found += [w["path"] for w in tick(root)["rewritten"]]
    assert found == [f"to-claude/{T}/0001-olu.md"]


def test_an_entry_rewritten_in_place_is_found_name_by_name_in_its_slot(ex, monkeypatch) -> None:
    """The directory's mtime and ctime both unchanged (an in-place write touches neither): its
    slot lstats the names it was listed with, without listing it again, and finds the rewrite."""
    from mailslot.exchange import scan

    _full_listing_never(monkeypatch)
    root = ex.root
    p = hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z", body="x" * 5000)
    hand_entry(root, "claude", T, 2, "olu", "2098-11-01T09:01:00Z", "required")
    _age_tree(root)
    tick(root)  # listed after the aging: quiet records with the directory's ctime and names
    tick(root)
    d = root / "to-claude" / T
    before = d.stat()
    p.write_text("---\nfrom: olu\nat: 2098-11-01T09:00:00Z\naction: fyi\n---\nsmall\n")
    after = d.stat()
    assert (after.st_mtime_ns, after.st_ctime_ns) == (before.st_mtime_ns, before.st_ctime_ns)
    monkeypatch.setattr(scan, "ROTATION", 1)  # every directory's turn
    out = tick(root)
    assert [w["path"] for w in out["rewritten"]] == [f"to-claude/{T}/0001-olu.md"]


def test_an_entry_added_behind_a_put_back_directory_mtime_is_found_in_its_slot(
    ex, monkeypatch
) -> None:
    """A copy whose directory's mtime is put back after a new entry (``touch -d``, ``cp -a``,
    ``rsync -t``) looks unchanged outside its slot; in its slot the ctime, which nobody puts
    back, has moved, so the directory is listed and the entry told."""
    import os

    from mailslot.exchange import scan

    root = _one_entry_settled(ex, monkeypatch)
    d = root / "to-claude" / T
    before = d.stat()
    hand_entry(root, "claude", T, 2, "olu", "2098-11-01T09:01:00Z")
    os.utime(d, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert tick(root)["new_entries"] == []  # not its turn: the mtime says nothing changed
    monkeypatch.setattr(scan, "ROTATION", 1)  # every directory's turn
    assert tick(root)["new_entries"] == [f"to-claude/{T}/0002-olu.md"]


def _quiet_tree(root: Path) -> None:
    """Three topics, none of which hangs on the guard: one owes a reply, one a close, one
    nothing; every directory settled."""
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z", "required")
    other = "2026-11-02-closing"
    hand_entry(root, "olu", other, 1, "claude", "2098-11-01T09:00:00Z")
    hand_state(root, "olu", other, "done", "2098-11-01T09:05:00Z")
    hand_entry(root, "olu", "2026-11-03-quiet", 1, "claude", "2098-11-01T09:00:00Z")
    _age_tree(root)


def _no_whole_state(monkeypatch) -> None:
    from mailslot.exchange import tickstate

    def refuse(*args: object) -> None:
        raise AssertionError("a tick with nothing new read the whole state")

    monkeypatch.setattr(tickstate, "load_state", refuse)


def test_a_tick_with_nothing_new_keeps_every_outcome_without_reading_the_state(
    ex, monkeypatch
) -> None:
    from mailslot.exchange import tick as tick_mod

    _full_listing_never(monkeypatch)
    root = ex.root
    _quiet_tree(root)
    first = tick(root)
    index = (root / "INDEX.md").read_text()
    kept = {p.name: p.stat().st_mtime_ns for p in (root / ".mailslot").glob("tick-*.json")}
    _no_whole_state(monkeypatch)
    r = tick_mod.tick(ex)
    assert r.debts == first["debts"] and len(r.debts) == 2, r.debts
    assert not r.new_entries and not r.state_changes and not r.errors and not r.warnings
    assert (root / "INDEX.md").read_text() == index
    assert {p.name: p.stat().st_mtime_ns for p in (root / ".mailslot").glob("tick-*.json")} == kept


def test_debts_passed_over_are_those_the_whole_run_works_out_in_order(ex, monkeypatch) -> None:
    """The debts a quiet tick takes from its kept outcomes are, field for field and in order,
    the ones a tick that works every topic out (no quiet records) tells, a ``detail`` included."""
    from mailslot.exchange import tick as tick_mod

    _full_listing_never(monkeypatch)
    root = ex.root
    _quiet_tree(root)
    hand_entry(root, "olu", "2026-11-04-garbled", 1, "claude", "2098-11-01T09:00:00Z", "maybe")
    hand_entry(root, "claude", "2026-11-05-both", 1, "olu", "2098-11-01T09:00:00Z", "required")
    hand_state(root, "claude", "2026-11-05-both", "done", "2098-11-01T09:05:00Z")
    _age_tree(root)
    first = tick_mod.tick(ex)  # the general path: no kept outcome, every topic settled
    assert any("detail" in d for d in first.debts) and len(first.debts) >= 4
    (root / ".mailslot" / "tick-quiet.json").unlink()  # and again, from the whole state
    general = tick_mod.tick(ex)
    _no_whole_state(monkeypatch)
    passed = tick_mod.tick(ex)  # every topic passed over: its debts as kept
    assert passed.debts == general.debts == first.debts
    assert [list(d) for d in passed.debts] == [list(d) for d in general.debts]


def test_a_copy_passed_over_beside_a_changed_one_is_quiet_in_its_next_slot(ex, monkeypatch) -> None:
    """A topic with news on one side: the other side's copy, rebuilt from its record, keeps
    the digest of its last listing, so its next full listing finds it unchanged and the tick
    after the news reads no whole state."""
    import os

    from mailslot.exchange import scan
    from mailslot.exchange import tick as tick_mod

    _full_listing_never(monkeypatch)
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_entry(root, "olu", T, 2, "claude", "2098-11-01T09:10:00Z")
    _age_tree(root)
    tick(root)
    tick(root)
    hand_entry(root, "claude", T, 3, "olu", "2098-11-01T09:20:00Z")
    os.utime(root / "to-claude" / T, (1_700_000_100, 1_700_000_100))  # changed, and settled
    assert tick(root)["new_entries"] == [f"to-claude/{T}/0003-olu.md"]
    monkeypatch.setattr(scan, "ROTATION", 1)  # every directory's turn
    _no_whole_state(monkeypatch)
    r = tick_mod.tick(ex)
    assert not r.new_entries and not r.rewritten and not r.errors, r.errors


def test_a_tick_with_nothing_new_still_sees_state_rewritten_in_place(ex, monkeypatch) -> None:
    from mailslot.exchange import tick as tick_mod

    _full_listing_never(monkeypatch)
    root = ex.root
    hand_state(root, "claude", T, "open", "2098-11-01T09:20:00Z")
    _quiet_tree(root)
    tick(root)
    hand_state(root, "claude", T, "in-progress", "2098-11-01T09:30:00Z")  # in place
    _age_tree(root)
    r = tick_mod.tick(ex)
    assert r.state_changes == [{"topic": T, "side": "olu", "from": "open", "to": "in-progress"}]
    assert "in-progress (1)" in (root / "INDEX.md").read_text()


def test_an_entry_rewritten_with_its_size_and_mtime_put_back_is_read_again_in_its_slot(
    ex, monkeypatch
) -> None:
    """(size, mtime) cannot tell this rewrite, but its ctime moved, which nobody can put back:
    the full listing in the directory's slot reads the entry again (git keeps both versions)."""
    import os

    from mailslot.exchange import scan

    _full_listing_never(monkeypatch)
    root = ex.root
    p = hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z", "required", body="a\n")
    _age_tree(root)
    assert [d["entry"] for d in tick(root)["debts"]] == [p.name]
    before = p.stat()
    text = p.read_text().replace("required", "fyi").replace("a\n", "aaaaaa\n")
    p.write_text(text)
    os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (p.stat().st_size, p.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    _age_tree(root)
    monkeypatch.setattr(scan, "ROTATION", 1)  # every directory's turn
    assert tick(root)["debts"] == []


def test_quiet_records_left_beside_another_state_are_ignored(ex, monkeypatch) -> None:
    """A tick killed between writing the state and its quiet records leaves records that name
    another state: the next tick reads the whole state instead (here, the quiet records still
    know the topic as live, the state knows it archived: its reopening must be told)."""
    import shutil

    _full_listing_never(monkeypatch)
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    _age_tree(root)
    tick(root)
    meta = root / ".mailslot"
    kept = meta / "kept.json"
    shutil.copy(meta / "tick-quiet.json", kept)
    hand_state(root, "claude", T, "done", "2098-11-01T10:00:00Z")
    hand_state(root, "olu", T, "done", "2098-11-01T10:00:00Z")
    assert tick(root)["archived"] == [T]
    kept.replace(meta / "tick-quiet.json")  # as if the tick died before writing it
    for side in ("claude", "olu"):
        (root / f"to-{side}" / "done" / T).rename(root / f"to-{side}" / T)
    hand_state(root, "olu", T, "open", "2098-11-01T11:00:00Z")
    out = tick(root)
    assert out["reopened"] == [T] and out["archived"] == [] and not out["warnings"]


def _damage_kept_records(meta: Path) -> None:
    """Every record in the tick's kept files replaced by something of the wrong shape, each
    file still naming the state it goes with (as a damaged or planted file would)."""
    quiet = json.loads((meta / "tick-quiet.json").read_text())
    names, sides, rows, counts, statuses, debts = quiet["known"]
    quiet["known"] = [names, sides, rows, counts, statuses, debts[:-1]]  # a debt cut short
    (meta / "tick-quiet.json").write_text(json.dumps(quiet))
    _damage_monitor_records(meta)


def _damage_monitor_records(meta: Path) -> None:
    monitor = json.loads((meta / "tick-monitor.json").read_text())
    for found in monitor["dirs"].values():
        found.update((name, "garbage") for name in list(found))
    for stated in monitor["states"].values():
        stated.update((name, [-1]) for name in list(stated))
    for told in monitor["lines"].values():
        told.update((name, 7) for name in list(told))
    planted = "2026-11-01-planted"  # a topic nobody has, said to await both sides
    monitor["dirs"]["claude"][planted] = 1
    for told in monitor["lines"].values():
        told[planted] = [[["entry", "0001-olu.md", "required", 1, None]], None]
    (meta / "tick-monitor.json").write_text(json.dumps(monitor))


def test_kept_records_of_the_wrong_shape_are_read_afresh_never_trusted(ex) -> None:
    root = ex.root
    _quiet_tree(root)
    first = tick(root)
    index = (root / "INDEX.md").read_text()
    waiting = run(root, "exchange", "monitor", "--json", agent="claude").stdout
    meta = root / ".mailslot"
    assert any(json.loads((meta / "tick-monitor.json").read_text())["dirs"].values())
    _damage_kept_records(meta)
    assert run(root, "exchange", "monitor", "--json", agent="claude").stdout == waiting
    again = tick(root)
    assert again["debts"] == first["debts"] and not again["errors"] and not again["new_topics"]
    assert (root / "INDEX.md").read_text() == index
    _damage_kept_records(meta)  # the quiet tick above may not have rewritten them
    quiet = json.loads((meta / "tick-quiet.json").read_text())
    keys, ints, digests, names = quiet["copies"]
    for copies in (  # the quick records' columns, each damaged one way
        {key: ["mtime", -1] for key in keys},
        [keys, [*ints[:-1], "1"], digests, names],
        [keys, [*ints[:-1], True], digests, names],
        [keys, ints[:-1], digests, names],
        [keys, ints, digests, [*names[:-1], None]],
        [keys, ints, digests],
        [[*keys[:-1], 7], ints, digests, names],
    ):
        (meta / "tick-quiet.json").write_text(json.dumps({**quiet, "copies": copies}))
        again = tick(root)
        assert again["debts"] == first["debts"] and not again["errors"] and not again["new_topics"]
    quiet = json.loads((meta / "tick-quiet.json").read_text())
    names, sides, rows, counts, statuses, debts = quiet["known"]
    for known in (  # the outcomes' columns, each damaged one way
        {name: None for name in names},
        [names, sides, rows, [*counts[:-1], counts[-1] + 1], statuses, debts],
        [names, sides, rows, [-1, *counts[1:]], statuses, debts],
        [names, sides, rows, counts, [*statuses[:-1], 1], debts],
        [names, sides, rows, counts, statuses, [None, *debts[1:]]],
        [names, [*sides[:-1], 3], rows, counts, statuses, debts],
        [names, sides, rows[:-1], counts, statuses, debts],
    ):
        (meta / "tick-quiet.json").write_text(json.dumps({**quiet, "known": known}))
        again = tick(root)
        assert again["debts"] == first["debts"] and not again["errors"] and not again["new_topics"]


def test_monitor_records_of_the_wrong_shape_are_read_afresh_never_trusted(ex) -> None:
    clock.set_clock(lambda: datetime.now(UTC))  # a fresh tick: the monitor takes its records
    root = ex.root
    import os
    import time

    send_cli(root, "olu", "gate", "please look", action="required")
    old = time.time() - 3600
    for d in root.glob("to-*/20*"):
        os.utime(d, (old, old))
    tick(root)
    tick(root)  # every directory now settled in the tick's records
    meta = root / ".mailslot"
    assert any(json.loads((meta / "tick-monitor.json").read_text())["dirs"].values())
    waiting = run(root, "exchange", "monitor", "--json", agent="claude").stdout
    assert "please" not in waiting and json.loads(waiting)["awaiting"], waiting
    _damage_monitor_records(meta)
    assert run(root, "exchange", "monitor", "--json", agent="claude").stdout == waiting


def test_a_fifo_in_place_of_a_kept_file_is_passed_over_without_blocking(ex) -> None:
    import os

    root = ex.root
    _quiet_tree(root)
    first = tick(root)
    meta = root / ".mailslot"
    for name in ("tick-quiet.json", "tick-monitor.json", "tick-git.json"):
        (meta / name).unlink(missing_ok=True)
        os.mkfifo(meta / name)
    assert run(root, "exchange", "monitor", "--json", agent="claude").exit_code == 0
    assert tick(root)["debts"] == first["debts"]


def _git_child(pid: int, verb: str) -> bool:
    """Whether process ``pid`` has a running ``git ... VERB`` child."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return False
    for child in children:
        try:
            argv = Path(f"/proc/{child}/cmdline").read_text().split("\0")
        except OSError:
            continue
        if argv and argv[0].endswith("git") and verb in argv:
            return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("signum", [15, 2])  # SIGTERM (a service stop), SIGINT to the tick alone
def test_a_tick_stopped_while_git_runs_leaves_no_index_lock(ex, signum: int) -> None:
    """A killed git leaves .git/index.lock, and every later tick then fails to commit."""
    for i in range(3000):  # enough that `git add -A` is still running when the signal lands
        hand_entry(ex.root, "olu", f"2026-11-29-t{i}", 1, "claude", "2026-11-29T10:00:00Z")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "--root", str(ex.root), "exchange", "tick"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        lock = ex.root / ".git" / "index.lock"
        while proc.poll() is None and not (_git_child(proc.pid, "add") and lock.exists()):
            pass  # git add holds its index.lock now
        assert proc.poll() is None, "the tick ended before git add took its lock"
        proc.send_signal(signum)
        proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum
    assert not lock.exists()
    assert tick(ex.root)["commit"]  # the next tick commits what the stopped one could not


@pytest.mark.timeout(120)
def test_a_full_disk_never_hides_an_archive_the_tick_already_made(
    small_disk: Path, fill_disk
) -> None:
    from mailslot.exchange.create import create_exchange
    from mailslot.exchange.entries import send
    from mailslot.exchange.state import set_state

    clock.set_clock(None)  # the guard compares real arrivals with these times
    ex = create_exchange(small_disk / "x", ["claude", "olu"], git=False)
    topic = send(ex, "claude", "closing", "fyi", "that settles it\n").topic
    tick(ex.root)
    set_state(ex, "olu", topic, "done")
    set_state(ex, "claude", topic, "done")
    filler = fill_disk(small_disk)
    r = run(ex.root, "exchange", "tick", "--json", ok=False)
    assert r.exit_code == 1  # loud: it could not do all of its job
    out = json.loads(r.stdout)  # and it still says what it did: a move needs no space
    assert out["archived"] == [topic], json.dumps(out)
    assert (ex.root / "to-olu" / "done" / topic).is_dir()
    assert any("INDEX.md" in e for e in out["errors"]), out["errors"]
    filler.unlink()
    tick(ex.root)
    assert f"`{topic}`" not in (ex.root / "INDEX.md").read_text()


def test_kept_records_are_named_in_memory_and_flat_columns_on_disk(ex, monkeypatch) -> None:
    """``tick-quiet.json`` holds the ``QuickRecord``s (``quick_columns``) and the ``Outcome``s
    (``known_columns``) as flat columns; read back, each is a record by name, and written again
    it is the same bytes."""
    from mailslot.exchange import tickstate

    _full_listing_never(monkeypatch)
    root = ex.root
    _quiet_tree(root)
    tick(root)
    tick(root)
    meta = root / ".mailslot"
    text = (meta / "tick-quiet.json").read_text()
    on_disk = json.loads(text)
    keys, ints, digests, names = on_disk["copies"]
    assert keys and len(ints) == 4 * len(keys) == 4 * len(digests) == 4 * len(names)
    assert {type(x) for x in ints} == {int} and {type(x) for x in digests + names} == {str}
    topics, sides, rows, counts, statuses, debts = on_disk["known"]
    assert len(topics) == len(sides) == len(rows) == len(counts) // 2 and None not in sides
    assert sum(counts[0::2]) == len(statuses) and 4 * sum(counts[1::2]) == len(debts)

    quiet = tickstate.load_quiet(meta)
    assert quiet is not None and list(quiet["copies"]) == keys
    for i, (key, q) in enumerate(quiet["copies"].items()):
        assert isinstance(q, tickstate.QuickRecord)
        assert [q.dir_mtime, q.state_size, q.state_mtime, q.dir_ctime] == ints[4 * i : 4 * i + 4]
        assert (q.key, q.names) == (digests[i], names[i])
        assert q.names == "/".join(sorted(p.name for p in (root / key).iterdir()))
    index = (root / "INDEX.md").read_text()
    assert list(quiet["known"]) == topics
    for i, kept in enumerate(quiet["known"].values()):
        assert isinstance(kept, tickstate.Outcome)
        assert (kept.sides, kept.row) == (sides[i], rows[i]) and kept.row in index
        assert [len(kept.status), len(kept.debts)] == counts[2 * i : 2 * i + 2]
    told = [d for o in quiet["known"].values() for d in o.debts]
    assert [x for d in told for x in d] == debts and all(len(d) == 4 for d in told)

    (meta / "tick-quiet.json").unlink()
    fields = {k: v for k, v in quiet.items() if k not in ("version", "state")}
    tickstate.save_quiet(meta, fields, None)
    assert (meta / "tick-quiet.json").read_text() == text

"""The guard suite: every case drives the real ``exchange tick`` CLI entry point
against a sandbox tree and fails loudly if the tick exits non-zero -- a crashed tick leaves the
same evidence as a correct no-op (no archive, no marker, no notification)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from exhelp import hand_entry, hand_state, hook, run, tick

from mailslot.core import clock

T = "2026-11-01-gate-bug"


@pytest.fixture(autouse=True)
def far_clock() -> None:
    """Hand-written times in this module are in 2098 and the clock reads 2098-11-02 noon: the
    files' real arrival times (ctime, which the guard also compares) are then all older than
    every hand-written time, so each case is decided by the times it writes."""
    clock.set_clock(lambda: datetime(2098, 11, 2, 12, tzinfo=UTC))


@pytest.fixture
def step_clock() -> None:
    """Each ``now()`` is one second after the last, starting now (stamps strictly order and are
    never behind the files' real arrival times, which the guard also compares)."""
    start = datetime.now(UTC)
    counter = itertools.count()
    clock.set_clock(lambda: start + timedelta(seconds=next(counter)))


def live(root: Path, side: str, topic: str = T) -> Path:
    return root / f"to-{side}" / topic


def archived(root: Path, side: str, topic: str = T) -> Path:
    return root / f"to-{side}" / "done" / topic


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def both_done_tree(root: Path, entry_at: str, ack_at: str, *, topic: str = T) -> None:
    """olu asked (0001), claude answered (0002, at ``entry_at``), olu acked at ``ack_at``."""
    hand_entry(root, "claude", topic, 1, "olu", "2098-11-01T09:00:00Z", "required")
    hand_entry(root, "olu", topic, 2, "claude", entry_at, "fyi")
    hand_state(root, "olu", topic, "done", "2098-11-01T09:30:00Z", "claude")  # claude's
    hand_state(root, "claude", topic, "done", ack_at, "olu")  # olu's


# -- the live sequence that filed a reply unread, holds, release, no churn ------------


def test_seed_live_sequence_holds_instead_of_archiving(ex, step_clock) -> None:
    root = ex.root
    r = run(
        root, "exchange", "send", "--topic", "gate-bug", "--action", "required", "q?", agent="olu"
    )
    topic = r.stdout.strip().split("/")[1]
    tick(root)
    # olu marks its side done while its newest entry is required (forced, as a real agent did)
    run(root, "exchange", "state", topic, "done", "--force", agent="olu")
    run(root, "exchange", "send", "--topic", topic, "--action", "fyi", "the reply", agent="claude")
    run(root, "exchange", "state", topic, "done", agent="claude")
    out = tick(root)
    assert out["archived"] == [] and out["held"] == [topic]
    held = live(root, "olu", topic) / "HELD.md"  # olu owes the re-read; its inbox is to-olu
    assert held.is_file()
    text = held.read_text()
    assert (
        "0002-claude.md" in text and "re-affirm" in text and f"to-claude/{topic}/STATE.md" in text
    )
    assert not (live(root, "claude", topic) / "HELD.md").exists()
    assert live(root, "claude", topic).is_dir() and live(root, "olu", topic).is_dir()
    index = (root / "INDEX.md").read_text()
    assert "HELD for olu" in index and "re-read" in index


def test_reaffirming_releases_the_hold_and_archives(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T09:45:00Z")
    out = tick(root)
    assert out["held"] == [T] and out["archived"] == []
    hand_state(root, "claude", T, "done", "2098-11-01T10:05:00Z", "olu")  # olu re-affirms
    out = tick(root)
    assert out["released"] == [T] and out["archived"] == [T]
    assert archived(root, "olu").is_dir() and archived(root, "claude").is_dir()
    assert not live(root, "olu").exists() and not live(root, "claude").exists()
    assert not list(root.glob("to-*/done/*/HELD.md"))  # removed before the archive


def test_standing_hold_causes_no_churn(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T09:45:00Z")
    with hook() as h:
        first = tick(root, "--notify", h.url)
        assert first["held"] == [T] and first["notified"] and len(h.received) == 1
        held = live(root, "olu") / "HELD.md"
        before = (held.stat().st_ino, held.stat().st_mtime_ns, held.read_text())
        head = git(root, "rev-parse", "HEAD")
        for _ in range(3):
            again = tick(root, "--notify", h.url)
            assert again["held"] == [] and again["holding"] == [T]
            assert again["commit"] is None and again["notified"] is False
            assert again["new_entries"] == []
        assert len(h.received) == 1  # no notification about the marker itself
    assert (held.stat().st_ino, held.stat().st_mtime_ns, held.read_text()) == before
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""


def test_the_hold_record_names_the_entry_and_sweep_reads_it_not_the_text(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T09:45:00Z")
    assert tick(root)["held"] == [T]
    holds_path = root / ".mailslot" / "holds.json"
    record = json.loads(holds_path.read_text())[f"to-olu/{T}"]
    held = live(root, "olu") / "HELD.md"
    assert record == [held.stat().st_size, held.stat().st_mtime_ns, "0002-claude.md"]
    # the text is for people: rewording it (same size and mtime) does not change the debt
    text = held.read_text()
    st = held.stat()
    held.write_text(text.replace("`0002-claude.md`", "`0002-claude.xx`"))
    os.utime(held, ns=(st.st_atime_ns, st.st_mtime_ns))
    debts = json.loads(run(root, "exchange", "sweep", "--json", agent="olu").stdout)["debts"]
    assert {"topic": T, "reason": "re-read", "entry": "0002-claude.md"}.items() <= debts[0].items()
    # a record of two numbers (no entry) is still believed, and the next tick names the entry
    holds_path.write_text(json.dumps({f"to-olu/{T}": record[:2]}))
    out = tick(root)
    assert out["held"] == [] and out["holding"] == [T]
    assert json.loads(holds_path.read_text())[f"to-olu/{T}"] == record


def test_hold_is_recomputed_when_the_other_side_reopens(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T09:45:00Z")
    assert tick(root)["held"] == [T]
    hand_state(root, "olu", T, "open", "2098-11-01T10:10:00Z", "claude")  # claude reopens
    out = tick(root)
    assert out["released"] == [T] and out["archived"] == []
    assert not (live(root, "olu") / "HELD.md").exists()


def test_writing_past_each_other_holds(ex) -> None:
    """Each side's newest entry must pre-date the other's ack, not only the overall newest."""
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    hand_entry(root, "olu", T, 2, "claude", "2098-11-01T10:00:00Z")  # olu acked before this
    hand_entry(root, "claude", T, 3, "olu", "2098-11-01T10:01:00Z")  # written without reading
    hand_state(root, "claude", T, "done", "2098-11-01T09:30:00Z", "olu")
    hand_state(root, "olu", T, "done", "2098-11-01T10:02:00Z", "claude")
    out = tick(root)
    assert out["archived"] == [] and out["held"] == [T]
    assert (live(root, "olu") / "HELD.md").is_file()


# -- archive, and what must not archive -----------------------------------------------------


def test_both_done_and_acknowledged_archives_and_git_captures_the_move(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    out = tick(root)  # never committed live: the archive move is captured all the same
    assert out["archived"] == [T] and out["commit"]
    assert archived(root, "olu").is_dir()
    files = git(root, "ls-files")
    assert f"to-olu/done/{T}/0002-claude.md" in files and f"to-olu/{T}/" not in files
    assert git(root, "status", "--porcelain") == ""
    log = git(root, "log", "-1", "--format=%an <%ae>%n%s")
    assert log.startswith("mailslot <tick@") and "archived" in log


def test_archive_of_an_already_committed_topic_is_committed(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T09:45:00Z")
    tick(root)  # held, committed live
    assert f"to-olu/{T}/0002-claude.md" in git(root, "ls-files")
    hand_state(root, "claude", T, "done", "2098-11-01T10:05:00Z", "olu")
    out = tick(root)
    assert out["archived"] == [T] and out["commit"]
    files = git(root, "ls-files")
    assert f"to-olu/done/{T}/0002-claude.md" in files and f"to-olu/{T}/" not in files
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("status", ["open", "in-progress", "blocked"])
def test_one_side_not_done_does_not_archive(ex, status) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    hand_state(root, "olu", T, status, "2098-11-01T10:06:00Z", "claude")
    out = tick(root)
    assert out["archived"] == [] and out["held"] == []
    assert live(root, "olu").is_dir()
    debts = {(d["side"], d["reason"]) for d in out["debts"]}
    assert ("claude", "close") in debts  # olu is done, claude is not: claude owes the close


def test_missing_state_is_open_not_done(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    (live(root, "olu") / "STATE.md").unlink()
    out = tick(root)
    assert out["archived"] == [] and live(root, "olu").is_dir()


def _waiting(out: dict, topic: str = T) -> list[str]:
    return [w["reason"] for w in out["waiting"] if w["topic"] == topic]


@pytest.mark.parametrize(
    ("entry_at", "ack_at", "why"),
    [
        ("yesterday at noon", "2098-11-01T10:05:00Z", "no readable 'at'"),
        (None, "2098-11-01T10:05:00Z", "no readable 'at'"),
        ("2098-11-01T10:00:00", "2098-11-01T10:05:00Z", "no readable 'at'"),  # no zone
        ("2098-11-01T10:00:00Z", "soon", "no readable updated_at"),
        ("2098-11-01T10:00:00Z", None, "no readable updated_at"),
        ("2098-11-01T10:00:00Z", "2099-01-01T00:00:00Z", "in the future"),
        ("2099-01-01T00:00:00Z", "2098-11-01T10:05:00Z", "in the future"),
    ],
)
def test_unresolvable_times_do_not_archive(ex, entry_at, ack_at, why) -> None:
    root = ex.root
    both_done_tree(root, entry_at, ack_at)
    out = tick(root)
    assert out["archived"] == []
    assert live(root, "olu").is_dir() and live(root, "claude").is_dir()
    assert any(why in w for w in _waiting(out)), out["waiting"]
    assert "waiting:" in (root / "INDEX.md").read_text()


def test_a_tie_does_not_archive_and_holds(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:00:00+00:00")
    out = tick(root)
    assert out["archived"] == [] and out["held"] == [T]
    assert "same instant" in (live(root, "olu") / "HELD.md").read_text()


def test_unreadable_state_does_not_archive(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    (live(root, "claude") / "STATE.md").write_text("status: [done\n")
    out = tick(root)
    assert out["archived"] == [] and live(root, "claude").is_dir()
    topics = json.loads(run(root, "exchange", "topics", "--json").stdout)["topics"]
    assert topics[0]["status"]["olu"] == "unknown"


def test_unparseable_entry_does_not_archive(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    (live(root, "olu") / "0002-claude.md").write_text("no frontmatter, just words\n")
    out = tick(root)
    assert out["archived"] == [] and _waiting(out)


# -- half-archived recovery -----------------------------------------------------------------


def test_half_archived_with_guard_passing_is_completed(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    (root / "to-olu" / "done").mkdir(exist_ok=True)
    os.rename(live(root, "olu"), archived(root, "olu"))  # a previous run died half-way
    out = tick(root)
    assert out["recovered"] == [{"topic": T, "to": "archived"}]
    assert archived(root, "olu").is_dir() and archived(root, "claude").is_dir()
    assert not live(root, "claude").exists()


def test_half_archived_with_guard_failing_is_brought_back(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T09:45:00Z")  # must hold
    os.rename(live(root, "claude"), archived(root, "claude"))
    out = tick(root)
    assert out["recovered"] == [{"topic": T, "to": "live"}]
    assert live(root, "olu").is_dir() and live(root, "claude").is_dir()
    assert not archived(root, "claude").exists()
    assert out["held"] == [T] and (live(root, "olu") / "HELD.md").is_file()
    assert out["new_entries"] == sorted(
        [f"to-claude/{T}/0001-olu.md", f"to-olu/{T}/0002-claude.md"]
    )


# -- the diff -------------------------------------------------------------------------------


def test_brand_new_topic_is_reported_not_absorbed(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", "2026-11-01-old", 1, "olu", "2098-11-01T09:00:00Z")
    tick(root)
    with hook() as h:
        hand_entry(root, "claude", "2026-11-02-fresh", 1, "olu", "2098-11-02T09:00:00Z", "required")
        out = tick(root, "--notify", h.url)
        assert out["new_topics"] == ["2026-11-02-fresh"]
        assert out["new_entries"] == ["to-claude/2026-11-02-fresh/0001-olu.md"]
        assert out["notified"] and len(h.received) == 1
        assert "2026-11-02-fresh" in h.received[0]["message"]
        again = tick(root, "--notify", h.url)
        assert again["new_topics"] == [] and again["new_entries"] == [] and len(h.received) == 1


def test_one_batched_notification_per_tick(ex) -> None:
    root = ex.root
    for n in range(1, 6):
        hand_entry(root, "claude", f"2026-11-0{n}-t{n}", 1, "olu", f"2026-11-0{n}T09:00:00Z")
    with hook() as h:
        out = tick(root, "--notify", h.url, "--notify", h.url.replace("/hook", "/second"))
        assert len(out["new_entries"]) == 5 and out["notified"]
        assert len(h.received) == 2  # one message per target, not one per file
        for msg in h.received:
            assert all(f"t{n}" in msg["message"] for n in range(1, 6))


def test_failed_notification_is_reported_retried_and_never_blocks(ex) -> None:
    root = ex.root
    with hook() as probe:
        port = probe.port  # a port that is free once the probe server closes
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    url = f"json://127.0.0.1:{port}/hook"
    out = tick(root, "--notify", url)
    assert out["archived"] == [T] and out["commit"]  # archive and commit went ahead
    assert out["notified"] is False and out["notify_error"]
    beat = json.loads((root / ".mailslot" / "heartbeat").read_text())
    assert beat["ok"] is False and beat["notify_error"]
    with hook(port) as h:
        out = tick(root, "--notify", url)
        assert out["notified"] and len(h.received) == 1
        assert f"archived {T}" in h.received[0]["message"]  # the earlier news, retried
        assert tick(root, "--notify", url)["notified"] is False and len(h.received) == 1


def test_notified_is_false_without_a_target(ex) -> None:
    root = ex.root
    hand_entry(root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    out = tick(root)
    assert out["new_entries"] and out["notified"] is False and out["notify_error"] is None


def test_config_notify_targets_are_used(tmp_path) -> None:
    with hook() as h:
        r = run(
            tmp_path,
            "exchange",
            "init",
            str(tmp_path / "x"),
            "--side",
            "claude",
            "--side",
            "olu",
            "--notify",
            h.url,
        )
        assert r.exit_code == 0
        hand_entry(tmp_path / "x", "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
        assert tick(tmp_path / "x")["notified"] and len(h.received) == 1


def test_rewritten_entry_is_reported_loudly(ex) -> None:
    root = ex.root
    p = hand_entry(root, "claude", T, 2, "olu", "2098-11-01T09:00:00Z", body="x" * 10_000)
    tick(root)
    p.write_text("---\nfrom: olu\nat: 2098-11-01T11:00:00Z\naction: fyi\n---\nshort\n")
    out = tick(root)
    assert out["rewritten"] and out["rewritten"][0]["path"] == f"to-claude/{T}/0002-olu.md"
    assert out["rewritten"][0]["bytes"] < out["rewritten"][0]["was_bytes"]


def test_held_marker_is_not_traffic(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T09:45:00Z")
    tick(root)
    held = live(root, "olu") / "HELD.md"
    os.utime(held, ns=(4_102_444_800_000_000_000, 4_102_444_800_000_000_000))  # year 2100
    out = tick(root)
    assert out["new_entries"] == [] and out["rewritten"] == [] and out["commit"] is None
    topics = json.loads(run(root, "exchange", "topics", "--json").stdout)["topics"]
    assert topics[0]["counts"] == {"claude": 1, "olu": 1}
    assert topics[0]["last_activity"] == "2098-11-01T10:00:00.000Z"
    assert "2100" not in (root / "INDEX.md").read_text()


def test_hand_written_files_like_a_foreign_agent_archive(ex) -> None:
    root = ex.root
    hand_entry(
        root, "claude", T, 1, "olu", "2098-11-01T09:00:00+00:00", "required", crlf=True, quoted=True
    )
    hand_entry(root, "olu", T, 2, "claude", "2098-11-01T10:00:00Z", crlf=True)
    hand_state(root, "olu", T, "done", "2098-11-01T10:01:00Z", fenced=True, crlf=True)
    hand_state(root, "claude", T, "done", "2098-11-01T10:02:00+00:00", crlf=True)
    (live(root, "claude") / ".0003-olu.md.swp").write_text("in flight")
    out = tick(root)
    assert out["archived"] == [T]
    assert f"to-claude/{T}/.0003-olu.md.swp" not in out["new_entries"]


def test_reopen_brings_both_sides_back_and_is_not_rearchived(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    assert tick(root)["archived"] == [T]
    r = run(root, "exchange", "reopen", T, "--why", "the fix regressed", "--json", agent="claude")
    moved = json.loads(r.stdout)["moved"]
    assert sorted(moved) == [f"to-claude/{T}", f"to-olu/{T}"]
    out = tick(root)
    assert out["reopened"] == [T] and out["archived"] == []
    assert out["new_entries"] == [f"to-olu/{T}/0003-claude.md"]  # only the explanation is new
    assert "regressed" in (live(root, "olu") / "0003-claude.md").read_text()
    assert tick(root)["archived"] == []


# -- a tick that cannot do its job says so --------------------------------------------------


def test_tick_fails_loudly_when_git_is_missing(ex) -> None:
    import shutil

    shutil.rmtree(ex.root / ".git")
    r = run(ex.root, "exchange", "tick", ok=False)
    assert r.exit_code == 1 and "repository is missing" in r.stderr


def test_tick_fails_loudly_when_another_holds_the_lock(ex, run_cli) -> None:
    from mailslot.core.fsio import file_lock

    with file_lock(ex.root / ".mailslot" / "tick.lock"):
        env = {"MAILSLOT_TICK_LOCK_WAIT": "0.2"}
        r = run_cli("--root", str(ex.root), "exchange", "tick", env=env)
    assert r.returncode == 1 and "lock" in r.stderr


def test_tick_commits_without_any_git_identity(ex, run_cli, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": str(home)}
    hand_entry(ex.root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    r = run_cli("--root", str(ex.root), "exchange", "tick", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["commit"]
    assert git(ex.root, "log", "-1", "--format=%an").strip() == "mailslot"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run over another user's files")
def test_root_ticks_over_another_users_exchange_where_its_git_config_trusts_it(
    ex, run_cli, tmp_path
) -> None:
    """The timer runs the tick as root over an exchange another user owns: git refuses such a
    repository unless ``safe.directory`` names it, and the admin's own git config is where that
    is said. Nothing else of that config reaches the tick (its identity is still mailslot's)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": str(home)}
    hand_entry(ex.root, "claude", T, 1, "olu", "2098-11-01T09:00:00Z")
    subprocess.run(["chown", "-R", "65534:65534", str(ex.root)], check=True)
    r = run_cli("--root", str(ex.root), "exchange", "tick", "--json", env=env)
    assert r.returncode == 1 and "safe.directory" in r.stderr  # untrusted: loud, not quiet
    (home / ".gitconfig").write_text(
        f"[safe]\n\tdirectory = {ex.root}\n[user]\n\tname = someone else\n"
    )
    r = run_cli("--root", str(ex.root), "exchange", "tick", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["commit"]
    trusted = ("-c", f"safe.directory={ex.root}")
    assert git(ex.root, *trusted, "log", "-1", "--format=%an").strip() == "mailslot"


def test_heartbeat_is_written_each_successful_tick(ex) -> None:
    beat = ex.root / ".mailslot" / "heartbeat"
    tick(ex.root)
    first = json.loads(beat.read_text())
    os.utime(beat, (1, 1))
    tick(ex.root)
    assert beat.stat().st_mtime > 1 and json.loads(beat.read_text())["ok"] is True
    assert first["at"].endswith("Z")


def test_seed_live_sequence_through_the_console_command(ex, run_cli) -> None:
    """The same sequence as the live archive race, every step a real ``mailslot`` process."""
    root = str(ex.root)

    def ms(*args: str) -> str:
        r = run_cli("--root", root, *args)
        assert r.returncode == 0, f"mailslot {' '.join(args)} exited {r.returncode}: {r.stderr}"
        return r.stdout

    path = ms("--as", "olu", "exchange", "send", "--topic", "live", "--action", "required", "q")
    topic = path.strip().split("/")[1]
    ms("--as", "olu", "exchange", "state", topic, "done", "--force")
    ms("--as", "claude", "exchange", "send", "--topic", topic, "--action", "fyi", "reply")
    ms("--as", "claude", "exchange", "state", topic, "done")
    out = json.loads(ms("exchange", "tick", "--json"))
    assert out["held"] == [topic] and out["archived"] == []
    assert (ex.root / "to-olu" / topic / "HELD.md").is_file()
    ms("--as", "olu", "exchange", "state", topic, "done")  # olu re-reads and re-affirms
    out = json.loads(ms("exchange", "tick", "--json"))
    assert out["released"] == [topic] and out["archived"] == [topic]


def test_a_state_written_just_now_acknowledges_its_own_time_despite_a_coarse_ctime() -> None:
    """The kernel's ctime may lag the time the writer took before writing by up to a tick: a
    STATE.md written a moment ago acknowledges its ``updated_at``, not the lagging ctime, while
    one dated seconds ahead of its writing is still held to when it was written."""
    from mailslot.exchange.guard import CTIME_GRANULARITY, acknowledged_by

    taken = clock.now()  # the writer's clock, read before the write
    lagging_ctime = time.time_ns() - 3_000_000  # the coarse clock stamped it 3 ms earlier
    assert acknowledged_by(taken, lagging_ctime) == taken
    ahead = taken + timedelta(seconds=50)
    assert acknowledged_by(ahead, lagging_ctime) < taken + CTIME_GRANULARITY + timedelta(seconds=1)


def test_a_topic_begun_and_finished_between_two_ticks_is_told_new_and_archived(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    out = tick(root)
    assert out["new_topics"] == [T] and out["archived"] == [T]
    again = tick(root)
    assert again["new_topics"] == [] and again["archived"] == [] and again["reopened"] == []


def test_a_topic_both_live_and_archived_on_one_side_is_reported_once_as_a_conflict(ex) -> None:
    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    assert tick(root)["archived"] == [T]
    hand_entry(root, "olu", T, 3, "claude", "2098-11-01T11:00:00Z")  # a live copy beside done/
    r = run(root, "exchange", "tick", "--json", ok=False)
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and "settle it by hand" in r.stderr
    assert [e for e in out["errors"] if T in e] == [
        f"topic {T}: to-olu/ has both {T}/ and done/{T}/; settle it by hand"
    ]
    assert out["reopened"] == [] and out["new_topics"] == []


def test_a_conflict_settled_by_hand_into_a_live_topic_is_then_reported_reopened(ex) -> None:
    """An archived topic that shows up live again beside its ``done/`` copy is a conflict, told
    as an error only; once a person settles it into one live topic, the tick reports it reopened
    (it was archived, and now it is not), exactly as ``exchange reopen`` would have been."""
    import shutil

    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    assert tick(root)["archived"] == [T]
    hand_entry(root, "olu", T, 3, "claude", "2098-11-01T11:00:00Z")  # a live copy beside done/
    out = json.loads(run(root, "exchange", "tick", "--json", ok=False).stdout)
    assert out["reopened"] == [] and out["new_topics"] == []
    for side in ("olu", "claude"):  # settled by hand: every entry back in one live copy a side
        live(root, side).mkdir(exist_ok=True)
        for f in archived(root, side).iterdir():
            shutil.move(str(f), live(root, side) / f.name)
        archived(root, side).rmdir()
    hand_state(root, "olu", T, "open", "2098-11-01T12:00:00Z")  # claude's side open again
    out = tick(root)
    assert out["reopened"] == [T] and out["new_topics"] == []
    assert out["errors"] == [] and out["archived"] == []
    assert tick(root)["reopened"] == []  # told once


def test_a_half_archived_topic_that_cannot_move_is_reported_reopened_once_it_is_live(ex) -> None:
    """A topic brought back out of ``done/`` on one side while a symlink elsewhere freezes every
    move stays half-archived; it is not yet live, so it is not taken as known, and once it is
    live on both sides the tick reports it reopened."""
    import shutil

    root = ex.root
    both_done_tree(root, "2098-11-01T10:00:00Z", "2098-11-01T10:05:00Z")
    assert tick(root)["archived"] == [T]
    shutil.move(str(archived(root, "olu")), live(root, "olu"))  # one side back by hand
    hand_state(root, "olu", T, "open", "2098-11-01T12:00:00Z")  # claude's: not done any more
    link = root / "to-olu" / "2026-11-02-elsewhere"
    link.symlink_to(root / "to-claude")  # freezes every move this run
    out = json.loads(run(root, "exchange", "tick", "--json", ok=False).stdout)
    assert out["reopened"] == [] and out["new_topics"] == [] and out["recovered"] == []
    link.unlink()
    out = tick(root)
    assert out["recovered"] == [{"topic": T, "to": "live"}]
    assert out["reopened"] == [T] and out["new_topics"] == []

"""The tick beside hand writers writing in place (``cat > 0002-olu.md``, ``cat > STATE.md``) and
their editors' leftovers: a file still being written is left for a later tick (not read, reported,
committed or archived), and what an editor leaves in a topic is never committed nor a failure.

Each writer is a real process holding the file open part-way (``_writer``), as a slow ``cat``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from exhelp import HAND_HEAD, finish_writer, now_stamp, open_writer, tick

from mailslot.core.git import run_git
from mailslot.exchange.doctor import doctor
from mailslot.exchange.entries import send
from mailslot.exchange.state import set_state


def _tracked(root: Path) -> set[str]:
    return set(run_git(root, "ls-files").split())


def _checks(root) -> dict[str, str]:
    return {c.name: c.status for c in doctor(root).checks}


@pytest.fixture(params=["lease", "no-lease"])
def how(request, monkeypatch) -> str:
    """Told by the kernel (the tick may take a read lease on the file), or not (another user's
    file, no ``CAP_LEASE``): then only a file left alone for the settle window is whole."""
    from mailslot.core import wait

    if request.param == "no-lease":
        monkeypatch.setattr(wait, "being_written", lambda path: None)
        monkeypatch.setattr(wait, "QUIET_SETTLE", 0.3)
    return str(request.param)


def _settle(how: str) -> None:
    if how == "no-lease":
        import time

        time.sleep(0.5)


def test_an_entry_being_written_in_place_waits_for_the_tick_after_it_is_whole(ex, how) -> None:
    topic = send(ex, "olu", "slow", "fyi", "first").topic
    _settle(how)
    tick(ex.root)
    rel = f"to-claude/{topic}/0002-olu.md"
    p = open_writer(ex.root / rel, HAND_HEAD.format(at=now_stamp()) + "slow ")
    try:
        r = tick(ex.root)
        assert rel not in r["new_entries"] and not r["rewritten"]
        assert rel not in _tracked(ex.root)  # not committed half-written
    finally:
        finish_writer(p, "end\n", timeout=10)
    _settle(how)
    r = tick(ex.root)
    assert r["new_entries"] == [rel] and not r["rewritten"]
    assert rel in _tracked(ex.root)
    shown = run_git(ex.root, "show", f"HEAD:{rel}")
    assert shown.endswith("slow end\n")
    r = tick(ex.root)
    assert not r["new_entries"] and not r["rewritten"]
    assert "git:entries" not in _checks(ex)  # no "entries are never edited" false alarm


def test_a_state_being_rewritten_in_place_reads_as_it_was_until_whole(ex, how) -> None:
    topic = send(ex, "claude", "slow-state", "fyi", "first").topic
    set_state(ex, "olu", topic, "in-progress")
    _settle(how)
    tick(ex.root)
    rel = f"to-claude/{topic}/STATE.md"
    p = open_writer(ex.root / rel, "status: d")
    try:
        r = tick(ex.root)
        assert not r["state_changes"] and not r["archived"]
        assert "status: in-progress" in run_git(ex.root, "show", f"HEAD:{rel}")
    finally:
        finish_writer(p, f"one\nupdated_at: {now_stamp()}\nupdated_by: olu\n", timeout=10)
    _settle(how)
    r = tick(ex.root)
    assert r["state_changes"] == [
        {"topic": topic, "side": "olu", "from": "in-progress", "to": "done"}
    ]
    assert not r["archived"]  # claude is not done
    assert "status: done" in run_git(ex.root, "show", f"HEAD:{rel}")


def test_a_topic_with_an_entry_being_written_is_not_archived_until_it_is_whole(ex) -> None:
    topic = send(ex, "claude", "both-done", "fyi", "first").topic
    set_state(ex, "olu", topic, "done")
    set_state(ex, "claude", topic, "done")
    p = open_writer(
        ex.inbox("claude") / topic / "0002-olu.md", HAND_HEAD.format(at=now_stamp()) + "p.s. "
    )
    try:
        r = tick(ex.root)
        assert not r["archived"]
        assert (ex.inbox("claude") / topic).is_dir()
        reasons = [w["reason"] for w in r["waiting"] if w["topic"] == topic]
        assert any("0002-olu.md is still being written" in w for w in reasons), r["waiting"]
    finally:
        finish_writer(p, "done\n", timeout=10)
    r = tick(ex.root)
    assert r["new_entries"] == [f"to-claude/{topic}/0002-olu.md"]


def test_editor_leftovers_in_a_topic_are_never_committed_nor_a_failure(ex) -> None:
    topic = send(ex, "olu", "edited", "fyi", "first").topic
    tick(ex.root)
    d = ex.inbox("claude") / topic
    (d / ".0003-olu.md.swp").write_bytes(b"vim swap")
    (d / ".#0003-olu.md").symlink_to("olu@host.4242:1700000000")  # emacs's lock, dangling
    (d / "#0003-olu.md#").write_text("emacs autosave")
    (d / "0002-olu.md~").write_text("a backup")
    (d / ".draft.md").write_text("---\nfrom: olu\n")  # a draft half-written
    r = tick(ex.root)
    assert not r["strays"] and not r["errors"] and not r["new_entries"]
    tracked = _tracked(ex.root)
    assert not [t for t in tracked if t.startswith("to-") and not t.endswith((".md",))]
    assert not [t for t in tracked if "#" in t or "/." in t or t.endswith("~")]
    checks = _checks(ex)
    assert checks["tree:symlinks"] == "ok" and checks["git"] == "ok"
    assert not [c for c in doctor(ex).checks if c.status == "fail"], doctor(ex).to_json()
    from mailslot.exchange.watch import watch

    kinds = [i.kind for i in watch(ex, "claude", timeout=5).items]  # nor a stray to a reader
    assert "stray" not in kinds and kinds

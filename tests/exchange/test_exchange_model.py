"""The data model: layout, entries keyed by (number, from), STATE, send, topic resolution."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from exhelp import both_done_cli, run, send_cli, tick, write_by_hand

from mailslot.core import clock
from mailslot.core.errors import Conflict, InvalidName, InvalidValue, LimitExceeded, NotFound
from mailslot.exchange import (
    list_entries,
    list_topics,
    load_exchange,
    read_state,
    resolve_topic,
    send,
    set_state,
)
from mailslot.exchange.entries import MAX_BODY_BYTES
from mailslot.exchange.layout import Exchange


def test_load_and_sides(ex) -> None:
    loaded = load_exchange(ex.root / "to-olu")  # found from a subdirectory
    assert loaded.sides == ("claude", "olu")
    assert loaded.side_of("will") == "claude"
    assert loaded.outbox("claude") == ex.root / "to-olu"
    with pytest.raises(Conflict, match="not a member"):
        loaded.side_of("mallory")
    with pytest.raises(NotFound):
        load_exchange(ex.root.parent)


def test_send_numbers_across_both_sides(ex) -> None:
    a = send(ex, "claude", "gate-bug", "required", "first")
    b = send(ex, "olu", "gate-bug", "fyi", "second")
    c = send(ex, "will", a.topic, "fyi", "third")
    assert (a.number, b.number, c.number) == (1, 2, 3)
    assert a.relpath == f"to-olu/{a.topic}/0001-claude.md"
    assert b.relpath == f"to-claude/{a.topic}/0002-olu.md"
    assert a.new_topic and not b.new_topic
    entries = list_entries(ex, a.topic)
    assert [(e.number, e.sender, e.side) for e in entries] == [
        (1, "claude", "claude"),
        (2, "olu", "olu"),
        (3, "will", "claude"),
    ]
    assert entries[0].action == "required" and entries[0].body == "first\n"


def test_send_refuses_bad_input_and_writes_nothing(ex) -> None:
    with pytest.raises(InvalidName):
        send(ex, "claude", "../etc", "fyi", "x")
    with pytest.raises(InvalidName):
        send(ex, "claude", "Gate", "fyi", "x")
    with pytest.raises(LimitExceeded):
        send(ex, "claude", "big", "fyi", "x" * (MAX_BODY_BYTES + 1))
    with pytest.raises(Conflict):
        send(ex, "mallory", "t", "fyi", "x")
    with pytest.raises(InvalidValue, match="NUL"):
        send(ex, "claude", "t", "fyi", "nul\x00byte\n")
    assert list_topics(ex) == []


def test_same_number_from_both_sides_keyed_by_number_and_from(ex) -> None:
    r = send(ex, "claude", "race", "fyi", "mine")
    write_by_hand(
        ex.root / "to-claude" / r.topic / "0001-olu.md",
        "---\nfrom: olu\nat: 2026-11-29T18:14:00Z\naction: fyi\n---\ntheirs\n",
    )
    keys = [e.key for e in list_entries(ex, r.topic)]
    assert keys == [(1, "claude"), (1, "olu")]
    assert send(ex, "olu", r.topic, "fyi", "next").number == 2


def test_hand_written_entry_like_a_foreign_agent(ex) -> None:
    r = send(ex, "claude", "hand", "required", "q")
    p = write_by_hand(
        ex.root / "to-claude" / r.topic / "0002-olu.md",
        '---\nfrom: "olu"\nat: "2026-11-29T18:14:00+00:00"\naction: \'fyi\'\n---\nbody\n',
        crlf=True,
    )
    write_by_hand(ex.root / "to-claude" / r.topic / ".0003-olu.md.tmp", "partial")
    entries = list_entries(ex, r.topic)
    assert [e.name for e in entries] == ["0001-claude.md", "0002-olu.md"]
    e = entries[1]
    assert e.error is None and e.action == "fyi" and e.path == p
    assert e.at == datetime(2026, 11, 29, 18, 14, tzinfo=UTC)


def test_unparseable_entry_is_listed_with_its_reason(ex) -> None:
    r = send(ex, "claude", "bad", "fyi", "q")
    write_by_hand(ex.root / "to-claude" / r.topic / "0002-olu.md", "no frontmatter at all\n")
    e = list_entries(ex, r.topic)[1]
    assert e.error and "fence" in e.error and e.at is None


def test_topic_resolution(ex) -> None:
    clock.set_clock(lambda: datetime(2026, 11, 29, 12, tzinfo=UTC))
    assert resolve_topic(ex, "gate") == ("2026-11-29-gate", False)
    send(ex, "claude", "gate", "fyi", "x")
    clock.set_clock(lambda: datetime(2026, 11, 30, 12, tzinfo=UTC))
    assert resolve_topic(ex, "gate") == ("2026-11-29-gate", True)
    assert resolve_topic(ex, "2026-11-29-gate") == ("2026-11-29-gate", True)
    assert resolve_topic(ex, "2026-12-01-new") == ("2026-12-01-new", False)
    assert resolve_topic(ex, "other") == ("2026-11-30-other", False)


def test_state_missing_is_open_and_fenced_is_read(ex) -> None:
    r = send(ex, "claude", "st", "fyi", "x")
    assert read_state(ex, r.topic, "olu").status == "open"
    assert not read_state(ex, r.topic, "olu").present
    write_by_hand(
        ex.root / "to-claude" / r.topic / "STATE.md",
        "---\nstatus: done\ntags: [a]\nupdated_at: 2026-11-29T18:20:00Z\nupdated_by: olu\n---\n",
        crlf=True,
    )
    st = read_state(ex, r.topic, "olu")
    assert st.status == "done" and st.tags == ("a",) and st.error is None


def test_state_done_refused_over_own_unanswered_required(ex) -> None:
    r = send(ex, "claude", "req", "required", "please answer")
    with pytest.raises(Conflict, match="action: required"):
        set_state(ex, "claude", r.topic, "done")
    assert not (ex.root / "to-olu" / r.topic / "STATE.md").exists()
    forced = set_state(ex, "claude", r.topic, "done", force=True)
    assert forced.warning and "FORCED" in forced.warning
    assert "forced: true" in forced.path.read_text()
    send(ex, "olu", r.topic, "fyi", "answer")
    ok = set_state(ex, "will", r.topic, "done", tags=["bug"])
    assert ok.warning is None and ok.state.tags == ("bug",)
    assert ok.relpath == f"to-olu/{r.topic}/STATE.md"
    # olu's side is untouched: each side writes only its own STATE.md
    assert not (ex.root / "to-claude" / r.topic / "STATE.md").exists()


def test_send_takes_the_next_number_above_either_side(ex) -> None:
    r = send(ex, "claude", "gap", "fyi", "one")
    write_by_hand(
        ex.root / "to-claude" / r.topic / "0005-olu.md",
        "---\nfrom: olu\nat: 2026-11-29T18:14:00Z\naction: fyi\n---\nfive\n",
    )
    assert send(ex, "claude", r.topic, "fyi", "next").number == 6
    assert send(ex, "olu", r.topic, "fyi", "next").number == 7


def test_send_refuses_a_half_archived_topic(ex) -> None:
    import os

    r = send(ex, "claude", "half", "fyi", "one")
    send(ex, "olu", r.topic, "fyi", "two")
    os.rename(ex.root / "to-olu" / r.topic, ex.root / "to-olu" / "done" / r.topic)
    with pytest.raises(Conflict, match="half-archived"):
        send(ex, "claude", r.topic, "fyi", "three")
    assert not (ex.root / "to-olu" / r.topic).exists()


# -- topic resolution by slug, durable topic directories, entry names, reopen ----------------


def test_send_by_slug_refuses_todays_archived_topic(ex: Exchange) -> None:
    root = ex.root
    topic = both_done_cli(root)
    assert tick(root)["archived"] == [topic]
    r = run(
        root, "exchange", "send", "--topic", "q", "--action", "fyi", "x", agent="claude", ok=False
    )
    assert r.exit_code == 1 and "is archived" in r.output and "reopen" in r.output
    assert not (root / "to-olu" / topic).exists()
    tick(root)  # and later ticks are not wedged


def test_a_new_topic_directory_fsyncs_its_parent(ex: Exchange, monkeypatch) -> None:
    from mailslot.exchange import layout

    synced: list[Path] = []
    real = layout.fsync_dir
    monkeypatch.setattr(layout, "fsync_dir", lambda p: (synced.append(Path(p)), real(p))[1])
    r = send_cli(ex.root, "claude", "durable", "hello")
    assert ex.root / "to-olu" in synced and (ex.root / r).is_file()


def test_entry_names_take_ascii_digits_only() -> None:
    from mailslot.exchange.entries import ENTRY_RE

    assert ENTRY_RE.match("0001-olu.md")
    assert not ENTRY_RE.match("\uff10\uff10\uff10\uff11-olu.md")  # fullwidth digits


def test_reopen_refuses_a_live_topic_that_is_not_done(tmp_path: Path) -> None:
    from mailslot.core.errors import Conflict
    from mailslot.exchange.create import create_exchange
    from mailslot.exchange.entries import send
    from mailslot.exchange.layout import load_exchange
    from mailslot.exchange.reopen import reopen
    from mailslot.exchange.state import set_state

    root = tmp_path / "ex"
    create_exchange(root, ["claude", "olu"], git=False)
    ex = load_exchange(root)
    topic = send(ex, "claude", "live", "fyi", "hello\n").topic
    with pytest.raises(Conflict, match="nothing to reopen"):
        reopen(ex, "claude", topic, "why not")
    set_state(ex, "claude", topic, "done")
    assert reopen(ex, "claude", topic, "one more thing").state.state.status == "open"

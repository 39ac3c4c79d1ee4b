"""sweep: each side sees its own debts and not the other's, and agrees with the tick's INDEX."""

from __future__ import annotations

import json

from exhelp import RENAMED_IN, hand_entry, hand_state, run

from mailslot.exchange import send, set_state
from mailslot.exchange.sweep import sweep
from mailslot.exchange.tick import tick


def _debts(ex, agent: str) -> list[tuple[str, str]]:
    return [(d["topic"], d["reason"]) for d in sweep(ex, agent).to_json()["debts"]]


def test_each_side_sees_only_its_own_debts(ex) -> None:
    q = send(ex, "claude", "question", "required", "please answer").topic
    assert _debts(ex, "olu") == [(q, "reply")]
    assert _debts(ex, "claude") == []
    c = send(ex, "olu", "closing", "fyi", "done from my side").topic
    set_state(ex, "olu", c, "done")
    assert _debts(ex, "claude") == [(c, "close")]
    assert (c, "close") not in _debts(ex, "olu")
    assert _debts(ex, "will") == _debts(ex, "claude")  # a human shares its side's debts


def test_reply_discharges_and_state_alone_does_not(ex) -> None:
    q = send(ex, "claude", "question", "required", "please answer").topic
    set_state(ex, "olu", q, "in-progress")
    assert _debts(ex, "olu") == [(q, "reply")]  # acknowledging is not answering
    send(ex, "olu", q, "fyi", "the answer")
    assert _debts(ex, "olu") == []


def test_hold_is_a_re_read_debt_for_the_owing_side(ex) -> None:
    t = send(ex, "claude", "held", "fyi", "first").topic
    set_state(ex, "olu", t, "done")
    send(ex, "claude", t, "fyi", "written after olu said done")
    set_state(ex, "claude", t, "done")
    r = tick(ex)
    assert t in r.holding
    assert (t, "re-read") in _debts(ex, "olu")
    assert (t, "re-read") not in _debts(ex, "claude")
    debt = next(d for d in sweep(ex, "olu").debts if d.debt.reason == "re-read")
    assert debt.debt.entry == "0002-claude.md"


def test_sweep_agrees_with_the_tick(ex) -> None:
    q = send(ex, "claude", "q1", "required", "?").topic
    send(ex, "olu", "q2", "required", "?")
    c = send(ex, "olu", "c", "fyi", "x").topic
    set_state(ex, "olu", c, "done")
    send(ex, "olu", q, "fyi", "partial answer")
    hand_entry(
        ex.root,
        "claude",
        "2026-11-29-hand",
        1,
        "olu",
        "2026-11-29T10:00:00Z",
        "required",
        **RENAMED_IN,
    )
    r = tick(ex)
    for agent, side in (("claude", "claude"), ("olu", "olu")):
        from_tick = sorted(
            (d["topic"], d["reason"], d["entry"]) for d in r.debts if d["side"] == side
        )
        mine = sorted((d.debt.topic, d.debt.reason, d.debt.entry) for d in sweep(ex, agent).debts)
        assert mine == from_tick, agent
    index = (ex.root / "INDEX.md").read_text()
    for d in sweep(ex, "claude").debts:
        assert f"`{d.debt.topic}`" in index


def test_json_shape_and_text(ex) -> None:
    q = send(ex, "claude", "question", "required", "please answer").topic
    d = json.loads(run(ex.root, "exchange", "sweep", "--json", agent="olu").stdout)
    assert set(d) == {"debts"}
    (debt,) = d["debts"]
    assert debt["topic"] == q and debt["reason"] == "reply" and debt["entry"] == "0001-claude.md"
    assert debt["since"] is not None
    text = run(ex.root, "exchange", "sweep", agent="olu").stdout
    assert q in text and "reply to 0001-claude.md" in text
    assert "owes nothing" in run(ex.root, "exchange", "sweep", agent="claude").stdout


def test_hand_written_state_done_is_a_close_debt(ex) -> None:
    t = send(ex, "claude", "t", "fyi", "x").topic
    hand_state(ex.root, "claude", t, "done", "2026-11-29T10:00:00Z", "olu")
    assert _debts(ex, "claude") == [(t, "close")]

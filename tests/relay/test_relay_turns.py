"""A relay turn: one question, one reply, between the two parties the mailbox names.

``init`` lays the mailbox out; a C turn from the worker and a Q turn from the manager each take
exactly one reply, one turn is open at a time, and only the worker and the manager may ask (an
error names both). The stamps on each turn make the latency table ``stats`` prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from relay_helpers import lines, manager_answers

from mailslot import relay
from mailslot.core.errors import Conflict, LimitExceeded, NotFound
from mailslot.relay.lines import parse_inbox
from shared_helpers import in_thread


def test_init_lays_out_the_mailbox(mb: Path) -> None:
    assert (mb / "to-w1.md").read_text() == "" and (mb / "to-manager.md").read_text() == ""
    assert (mb / "state").is_dir()
    assert json.loads((mb / ".mailslot" / "relay.json").read_text())["worker"] == "w1"
    relay.init(mb, "w1", "manager")  # the same again is fine
    with pytest.raises(Conflict):
        relay.init(mb, "w2", "manager")
    with pytest.raises(NotFound):
        relay.ask(mb.parent, "w1", "hi")


def test_a_turn_round_trip(mb: Path) -> None:
    t, box = manager_answers(mb, "Friday, if tests stay green.")
    d = relay.ask(mb, "w1", "When do we ship?", timeout=30, to="manager")
    t.join(30)
    assert box["result"] == "C01"
    assert (d.id, d.reply_id, d.say, d.recovered) == (
        "C01",
        "R01",
        "Friday, if tests stay green.",
        False,
    )
    assert d.t0 is not None and d.t1 is not None and d.t0 <= d.t1 <= d.t2
    [c, ack] = lines(mb / "to-manager.md")
    assert c.endswith(f"(w1) id=C01 T0={d.t0} say=When do we ship?")
    assert ack.endswith(f"(w1) ack=R01 T0={d.t0} T1={d.t1} T2={d.t2}")  # the delivery record
    [r] = lines(mb / "to-w1.md")
    assert r.endswith(f"(manager) id=R01 T1={d.t1} say=Friday, if tests stay green.")


def test_one_request_one_reply(mb: Path) -> None:
    with pytest.raises(Conflict, match="no turn C01"):
        relay.reply(mb, "manager", "C01", "unsolicited")
    relay.ask(mb, "w1", "first", wait=False)
    with pytest.raises(Conflict, match="still open"):
        relay.ask(mb, "w1", "second", wait=False)  # one turn open at a time
    relay.reply(mb, "manager", "C01", "answer")
    with pytest.raises(Conflict, match="already answered"):
        relay.reply(mb, "manager", "C01", "a second answer")
    with pytest.raises(Conflict, match="replies to C turns"):
        relay.reply(mb, "manager", "R01", "wrong id")
    with pytest.raises(Conflict, match="neither the worker"):
        relay.ask(mb, "mallory", "hi")
    assert relay.ask(mb, "w1", "next", wait=False).id == "C02"


def test_manager_led_interview_uses_q_and_a(mb: Path) -> None:
    def worker() -> str:
        q = relay.serve(mb, "w1", timeout=30)
        relay.reply(mb, "w1", q.id, "She prefers mornings.")
        return q.id

    t, box = in_thread(worker)
    d = relay.ask(mb, "manager", "When does she like meetings?", timeout=30, kind="Q")
    t.join(30)
    assert box["result"] == "Q01" and (d.id, d.reply_id, d.say) == (
        "Q01",
        "A01",
        "She prefers mornings.",
    )
    assert [t.id for t in parse_inbox((mb / "to-w1.md").read_bytes())[0]] == ["Q01"]
    assert "ack=A01" in (mb / "state" / "manager-notes.md").read_text()  # not the worker inbox
    with pytest.raises(Conflict, match="asks C turns"):
        relay.ask(mb, "w1", "x", kind="Q")
    with pytest.raises(LimitExceeded):
        relay.ask(mb, "manager", " ".join(["w"] * 26), kind="Q")


def test_stats_table_from_the_stamps(mb: Path) -> None:
    for i in range(3):
        t, _ = manager_answers(mb, f"answer {i}")
        relay.ask(mb, "w1", f"question {i}", timeout=30)
        t.join(30)
    s = relay.stats(mb)
    stages = {x["stage"]: x for x in s.stages}
    assert stages["transport"]["n"] == 3 and stages["think"]["n"] == 3
    assert stages["held"]["n"] == 3 and stages["reply_transport"]["n"] == 3
    assert all(t["T0"] <= t["seen"] <= t["T1"] <= t["T2"] for t in s.turns)
    assert s.table().startswith("| Stage | n | median | min | max |")


def test_an_open_question_must_be_answered_before_a_new_turn(mb: Path) -> None:
    relay.ask(mb, "manager", "Morning or evening?", kind="Q", wait=False)
    with pytest.raises(Conflict, match="answer it first"):
        relay.ask(mb, "w1", "unrelated", wait=False)
    with pytest.raises(Conflict, match="still open"):
        relay.ask(mb, "manager", "and another?", kind="Q", wait=False)
    relay.reply(mb, "w1", "Q01", "Morning.")
    assert relay.ask(mb, "w1", "now mine", wait=False).id == "C01"
    before = (mb / "to-manager.md").read_bytes()
    with pytest.raises(LimitExceeded):  # the worker's cap is 1000 characters, not 25 words
        relay.reply(mb, "w1", "Q01", "x" * 1001)
    assert (mb / "to-manager.md").read_bytes() == before


def test_unknown_sender_or_recipient_is_refused_naming_the_parties(tmp_path: Path) -> None:
    mb = tmp_path / "mb"
    relay.init(mb, "w1", "manager")
    before = {p.name: p.read_bytes() for p in mb.iterdir() if p.is_file()}
    with pytest.raises(Conflict, match=r"w1 can only ask manager, not boss"):
        relay.ask(mb, "w1", "hello", to="boss", wait=False)
    with pytest.raises(Conflict, match=r"neither the worker \(w1\) nor the manager \(manager\)"):
        relay.ask(mb, "mallory", "hello", to="manager", wait=False)
    after = {p.name: p.read_bytes() for p in mb.iterdir() if p.is_file()}
    assert after == before  # nothing written, no new inbox file
    assert sorted(p.name for p in mb.glob("to-*.md")) == ["to-manager.md", "to-w1.md"]

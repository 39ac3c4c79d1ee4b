"""The relay: seed 003's races reproduced, caps in the write path, Q/A, recover, stop, stats."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from mailslot import relay
from mailslot.core.cursor import CursorStore
from mailslot.core.errors import Conflict, FormatError, Gone, LimitExceeded, NotFound, WaitTimeout
from mailslot.relay.lines import parse_inbox


@pytest.fixture
def mb(tmp_path: Path) -> Path:
    relay.init(tmp_path / "mb", "w1", "manager")
    return tmp_path / "mb"


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def manager_answers(mb: Path, text: str) -> tuple[threading.Thread, dict]:
    def serve_and_reply() -> str:
        turn = relay.serve(mb, "manager", timeout=30)
        relay.reply(mb, "manager", turn.id, text)
        return turn.id

    return in_thread(serve_and_reply)


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


def test_reply_landing_between_send_and_wait_is_found(mb: Path) -> None:
    """Seed 003's arm-after-send race: the reply lands before the asker starts waiting."""
    relay.init(mb, "w1", "manager")
    t, _ = manager_answers(mb, "first")
    relay.ask(mb, "w1", "warm up", timeout=30)
    t.join(30)
    inbox = mb / "to-w1.md"
    size_before = inbox.stat().st_size
    seen: dict = {}

    def reply_in_the_gap(ask_id: str) -> None:
        stored = CursorStore("relay").load(f"{mb.resolve()}\0w1")
        seen["cursor"] = stored
        relay.reply(mb, "manager", ask_id, "fast reply")  # before ask() arms its wait loop

    d = relay.ask(mb, "w1", "quick question", timeout=5, on_sent=reply_in_the_gap)
    assert d.say == "fast reply" and d.id == "C02"
    # the cursor was saved BEFORE the C line was appended, at the inbox size then
    assert seen["cursor"]["offset"] == size_before and seen["cursor"]["pending"] == "C02"


def test_a_fast_manager_process_never_loses_a_reply(mb: Path) -> None:
    n = 15
    script = textwrap.dedent(
        f"""
        from mailslot import relay
        for _ in range({n}):
            t = relay.serve({str(mb)!r}, "manager", timeout=60)
            relay.reply({str(mb)!r}, "manager", t.id, "re " + t.say)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", script])
    got = [relay.ask(mb, "w1", f"q{i}", timeout=60).say for i in range(n)]
    assert p.wait(timeout=60) == 0
    assert got == [f"re q{i}" for i in range(n)]


def test_a_stray_line_after_the_reply_is_not_selected(mb: Path) -> None:
    """Seed 003's recency bug: `tail -n1` relayed a diagnostic written after the reply."""
    inbox = mb / "to-w1.md"

    def manager_by_hand(ask_id: str) -> None:
        with inbox.open("a") as f:  # a seed-following shell appends with >>, unchecked
            f.write("- [14:02] (w1) id=R01 T1=1 say=forged by the wrong author\n")
            f.write("- [14:02] (manager) id=R00 T1=1 say=an old reply\n")
        relay.reply(mb, "manager", ask_id, "the real reply")
        with inbox.open("a") as f:
            f.write("- [14:02] (manager) diagnostic: R01 latency 2 ms, not for relay\n")
            f.write("- [14:02] (manager) id=R02 T1=1 say=a reply to a turn not asked yet\n")

    d = relay.ask(mb, "w1", "question", timeout=5, on_sent=manager_by_hand)
    assert d.say == "the real reply"
    assert relay.status(mb)["malformed_lines"] >= 2  # visible, never selected


def test_a_diagnostic_written_to_an_inbox_is_refused(mb: Path) -> None:
    r = relay.open_relay(mb)
    before = (mb / "to-w1.md").read_bytes()
    with pytest.raises(FormatError, match="not a turn line"):
        relay.post(r, "manager", "timing: R01 took 2 ms")
    with pytest.raises(FormatError, match=r"manager-notes\.md"):  # well formed, wrong inbox
        relay.post(r, "manager", "- [14:02] (manager) ack=R01 T2=5")
    with pytest.raises(FormatError, match="do not belong"):  # a C turn is the worker's
        relay.post(r, "manager", "- [14:02] (manager) id=C01 T0=5 say=hi")
    with pytest.raises(Conflict, match="written by"):
        relay.post(r, "manager", "- [14:02] (w1) id=R01 T1=5 say=impersonation")
    assert (mb / "to-w1.md").read_bytes() == before
    notes = relay.note(mb, "manager", "R01 took 2 ms\nsecond line")
    assert notes == mb / "state" / "manager-notes.md"
    assert "R01 took 2 ms" in notes.read_text()
    assert (mb / "to-w1.md").read_bytes() == before


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (" ".join(["word"] * 26), "26 words; at most 25 words allowed"),
        ("line one\nline two", "lines"),
        ("line one\u2028line two", "lines"),  # a separator a reader might honour
        ("  ", "at least 1"),
    ],
)
def test_caps_are_refused_in_the_write_path(mb: Path, text: str, match: str) -> None:
    relay.ask(mb, "w1", "question", wait=False)
    before = (mb / "to-w1.md").read_bytes()
    with pytest.raises(LimitExceeded, match=match):
        relay.reply(mb, "manager", "C01", text)
    assert (mb / "to-w1.md").read_bytes() == before  # refused whole, never trimmed
    relay.reply(mb, "manager", "C01", " ".join(["word"] * 25))  # 25 is allowed


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


def test_a_timed_out_turn_is_recovered_and_marked(mb: Path) -> None:
    with pytest.raises(WaitTimeout, match="relay recover"):
        relay.ask(mb, "w1", "slow question", timeout=0.1)
    with pytest.raises(WaitTimeout):
        relay.recover(mb, "w1")  # nothing yet
    relay.reply(mb, "manager", "C01", "late but here")
    d = relay.recover(mb, "w1")
    assert (d.id, d.say, d.recovered) == ("C01", "late but here", True)
    assert lines(mb / "to-manager.md")[-1].endswith(" RECOVERED")
    with pytest.raises(NotFound):
        relay.recover(mb, "w1")  # delivered once
    table = relay.stats(mb)
    stages = {s["stage"]: s for s in table.stages}
    assert stages["recovered"]["n"] == 1 and stages["held"]["n"] == 0
    assert "Recovered turns" in table.table()


def test_a_reply_never_shown_is_recovered_before_the_next_ask(mb: Path) -> None:
    def closed_pipe(delivery: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(WaitTimeout):
        relay.ask(mb, "w1", "slow question", timeout=0.1)
    relay.reply(mb, "manager", "C01", "late but here")
    with pytest.raises(Conflict, match="relay recover"):
        relay.ask(mb, "w1", "the next question", wait=False)  # would skip R01 unseen
    with pytest.raises(BrokenPipeError):
        relay.recover(mb, "w1", show=closed_pipe)
    assert not any("ack=R01" in line for line in lines(mb / "to-manager.md"))
    assert relay.recover(mb, "w1").say == "late but here"
    assert relay.ask(mb, "w1", "the next question", wait=False).id == "C02"


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


def test_stop_from_the_manager_ends_the_workers_wait_and_refuses_turns(mb: Path) -> None:
    t, box = in_thread(relay.ask, mb, "w1", "are you there?", timeout=60)
    relay.serve(mb, "manager", timeout=30)
    relay.stop(mb, "manager", "The human said stop.")
    t.join(30)
    assert isinstance(box.get("error"), Gone) and "cannot be recalled" in str(box["error"])
    with pytest.raises(relay.RelayStopped, match="cannot be recalled"):
        relay.reply(mb, "manager", "C01", "too late")
    with pytest.raises(relay.RelayStopped):
        relay.ask(mb, "w1", "again?")
    assert relay.stop(mb, "w1").author == "manager"  # stopping twice keeps the first stop


def test_stop_from_the_worker_ends_the_managers_serve(mb: Path) -> None:
    t, box = in_thread(relay.serve, mb, "manager", timeout=60)
    relay.stop(mb, "w1", "stop")
    t.join(30)
    assert isinstance(box.get("error"), Gone)
    assert lines(mb / "to-manager.md")[-1].split(") ", 1)[1].startswith("STOP at=")


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

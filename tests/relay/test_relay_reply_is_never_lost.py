"""A reply is delivered once and is the right line, however the two sides race.

A reply that lands before the asker starts waiting is found (the cursor is saved before the
question is appended); a manager process answering as fast as it can loses none; a stray line
written after the reply is never taken for it; a turn that timed out, or whose reply was never
shown, is recovered before the next question.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from relay_helpers import lines, manager_answers

from mailslot import relay
from mailslot.core.cursor import CursorStore
from mailslot.core.errors import Conflict, NotFound, WaitTimeout


def test_reply_landing_between_send_and_wait_is_found(mb: Path) -> None:
    """The reply lands before the asker starts waiting (a wait armed after the send misses it)."""
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
    """Taking the last line (`tail -n1`) would relay a diagnostic written after the reply."""
    inbox = mb / "to-w1.md"

    def manager_by_hand(ask_id: str) -> None:
        with inbox.open("a") as f:  # a hand-run shell appends with >>, unchecked
            f.write("- [14:02] (w1) id=R01 T1=1 say=forged by the wrong author\n")
            f.write("- [14:02] (manager) id=R00 T1=1 say=an old reply\n")
        relay.reply(mb, "manager", ask_id, "the real reply")
        with inbox.open("a") as f:
            f.write("- [14:02] (manager) diagnostic: R01 latency 2 ms, not for relay\n")
            f.write("- [14:02] (manager) id=R02 T1=1 say=a reply to a turn not asked yet\n")

    d = relay.ask(mb, "w1", "question", timeout=5, on_sent=manager_by_hand)
    assert d.say == "the real reply"
    assert relay.status(mb)["malformed_lines"] >= 2  # visible, never selected


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


@pytest.mark.parametrize("offset", ['"abc"', "-3", "[1]", None])
def test_a_damaged_pending_cursor_is_refused_naming_its_file_or_read_from_the_start(
    mb: Path, offset: str | None
) -> None:
    from mailslot.core.errors import FormatError

    with pytest.raises(WaitTimeout):
        relay.ask(mb, "w1", "slow question", timeout=0.1)
    relay.reply(mb, "manager", "C01", "late but here")
    store = CursorStore("relay")
    path = store.path_for(f"{mb.resolve()}\0w1")
    field = "" if offset is None else f', "offset": {offset}'
    path.write_text(f'{{"pending": "C01"{field}}}\n')
    if offset is None:  # no offset kept: the inbox is read from its start, the reply found
        assert relay.recover(mb, "w1").say == "late but here"
        return
    with pytest.raises(FormatError, match="corrupt cursor") as e:
        relay.recover(mb, "w1")
    assert e.value.path == path

"""Lines agents write by hand from the templates they are given: read as the templates make them,
and anything still unreadable reported to the reader, never skipped in silence."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mailslot import relay
from mailslot.core.errors import Conflict, LimitExceeded, WaitTimeout
from mailslot.relay.lines import LINE_MAX_BYTES, UNREADABLE_KEPT, parse_line
from mailslot.relay.mailbox import INBOX_MAX_BYTES

# The voice-side worker's shell pattern, exactly as its instructions give it; a test customises
# only what the instructions say to customise (<N>, the message, the mailbox directory).
WORKER_TEMPLATE = r"""cursor=$(wc -c < "<MAILBOX_DIR>/to-w1.md")
t0=$(python3 -c 'import time; print(int(time.time()*1000))')
printf -- '- [HH:MM] (w1) C<N> id=C<N> T0=%s — Human says: <message>\n' "$t0" \
  >> "<MAILBOX_DIR>/to-manager.md"
"""
# The manager's one reply line, as its rule 1 gives it, written the way a shell writes it.
MANAGER_TEMPLATE = r"""t1=$(python3 -c 'import time; print(int(time.time()*1000))')
printf -- '- [HH:MM] (manager) id=R<N> T1=%s say=<reply>\n' "$t1" >> "<MAILBOX_DIR>/to-w1.md"
"""


def bash(template: str, mb: Path, **subs: str) -> None:
    script = template.replace("<MAILBOX_DIR>", str(mb))
    for key, value in subs.items():
        script = script.replace(f"<{key}>", value)
    subprocess.run(["bash", "-c", script], check=True, timeout=30)


@pytest.mark.parametrize(
    ("variant", "number", "turn"),
    [
        ("as given: [HH:MM] left in", "01", "C01"),
        ("an ASCII hyphen", "01", "C01"),
        ("a one-digit hour", "01", "C01"),
        ("C2 for C02", "2", "C02"),
    ],
)
def test_a_worker_turn_from_the_template_is_served(
    mb: Path, run_cli, variant: str, number: str, turn: str
) -> None:
    template = WORKER_TEMPLATE
    if variant == "an ASCII hyphen":
        template = template.replace(" — Human says", " - Human says")
    if variant == "a one-digit hour":
        template = template.replace("[HH:MM]", "[9:05]")
    bash(template, mb, N=number, message="when do we ship?")
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "manager"}
    r = run_cli("relay", "serve", "--json", "--timeout", "5", env=env)
    assert r.returncode == 0, r.stderr
    served = json.loads(r.stdout)
    assert (served["id"], served["say"], served["from"]) == (turn, "when do we ship?", "w1")
    assert "unreadable" not in served and "warning" not in r.stderr
    r = run_cli("relay", "reply", "--id", served["id"], "Friday.", env=env)
    assert r.returncode == 0, r.stderr
    # the reply carries the id the way the worker wrote it, so its grep for id=R<N> finds it
    assert f" id=R{number} " in (mb / "to-w1.md").read_text()
    assert relay.status(mb)["open_turn"] is None


def test_a_hand_written_reply_r2_answers_the_ask_c02(mb: Path) -> None:
    relay.ask(mb, "w1", "first", wait=False)
    relay.reply(mb, "manager", "C01", "one")
    relay.recover(mb, "w1")

    def manager_by_hand(ask_id: str) -> None:
        assert ask_id == "C02"
        bash(MANAGER_TEMPLATE, mb, N="2", reply="Friday, if the tests stay green.")

    d = relay.ask(mb, "w1", "when do we ship?", timeout=10, on_sent=manager_by_hand)
    assert (d.id, d.reply_id, d.say) == ("C02", "R02", "Friday, if the tests stay green.")
    with pytest.raises(Conflict, match="already answered"):
        relay.reply(mb, "manager", "C02", "a second reply to the same turn")


def test_a_reply_with_a_stray_t2_is_still_the_reply() -> None:
    t = parse_line("- [HH:MM] (manager) id=R01 T1=5 T2=6 say=Friday.")
    assert (t.kind, t.id, t.say) == ("turn", "R01", "Friday.")
    t = parse_line("- [HH:MM] (w1) id=R01 T1=5 T2=6")  # no text: the worker's delivery record
    assert (t.kind, t.id) == ("ack", "R01")


def test_c2_and_c02_are_one_turn_and_ids_do_not_collide() -> None:
    assert parse_line("- [9:05] (w1) C2 id=C02 T0=1 say=x").id == "C02"
    assert parse_line("- [9:05] (w1) id=C002 T0=1 say=x").id == "C02"
    assert parse_line("- [9:05] (w1) id=C20 T0=1 say=x").id == "C20"
    assert parse_line("- [9:05] (w1) id=C200 T0=1 say=x").id == "C200"


def test_an_interview_answer_stamped_t0_is_delivered(mb: Path, run_cli) -> None:
    relay.ask(mb, "manager", "Morning or evening?", kind="Q", wait=False)
    answer = WORKER_TEMPLATE.replace("C<N> id=C<N>", "A<N> id=A<N>")  # its C pattern, for A
    bash(answer, mb, N="01", message="Mornings, before ten.")
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "manager"}
    r = run_cli("relay", "recover", "--json", env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["id"], got["reply_id"], got["say"]) == ("Q01", "A01", "Mornings, before ten.")
    assert got["T1"] is not None  # the answer's T0 is when it was written


@pytest.mark.parametrize(
    ("record", "recovered"),
    [
        ("- [HH:MM] (w1) C01 delivered R01 T2=%s\\n", False),
        ("- [HH:MM] (w1) id=R01 T2=%s RECOVERED\\n", True),
        ("- [HH:MM] (w1) R01 spoken T2=%s (recovered)\\n", True),
        ("- [HH:MM] (w1) ack=R01 T2=%s\\n", False),
    ],
)
def test_a_delivery_record_in_the_workers_words_counts(
    mb: Path, run_cli, record: str, recovered: bool
) -> None:
    relay.ask(mb, "w1", "when do we ship?", wait=False)
    relay.reply(mb, "manager", "C01", "Friday.")
    script = (
        "t2=$(python3 -c 'import time; print(int(time.time()*1000))')\n"
        f'printf -- \'{record}\' "$t2" >> "<MAILBOX_DIR>/to-manager.md"\n'
    )
    bash(script, mb)
    r = run_cli("relay", "stats", "--json", env={"MAILSLOT_ROOT": str(mb)})
    turn = json.loads(r.stdout)["turns"][0]
    assert turn["id"] == "C01" and turn["T2"] is not None and turn["recovered"] is recovered
    assert relay.status(mb)["malformed_lines"] == 0


def test_an_unreadable_turn_is_reported_to_serve_once(mb: Path, run_cli) -> None:
    with (mb / "to-manager.md").open("a") as f:
        f.write("- [HH:MM] (w1) C01 T0=1722868950123 Human asks: when do we ship?\n")
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "manager"}
    r = run_cli("relay", "serve", "--json", "--timeout", "0.5", env=env)
    assert r.returncode == 3
    assert "to-manager.md line 1:" in r.stderr and "not read as a turn" in r.stderr
    relay.ask(mb, "w1", "when do we ship?", wait=False)
    r = run_cli("relay", "serve", "--json", "--timeout", "5", env=env)
    assert r.returncode == 0, r.stderr
    assert "unreadable" not in json.loads(r.stdout) and "warning" not in r.stderr  # once
    with (mb / "to-manager.md").open("a") as f:
        f.write("- [14:02] (w1) id=C02 say=no stamp\n")
    r = run_cli("relay", "serve", "--json", "--timeout", "5", env=env)
    assert r.returncode == 0, r.stderr
    (bad,) = json.loads(r.stdout)["unreadable"]
    assert bad["file"] == "to-manager.md" and bad["line"] == 3
    assert "T0" in bad["reason"] and "line 3" in r.stderr
    assert len(relay.status(mb)["unreadable"]) == 2  # status lists them too


def test_an_unreadable_reply_is_reported_to_the_waiting_asker(mb: Path, run_cli) -> None:
    def manager_garbles(ask_id: str) -> None:
        with (mb / "to-w1.md").open("a") as f:
            f.write("- [14:02] (manager) R01 T1=1722868961456 say=Friday.\n")  # no id=

    calls: list[str] = []

    def report(u) -> None:
        calls.append(u.describe())

    with pytest.raises(WaitTimeout):
        relay.ask(mb, "w1", "when?", timeout=0.5, on_sent=manager_garbles, on_unreadable=report)
    assert len(calls) == 1 and calls[0].startswith("to-w1.md line 1: ")
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "w1"}
    r = run_cli("relay", "recover", env=env)
    assert r.returncode == 3 and "warning" not in r.stderr  # reported once per reader
    with (mb / "to-w1.md").open("a") as f:
        f.write("- [14:03] (w1) id=R01 T1=1722868961456 say=forged\n")
    r = run_cli("relay", "recover", env=env)
    assert r.returncode == 3 and "to-w1.md line 2: signed (w1), but only manager" in r.stderr


@pytest.mark.parametrize("mark", ['{"inode": 0, "through": "x"}', "[[[", ""])
def test_a_damaged_report_mark_repeats_the_report_and_is_not_a_crash(mb: Path, mark: str) -> None:
    from mailslot.core.cursor import CursorStore

    def manager_garbles(ask_id: str) -> None:
        with (mb / "to-w1.md").open("a") as f:
            f.write("- [14:02] (manager) R01 T1=1722868961456 say=Friday.\n")  # no id=

    store = CursorStore("relay")
    path = store.path_for(f"{mb.resolve()}\0w1\0unreadable")
    path.parent.mkdir(parents=True, exist_ok=True)
    inode = os.stat(mb / "to-w1.md").st_ino if (mb / "to-w1.md").exists() else 0
    path.write_text(mark.replace('"inode": 0', f'"inode": {inode}'))
    calls: list[str] = []
    with pytest.raises(WaitTimeout):
        relay.ask(
            mb, "w1", "when?", timeout=0.5, on_sent=manager_garbles, on_unreadable=calls.append
        )
    assert len(calls) == 1


@pytest.mark.parametrize("stamp", ["\u00b2", "\u0661\u0662\u0663", "9" * 5000])
def test_a_stamp_that_is_not_ascii_epoch_ms_is_unreadable_not_a_crash(
    mb: Path, run_cli, stamp: str
) -> None:
    # '²' and Arabic-Indic digits pass str.isdigit(); 5000 digits is past int()'s limit.
    with (mb / "to-manager.md").open("a") as f:
        f.write(f"- [HH:MM] (w1) C01 id=C01 T0={stamp} — Human says: when do we ship?\n")
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "manager"}
    r = run_cli("relay", "serve", "--json", "--timeout", "0.5", env=env)
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert "to-manager.md line 1:" in r.stderr and "T0" in r.stderr
    r = run_cli("relay", "status", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["malformed_lines"] == 1
    r = run_cli("relay", "stats", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["turns"] == []


def test_a_turn_id_written_twice_is_reported_not_dropped(mb: Path, run_cli) -> None:
    # C2, C02 and C002 are one id: the later lines are turns nobody would ever answer.
    for label, text in (("C2", "first"), ("C02", "second"), ("C002", "third")):
        bash(WORKER_TEMPLATE, mb, N=label[1:], message=text)
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "manager"}
    r = run_cli("relay", "serve", "--json", "--timeout", "5", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["id"], out["say"]) == ("C02", "first")
    assert [(u["line"], u["reason"]) for u in out["unreadable"]] == [
        (2, "C02 repeats turn C02 of line 1; an id is used once"),
        (3, "C002 repeats turn C02 of line 1; an id is used once"),
    ]
    assert relay.status(mb)["malformed_lines"] == 2


def test_a_turn_in_the_wrong_inbox_is_reported_not_read(mb: Path) -> None:
    # The manager writes its inbox's kinds only (R, Q, STOP); a C line by hand opens nothing.
    with (mb / "to-w1.md").open("a") as f:
        f.write("- [HH:MM] (manager) id=C01 T0=1722868950123 say=not the manager's kind\n")
    st = relay.status(mb)
    assert st["open_turn"] is None and st["malformed_lines"] == 1
    assert "C lines do not belong in to-w1.md" in st["unreadable"][0]["reason"]
    relay.ask(mb, "w1", "when do we ship?", wait=False)
    assert relay.status(mb)["open_turn"]["id"] == "C01"


def test_thousands_of_unreadable_lines_cost_a_bounded_report(mb: Path, run_cli) -> None:
    # The latest UNREADABLE_KEPT lines are reported in detail, the rest counted in one line.
    with (mb / "to-manager.md").open("a") as f:
        f.write("junk\n" * 5000)
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "manager"}
    r = run_cli("relay", "serve", "--json", "--timeout", "0.5", env=env)
    assert r.returncode == 3
    warnings = r.stderr.splitlines()[:-1]  # the last line is the timeout
    assert len(warnings) == UNREADABLE_KEPT + 1
    assert "4900 more unreadable lines before this one are not listed" in warnings[0]
    assert warnings[1].startswith("mailslot: warning: to-manager.md line 4901:")
    st = relay.status(mb)
    assert st["malformed_lines"] == 5000 and len(st["unreadable"]) == UNREADABLE_KEPT
    with (mb / "to-manager.md").open("a") as f:
        f.write("junk\n" + "- [x] (w1) " + "a " * 100_000 + "\n")  # a line past the cap
    r = run_cli("relay", "serve", "--timeout", "0.5", env=env)
    assert r.returncode == 3 and len(r.stderr.splitlines()) == 3  # only the new lines, once
    assert f"line 5002: field 'line': a turn line is at most {LINE_MAX_BYTES} bytes" in r.stderr


def test_an_inbox_that_is_not_a_bounded_file_is_refused_not_read(mb: Path, run_cli) -> None:
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "manager"}
    inbox = mb / "to-manager.md"
    inbox.unlink()
    os.mkfifo(inbox)  # nobody writes it: an unbounded open would block every reader
    r = run_cli("relay", "serve", "--timeout", "0.5", env=env, timeout=30)
    assert r.returncode == 1 and "not a regular file" in r.stderr
    inbox.unlink()
    inbox.write_bytes(b"x\n" * (INBOX_MAX_BYTES // 2 + 1))
    r = run_cli("relay", "status", env=env)
    assert r.returncode == 1 and f"at most {INBOX_MAX_BYTES} bytes" in r.stderr
    with pytest.raises(LimitExceeded):
        relay.ask(mb, "w1", "when do we ship?", wait=False)
    inbox.write_bytes(b"\n" * (INBOX_MAX_BYTES - 10))  # readable, but no room for a turn
    with pytest.raises(LimitExceeded, match=r"to-manager\.md"):
        relay.ask(mb, "w1", "when do we ship?", wait=False)
    assert inbox.stat().st_size == INBOX_MAX_BYTES - 10  # refused before the write

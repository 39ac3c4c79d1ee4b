"""``relay post`` (a hand-made line) keeps every relay rule that ask/reply/answer/stop keep.

One request, one reply; no reply to a turn never asked; one turn open at a time; turns number
in order; nothing after a stop. Checked against both inboxes under relay.lock, like the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import relay
from mailslot.cli import cli
from mailslot.core.errors import Conflict, FormatError

T = "- [14:02]"


def _unchanged(mb: Path) -> tuple[bytes, bytes]:
    return (mb / "to-w1.md").read_bytes(), (mb / "to-manager.md").read_bytes()


def test_post_cannot_answer_twice_or_answer_what_was_never_asked(mb: Path) -> None:
    r = relay.open_relay(mb)
    relay.ask(mb, "w1", "when?", wait=False)
    relay.reply(mb, "manager", "C01", "Friday.")
    before = _unchanged(mb)
    with pytest.raises(Conflict, match="already answered"):
        relay.post(r, "manager", f"{T} (manager) id=R01 T1=5 say=Actually Monday.")
    with pytest.raises(Conflict, match="no turn C07 was asked"):
        relay.post(r, "manager", f"{T} (manager) id=R07 T1=5 say=unsolicited")
    assert _unchanged(mb) == before


def test_post_keeps_one_turn_open_at_a_time_in_order(mb: Path) -> None:
    r = relay.open_relay(mb)
    with pytest.raises(Conflict, match="next Q turn is Q01"):
        relay.post(r, "manager", f"{T} (manager) id=Q05 T0=5 say=skipping ahead")
    relay.post(r, "manager", f"{T} (manager) id=Q01 T0=5 say=first question")
    before = _unchanged(mb)
    with pytest.raises(Conflict, match="Q01 is still open"):
        relay.post(r, "manager", f"{T} (manager) id=Q02 T0=5 say=second question")
    with pytest.raises(Conflict, match="Q01 is open"):
        relay.post(r, "w1", f"{T} (w1) id=C01 T0=5 say=my own turn meanwhile")
    assert _unchanged(mb) == before
    relay.post(r, "w1", f"{T} (w1) id=A01 T1=5 say=an answer")
    relay.post(r, "manager", f"{T} (manager) id=Q02 T0=5 say=second question")


def test_post_refuses_acks_of_replies_that_do_not_exist(mb: Path) -> None:
    r = relay.open_relay(mb)
    with pytest.raises(Conflict, match="no reply R01"):
        relay.post(r, "w1", f"{T} (w1) ack=R01 T2=5")
    relay.ask(mb, "w1", "when?", wait=False)
    relay.reply(mb, "manager", "C01", "Friday.")
    relay.post(r, "w1", f"{T} (w1) ack=R01 T2=5")
    with pytest.raises(Conflict, match="already acknowledged"):
        relay.post(r, "w1", f"{T} (w1) ack=R01 T2=6")


def test_post_after_a_stop_is_refused(mb: Path) -> None:
    r = relay.open_relay(mb)
    relay.ask(mb, "w1", "when?", wait=False)
    relay.stop(mb, "w1", "the human said stop")
    before = _unchanged(mb)
    with pytest.raises(relay.RelayStopped):
        relay.post(r, "manager", f"{T} (manager) id=R01 T1=5 say=too late")
    assert relay.post(r, "manager", f"{T} (manager) STOP at=5 say=ok").author == "w1"  # the first
    assert _unchanged(mb) == before


def test_the_cli_example_works_without_a_double_dash(mb: Path) -> None:
    base = ["--root", str(mb)]
    assert (
        CliRunner().invoke(cli, ["relay", "ask", "q", "--no-wait", *base, "--as", "w1"]).exit_code
        == 0
    )
    line = "- [14:02] (manager) id=R01 T1=1722868961456 say=Yes."
    r = CliRunner().invoke(cli, ["relay", "post", line, *base, "--as", "manager"])
    assert r.exit_code == 0, r.output + r.stderr
    assert r.output.strip() == "sent R01"
    r = CliRunner().invoke(cli, ["relay", "post", line, *base, "--as", "manager"])
    assert r.exit_code == 1 and "already answered" in r.stderr
    r = CliRunner().invoke(cli, ["relay", "post", *base, "--as", "manager", "--", line])
    assert r.exit_code == 1 and "already answered" in r.stderr  # `--` works too
    assert (mb / "to-w1.md").read_text().count("id=R01") == 1


def test_a_diagnostic_posted_as_a_line_points_to_the_notes_file(tmp_path) -> None:
    from click.testing import CliRunner

    from mailslot.cli import cli

    mb = tmp_path / "mb"
    CliRunner().invoke(cli, ["relay", "init", str(mb), "--worker", "w1", "--manager", "manager"])
    inbox = mb / "to-w1.md"
    before = inbox.read_bytes() if inbox.exists() else b""
    r = CliRunner().invoke(
        cli,
        [
            "--root",
            str(mb),
            "--as",
            "manager",
            "relay",
            "post",
            "- [01:40] (manager) a diagnostic line",
        ],
    )
    assert r.exit_code == 1
    assert "state/manager-notes.md" in r.stderr and "relay note" in r.stderr
    assert (inbox.read_bytes() if inbox.exists() else b"") == before


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

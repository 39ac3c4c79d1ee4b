"""An end request needs someone else to accept it: a lone participant cannot end a chat.

Otherwise the creator's ``chat end F request`` right after ``chat new`` reads as "ended by
mutual agreement" and everyone who was about to join is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import chat
from mailslot.cli import cli
from mailslot.core.errors import Conflict


def test_a_lone_participant_cannot_request_the_end(chat_file: Path) -> None:
    size = chat_file.stat().st_size
    with pytest.raises(Conflict, match="no other participant"):
        chat.end(chat_file, "request", name="alice")
    assert chat_file.stat().st_size == size  # nothing written
    assert not chat.status(chat_file).ended
    assert chat.join(chat_file, "bob").name == "bob"  # joiners are welcome
    st = chat.end(chat_file, "request", name="alice")
    assert st.end_request is not None and st.end_request["waiting_for"] == ["bob"]
    assert chat.end(chat_file, "accept", name="bob").ended


def test_a_hand_written_lone_request_waits_for_someone_to_accept(chat_file: Path) -> None:
    with chat_file.open("a") as f:  # written by hand: the rule in `end` was never asked
        f.write("\n---MSG---\nFROM: alice\nTIME: 2026-11-30T01:00:00Z\n---\n---END-REQUEST---\n")
    st = chat.status(chat_file)
    assert not st.ended and st.end_request is not None and st.end_request["waiting_for"] == []
    chat.join(chat_file, "bob")
    assert chat.status(chat_file).end_request["waiting_for"] == ["bob"]
    assert chat.end(chat_file, "accept", name="bob").ended


def test_the_cli_refuses_with_one_line(chat_file: Path) -> None:
    r = CliRunner().invoke(cli, ["chat", "end", str(chat_file), "request", "--as", "alice"])
    assert r.exit_code == 1 and r.stderr.startswith("mailslot: error:")
    assert "no other participant" in r.stderr and r.stderr.count("\n") == 1

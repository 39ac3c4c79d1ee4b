"""A person in a chat (``human:NAME``): shown to all, never a participant the end handshake waits
for, and able to answer an agent's human check."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot import chat
from mailslot.core.errors import Conflict, FormatError


def test_a_person_speaks_without_becoming_a_participant(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    said = chat.human_say(chat_file, "ops", "carry on")
    assert said.sender == "human:ops"
    st = chat.status(chat_file)
    assert st.participants == ["alice", "bob"]
    chat.end(chat_file, "request", None, "alice")
    assert chat.end(chat_file, "accept", None, "bob").ended


def test_a_persons_approval_closes_the_named_check_only(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    chat.check(chat_file, "deploy?", "alice")
    chat.check(chat_file, "delete the branch?", "bob")
    st = chat.human_answer(chat_file, "ops", "alice", "yes", approve=True)
    assert [c["from"] for c in st.human_checks] == ["bob"]
    st = chat.human_answer(chat_file, "ops", "bob", "no", approve=False)
    assert [c["from"] for c in st.human_checks] == ["bob"]  # a refusal is said, not a close
    with pytest.raises(Conflict):
        chat.human_answer(chat_file, "ops", "alice", "again", approve=True)


def test_a_person_cannot_write_protocol_or_an_agent_name(chat_file: Path) -> None:
    with pytest.raises(FormatError):
        chat.human_say(chat_file, "ops", "---END-ACCEPT---")
    with pytest.raises(Exception, match="human name"):
        chat.human_say(chat_file, "Ops Team", "hi")
    assert len(chat.read(chat_file).messages) == 1

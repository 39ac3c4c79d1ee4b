"""A say that fails on the disk never leads to the message twice.

A full disk fails before anything is written, so the retry writes the message once. Whatever
the caller keeps on another disk (the state directory) either is not needed to speak or, when
that disk is full, fails the say with nothing in the chat. A block already written whose
fsync fails is reported as written, so nobody sends it again.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mailslot import chat
from mailslot.core.errors import MailslotError


def test_a_new_speaker_on_a_full_state_disk_writes_once_or_not_at_all(
    chat_file: Path, small_disk: Path, fill_disk
) -> None:
    state = small_disk / "state"
    before = chat_file.read_bytes()
    filler = fill_disk(small_disk)
    try:
        chat.say(chat_file, "hello from bob", "bob", state=state)
    except (OSError, MailslotError) as e:  # refused: then nothing may be in the chat
        assert "no space" in str(e).lower()
        assert chat_file.read_bytes() == before
        filler.unlink()  # room again: the retry is accepted and writes the message once
        chat.say(chat_file, "hello from bob", "bob", state=state)
    bodies = [m.body for m in chat.read(chat_file).messages]
    assert bodies.count("hello from bob") == 1


def test_a_message_the_disk_does_not_confirm_is_reported_as_written(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(MailslotError, match=r"WAS written.*do not send it again"):
        chat.say(chat_file, "said once", "alice")
    monkeypatch.undo()
    assert [m.body for m in chat.read(chat_file).messages].count("said once") == 1

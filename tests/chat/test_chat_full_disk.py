"""A say that fails on a full disk has written nothing, so its retry writes the message once.

The caller's hold on its name is state on another disk (the state directory): when that disk is
full, the block must not be in the chat while the say reports a failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot import chat


def test_a_new_speaker_whose_state_disk_is_full_writes_nothing(
    chat_file: Path, small_disk: Path, fill_disk
) -> None:
    state = small_disk / "state"
    before = chat_file.read_bytes()
    filler = fill_disk(small_disk)
    with pytest.raises((OSError, MailslotError), match=r"(?i)no space"):
        chat.say(chat_file, "hello from bob", "bob", state=state)
    assert chat_file.read_bytes() == before

    filler.unlink()  # room again: the retry is accepted and writes the message once
    chat.say(chat_file, "hello from bob", "bob", state=state)
    bodies = [m.body for m in chat.read(chat_file).messages]
    assert bodies.count("hello from bob") == 1

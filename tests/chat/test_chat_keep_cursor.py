"""``wait(keep_cursor=...)``: a caller that gave up on a wait leaves its cursor where it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot.chat import join, new_chat, say, wait
from mailslot.core.errors import WaitTimeout


def test_a_refused_keep_leaves_the_message_for_the_next_wait(tmp_path: Path) -> None:
    path = new_chat("t", tmp_path, "kiran").path
    join(path, "zara")
    assert [m.sender for m in wait(path, "kiran", timeout=5).messages] == ["zara"]
    say(path, "are you there?", "zara")
    given_up = wait(path, "kiran", timeout=5, keep_cursor=lambda: False)
    assert [m.body for m in given_up.messages] == ["are you there?"]
    again = wait(path, "kiran", timeout=5, keep_cursor=lambda: True)
    assert [m.body for m in again.messages] == ["are you there?"]  # not skipped
    with pytest.raises(WaitTimeout):
        wait(path, "kiran", timeout=0)  # now it moved

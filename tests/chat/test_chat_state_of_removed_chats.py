"""The state a reader keeps for a chat (its cursor, its remembered name) goes some time after the
chat file went, so the state dir does not grow with every chat ever joined.

``new`` and ``join`` sweep: a cursor or name whose chat file is missing and that nothing wrote for
``FORGET_REMOVED_AFTER_SECONDS`` is removed. A chat that exists keeps its state however old, and
a chat removed recently keeps it too, so a reader coming back is told the chat is gone (exit 4).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from mailslot import chat
from mailslot.chat.room import FORGET_REMOVED_AFTER_SECONDS
from mailslot.core.cursor import CursorStore
from mailslot.core.errors import Gone


def _state_of(path: Path) -> list[Path]:
    """The cursor and name files whose key is this chat's."""
    out = []
    for namespace in ("chat", "chat-names"):
        for f in CursorStore(namespace).dir.glob("*.json"):
            key = json.loads(f.read_bytes().splitlines()[-1])["key"]
            if key.startswith(f"{path}\0"):
                out.append(f)
    return out


def _age(files: list[Path], seconds: float) -> None:
    then = time.time() - seconds
    for f in files:
        os.utime(f, (then, then))


def _chat_with_bob(where: Path, topic: str) -> Path:
    where.mkdir()
    path = chat.new_chat(topic, where, "alice", cwd=where).path
    chat.join(path, "bob")
    chat.say(path, "hi", "alice")
    chat.wait(path, "bob", timeout=5)
    return path


def test_the_state_of_a_chat_removed_long_ago_goes_at_the_next_join(tmp_path: Path) -> None:
    gone = _chat_with_bob(tmp_path / "a", "gone")
    kept = _chat_with_bob(tmp_path / "b", "kept")
    old = _state_of(gone)
    assert len(old) == 3  # alice's and bob's cursors, alice's remembered name
    _age(old + _state_of(kept), FORGET_REMOVED_AFTER_SECONDS + 60)  # both long untouched
    gone.unlink()
    _chat_with_bob(tmp_path / "c", "new")
    assert not any(f.exists() for f in old)
    assert all(f.exists() for f in _state_of(kept))  # its chat exists: kept however old
    chat.say(kept, "still here", "alice")
    assert [m.body for m in chat.wait(kept, "bob", timeout=5).messages] == ["still here"]


def test_a_chat_removed_recently_still_tells_its_reader_it_is_gone(tmp_path: Path) -> None:
    gone = _chat_with_bob(tmp_path / "a", "gone")
    state = _state_of(gone)
    _age(state, FORGET_REMOVED_AFTER_SECONDS - 3600)
    gone.unlink()
    _chat_with_bob(tmp_path / "c", "new")
    assert all(f.exists() for f in state)
    with pytest.raises(Gone):
        chat.wait(gone, "bob", timeout=1)


def test_state_that_does_not_read_or_is_not_a_chats_is_left_alone(tmp_path: Path) -> None:
    store = CursorStore("chat")
    store.dir.mkdir(parents=True)
    junk = store.dir / "junk.json"
    junk.write_bytes(b"not json\n")
    foreign = store.path_for("no-separator-here")
    store.save("no-separator-here", {"offset": 1})
    misnamed = store.dir / "misnamed.json"
    misnamed.write_text(f'{{"key": "{tmp_path}/missing.txt\\u0000bob", "offset": 1}}\n')
    _age([junk, foreign, misnamed], FORGET_REMOVED_AFTER_SECONDS + 60)
    _chat_with_bob(tmp_path / "c", "new")
    assert junk.exists() and foreign.exists() and misnamed.exists()


def test_a_chat_found_by_a_sweep_keeps_its_state_a_full_period_from_then(tmp_path: Path) -> None:
    """A chat silent for longer than the period is found by a sweep (its state is read once,
    then not again by every ``join``), and removed right after: its reader is still told it
    is gone, since the state goes only a full period after the sweep last found its chat."""
    quiet = _chat_with_bob(tmp_path / "a", "quiet")
    state = _state_of(quiet)
    _age(state, FORGET_REMOVED_AFTER_SECONDS + 60)  # nothing written for longer than the period
    _chat_with_bob(tmp_path / "b", "first")  # a sweep finds the chat there
    assert all(f.exists() for f in state)
    quiet.unlink()
    _chat_with_bob(tmp_path / "c", "second")  # the next sweep, the chat gone since the last one
    assert all(f.exists() for f in state)
    with pytest.raises(Gone):
        chat.wait(quiet, "bob", timeout=1)

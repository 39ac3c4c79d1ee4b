"""A chat named by file name inside a chat directory: found, or an error listing the chats."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot.chat import list_chats, locate_chat, new_chat
from mailslot.core.errors import InvalidName, NotFound


def test_locate_finds_a_chat_and_lists_the_others_when_unknown(tmp_path: Path) -> None:
    made = new_chat("one", tmp_path, "kiran").path
    assert locate_chat(tmp_path, made.name) == made
    (tmp_path / "notes.txt").write_text("not a chat, but a file: still addressable by name")
    assert locate_chat(tmp_path, "notes.txt") == tmp_path / "notes.txt"
    with pytest.raises(NotFound, match=rf"no chat 'chat-x.txt' \(chats here: {made.name}\)"):
        locate_chat(tmp_path, "chat-x.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([made.name, "notes.txt"])
    assert list_chats(tmp_path) == [made.name]


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "x\0y", "..\\x"])
def test_locate_refuses_names_that_leave_the_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidName):
        locate_chat(tmp_path, name)


def test_an_empty_directory_says_none(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"chats here: none"):
        locate_chat(tmp_path, "chat-2026-01-01-000000.txt")


def test_a_missing_chat_file_lists_the_chats_beside_it(tmp_path: Path) -> None:
    from mailslot.chat import join, read, say

    made = new_chat("one", tmp_path, "kiran").path
    typo = tmp_path / "chat-typo.txt"
    for op in (lambda: say(typo, "hi", "kiran"), lambda: join(typo, "zara"), lambda: read(typo)):
        with pytest.raises(NotFound, match=rf"no such chat file.*\(chats there: {made.name}\)"):
            op()
    assert sorted(p.name for p in tmp_path.iterdir()) == [made.name]  # no file, no lock left

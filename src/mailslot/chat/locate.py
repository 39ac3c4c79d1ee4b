"""Find a chat by name in a directory of chats, or say which chats there are.

A face that serves one chat directory (the MCP server's ``--chat-dir``) takes a chat's file name
from a model, so the name is an address: it must be a plain file name inside that directory (no
``/``, no ``..``, no dot-name) naming a chat that exists. An unknown one is an error that lists
the chats that do exist, so a typo is corrected in one step and never creates a file.
"""

from __future__ import annotations

from pathlib import Path

from mailslot.core.errors import InvalidName, NotFound

__all__ = ["list_chats", "locate_chat"]

# How many chats an error lists (newest first); a directory of thousands stays one line.
LIST_MAX = 20


def list_chats(directory: Path) -> list[str]:
    """The ``chat-*.txt`` file names in ``directory``, newest first (by name, then mtime)."""
    try:
        found = [p for p in Path(directory).glob("chat-*.txt") if p.is_file()]
    except OSError:
        return []
    return [p.name for p in sorted(found, key=lambda p: (p.name, p.stat().st_mtime), reverse=True)]


def locate_chat(directory: Path, name: str) -> Path:
    """The chat ``name`` in ``directory``; ``InvalidName`` for a non-plain name, ``NotFound``
    (listing the chats there) for one that does not exist."""
    if not name or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        raise InvalidName("chat name", name, "a plain file name in the chat directory")
    path = Path(directory).absolute() / name
    if not path.is_file():
        chats = list_chats(directory)
        shown = ", ".join(chats[:LIST_MAX]) + (" ..." if len(chats) > LIST_MAX else "")
        raise NotFound(
            f"no chat {name!r} (chats here: {shown or 'none'})", path=Path(directory).absolute()
        )
    return path

"""Who is speaking in a chat: an explicit ``--as`` name, or one generated and remembered.

Seed 002 has each agent pick ``<FirstName>-<5 digits>`` and "remember it for the conversation" --
in the model's memory, which is exactly the kind of rule that breaks. mailslot remembers it in the
caller's state dir instead, keyed by (chat file, caller):

* the *caller* is ``$MAILSLOT_SESSION`` when set, else the current working directory. Two
  sessions in different directories (the seed's normal case: each advertises its CWD) get
  different slots; two sessions sharing a directory should set ``MAILSLOT_SESSION`` or pass
  ``--as`` every time.
* ``new``/``join`` without ``--as`` generate a name and remember it. If the slot already holds a
  name, they refuse (``Conflict``) rather than silently hand a second session the first one's
  identity -- the visible, cheap direction.
* ``new``/``join`` with ``--as`` remember that name only if the slot is empty, so an explicit name
  never steals another session's slot.
* every other command uses ``--as`` if given, else the remembered name, else refuses.
* a name is held by the caller that first wrote it (recorded per (chat file, name)): a join or a
  write under a name another caller holds, or one already seen as ``FROM`` in the file that no
  caller here holds (a hand-run agent, another machine), is refused (``Conflict``). Two writers
  under one name would each drop the other's messages as their own echo in ``wait`` and could
  accept an end request for each other.

Names follow the agent-name rule (lowercase; ``kiran-48291``), so the same ``MAILSLOT_AGENT``
works on every channel. Names written by hand-run agents (``Kiran-48291``) are still read.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

from mailslot.core.cursor import CursorStore
from mailslot.core.errors import Conflict, MissingAgent
from mailslot.core.names import validate_agent

__all__ = ["FIRST_NAMES", "NameBook", "caller_key", "generate_name"]

FIRST_NAMES = (
    "amara", "bodhi", "calla", "dario", "esme", "farid", "greta", "hamza", "ines", "jonah",
    "kiran", "lucia", "mateo", "nadia", "oskar", "priya", "quinn", "rafa", "saoirse", "tariq",
    "ulla", "vikram", "wren", "ximena", "yusuf", "zara", "anouk", "bram", "cleo", "dmitri",
    "elif", "femi", "gael", "hana", "idris", "juno", "kofi", "lior", "mira", "nico",
)  # fmt: skip


def generate_name() -> str:
    """A fresh ``<firstname>-<5 digits>`` name (the seed's scheme, lowercase)."""
    return f"{secrets.choice(FIRST_NAMES)}-{secrets.randbelow(90000) + 10000}"


def _describe(caller: str) -> str:
    kind, _, value = caller.partition(":")
    return f"MAILSLOT_SESSION={value}" if kind == "session" else f"directory {value}"


def caller_key() -> str:
    """Who the caller is for remembering names: ``$MAILSLOT_SESSION``, else the CWD."""
    session = os.environ.get("MAILSLOT_SESSION")
    return f"session:{session}" if session else f"cwd:{Path.cwd().resolve()}"


class NameBook:
    """Remembered chat names in the state dir, one per (chat file, caller)."""

    def __init__(self, base: Path | None = None, caller: str | None = None) -> None:
        self._store = CursorStore("chat-names", base)
        self._caller = caller if caller is not None else caller_key()

    def _key(self, chat: Path) -> str:
        return f"{chat}\0{self._caller}"

    def _holder_key(self, chat: Path, name: str) -> str:
        return f"{chat}\0name:{name}"

    def holder(self, chat: Path, name: str) -> str | None:
        """The caller that holds ``name`` in ``chat`` (``session:...``/``cwd:...``), or ``None``.

        A caller whose remembered name is ``name`` holds it (chats joined before names were
        recorded per holder).
        """
        value = self._store.load(self._holder_key(chat, name))
        caller = value.get("caller") if value else None
        if isinstance(caller, str):
            return caller
        return self._caller if self.recall(chat) == name else None

    def check_speaker(self, chat: Path, name: str, seen: Callable[[], bool]) -> None:
        """Refuse ``name`` unless this caller holds it, or nobody holds it and ``seen()`` (the name
        is a ``FROM`` in the file) is false; ``Conflict`` naming the holder and the way out."""
        holder = self.holder(chat, name)
        if holder == self._caller:
            return
        if holder is None and not seen():
            return
        where = f"from {_describe(holder)}" if holder else "(written by a caller unknown here)"
        here = _describe(self._caller)
        raise Conflict(
            f"{name!r} already speaks in this chat {where}; this caller is {here}."
            f" Pick another name with --as NEW-NAME, or act as {name} from where it joined "
            "(same MAILSLOT_SESSION, else the same directory)",
            path=chat,
        )

    def claim(self, chat: Path, name: str) -> None:
        """Record this caller as the holder of ``name`` in ``chat`` unless one is recorded."""
        key = self._holder_key(chat, name)
        if not self._store.load(key):
            self._store.save(key, {"caller": self._caller})

    def recall(self, chat: Path) -> str | None:
        """The name remembered for this caller in ``chat``, or ``None``."""
        value = self._store.load(self._key(chat))
        name = value.get("name") if value else None
        return name if isinstance(name, str) else None

    def pick(self, chat: Path, name: str | None) -> str:
        """The name to enter ``chat`` with (stores nothing). ``Conflict`` if one is held here."""
        held = self.recall(chat)
        if name is None:
            if held is not None:
                raise Conflict(
                    f"this caller already speaks in this chat as {held!r}; pass --as {held} to "
                    "act as it, or --as NEW-NAME (or set MAILSLOT_SESSION) to join as someone "
                    "else",
                    path=chat,
                )
            return generate_name()
        return validate_agent(name, "chat name")

    def remember(self, chat: Path, name: str) -> None:
        """Remember ``name`` for this caller in ``chat`` unless the slot already holds one."""
        if self.recall(chat) is None:
            self._store.save(self._key(chat), {"name": name})

    def resolve(self, chat: Path, name: str | None) -> str:
        """``name`` if given, else the remembered one; ``MissingAgent`` if there is neither."""
        if name is not None:
            return validate_agent(name, "chat name")
        held = self.recall(chat)
        if held is None:
            raise MissingAgent(
                "who is speaking? pass --as NAME (or set MAILSLOT_AGENT); no name is remembered "
                "for this chat here (join it first)",
                path=chat,
            )
        return held

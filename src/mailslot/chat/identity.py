"""Who is speaking in a chat: a name given with ``--as``, or one generated and remembered.

The hand-run chat procedure has each agent pick ``<FirstName>-<5 digits>`` and remember it --
in the model's memory, which is exactly the kind of rule that breaks. mailslot remembers it in the
caller's state dir instead, per (chat, session). The rules, and why:

* A chat is its file's *real path* (``ChatRef``): ``sub/../chat.txt``, a symlinked directory and
  the plain path are one chat, so one agent never becomes two speakers by spelling a path
  another way. State written under the spelling a caller used before (``spelled``) is still
  read, so nothing remembered is lost; new state is written under the real path.
* A name belongs to a *session*, not a directory. The session is ``$MAILSLOT_SESSION`` when set;
  without it the current directory stands in for one, but only to remember a generated name
  between commands -- never to decide who may speak.
* An explicit name (``--as``, ``MAILSLOT_AGENT``) acts as that name from any directory and any
  session: a shared chat file is full trust (anyone who can write it can write any ``FROM:``), so
  refusing would only stop honest agents (one that ``cd``'d into a subfolder, a human typing in
  a second terminal). Processes acting under one name are one speaker and share its cursor.
* Only a *new* speaker can collide: ``join`` under a name that already speaks in the file, or a
  generated name that does, is refused (``Conflict``) -- two joins as one name would be two
  agents each dropping the other's messages as its own echo. A name that left or was marked gone
  may join again.
* ``new``/``join`` remember the name for the session when the session has none yet, so later
  commands need no ``--as``; a second ``join`` without ``--as`` from a session that already speaks
  is refused rather than handing it a second identity.

Names follow the agent-name rule (lowercase; ``kiran-48291``), so the same ``MAILSLOT_AGENT``
works on every channel. Names written by hand-run agents (``Kiran-48291``) are still read.
"""

from __future__ import annotations

import os
from collections.abc import Container
from pathlib import Path

from mailslot.core.errors import Conflict, MissingAgent
from mailslot.core.names import validate_agent
from mailslot.core.record import FrozenRecord

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from mailslot.core.cursor import CursorStore

__all__ = ["FIRST_NAMES", "ChatRef", "NameBook", "caller_key", "generate_name"]

FIRST_NAMES = (
    "amara", "bodhi", "calla", "dario", "esme", "farid", "greta", "hamza", "ines", "jonah",
    "kiran", "lucia", "mateo", "nadia", "oskar", "priya", "quinn", "rafa", "saoirse", "tariq",
    "ulla", "vikram", "wren", "ximena", "yusuf", "zara", "anouk", "bram", "cleo", "dmitri",
    "elif", "femi", "gael", "hana", "idris", "juno", "kofi", "lior", "mira", "nico",
)  # fmt: skip
# Fresh draws before a generated name that keeps colliding is refused; 40 x 90,000 names make
# even one collision rare, so running out means something is wrong, not bad luck.
GENERATE_TRIES = 20


def generate_name(taken: Container[str] = ()) -> str:
    """A fresh ``<firstname>-<5 digits>`` name (the hand-run agents' scheme, lowercase) not in
    ``taken`` (lowercased names); ``Conflict`` if ``GENERATE_TRIES`` draws all collide."""
    import secrets

    for _ in range(GENERATE_TRIES):
        name = f"{secrets.choice(FIRST_NAMES)}-{secrets.randbelow(90000) + 10000}"
        if name not in taken:
            return name
    raise Conflict(f"no free generated name after {GENERATE_TRIES} tries; pass --as NAME")


class ChatRef(FrozenRecord):
    """One chat: ``path`` is the file's real path (directories resolved, symlinks and ``..``
    gone), the key for every piece of state; ``spelled`` is the absolute path as the caller
    wrote it, the key older state may sit under. A ``core.record`` record, not a dataclass:
    every ``chat say`` makes one."""

    __match_args__ = ("path", "spelled")
    __slots__ = ("path", "spelled")
    path: Path
    spelled: Path

    def __init__(self, path: Path, spelled: Path) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "spelled", spelled)

    @classmethod
    def of(cls, path: Path | str) -> ChatRef:
        """The chat at ``path`` (``~`` expanded; the file itself need not exist)."""
        spelled = Path(path).expanduser().absolute()
        if spelled.name in ("", ".", ".."):
            return cls(spelled.resolve(), spelled)
        return cls(spelled.parent.resolve() / spelled.name, spelled)

    @property
    def keys(self) -> tuple[Path, ...]:
        """Where state for this chat may be keyed: the real path first, then the spelling."""
        return (self.path,) if self.spelled == self.path else (self.path, self.spelled)


def caller_key() -> str:
    """The session that remembers names: ``$MAILSLOT_SESSION``, else the current directory."""
    session = os.environ.get("MAILSLOT_SESSION")
    return f"session:{session}" if session else f"cwd:{Path.cwd().resolve()}"


def _refuse_no_name(chat: Path) -> MissingAgent:
    """The one error for "no name given and none remembered" (a usage error, exit 2)."""
    return MissingAgent(
        "who is speaking? pass --as NAME (or set MAILSLOT_AGENT): it works from any directory. "
        "A name is remembered after new/join only for the same MAILSLOT_SESSION (without one, "
        "the same directory)",
        path=chat,
    )


class NameBook:
    """Remembered chat names in the state dir, one per (chat, session)."""

    def __init__(self, base: Path | None = None, caller: str | None = None) -> None:
        self._base = base
        self._names: CursorStore | None = None
        self._caller = caller if caller is not None else caller_key()

    @property
    def _store(self) -> CursorStore:
        # made on first use: a say with --as reads no name, and core.cursor loads json and
        # dataclasses on every chat command's start
        if self._names is None:
            from mailslot.core.cursor import CursorStore

            self._names = CursorStore("chat-names", self._base)
        return self._names

    def _key(self, chat: Path) -> str:
        return f"{chat}\0{self._caller}"

    def recall(self, chat: ChatRef | Path) -> str | None:
        """The name remembered for this session in ``chat``, or ``None``."""
        chat = ChatRef.of(chat) if isinstance(chat, Path) else chat
        for path in chat.keys:
            value = self._store.load(self._key(path))
            name = value.get("name") if value else None
            if isinstance(name, str):
                return name
        return None

    def pick(self, chat: ChatRef | Path, name: str | None, taken: Container[str]) -> str:
        """The name to join ``chat`` with (stores nothing): ``name`` checked, else a generated
        one not in ``taken``. ``Conflict`` when no name is given and this session already
        speaks here (a second identity must be asked for)."""
        chat = ChatRef.of(chat) if isinstance(chat, Path) else chat
        if name is not None:
            return validate_agent(name, "chat name")
        held = self.recall(chat)
        if held is not None:
            raise Conflict(
                f"this session already speaks in this chat as {held!r}; pass --as {held} to act "
                "as it, or --as NEW-NAME (or another MAILSLOT_SESSION) to join as someone else",
                path=chat.path,
            )
        return generate_name(taken)

    def remember(self, chat: ChatRef | Path, name: str) -> bool:
        """Remember ``name`` for this session in ``chat`` unless one is remembered; whether it
        stored it (so a failed join can ``forget``). Raises ``OSError`` (a full state dir)."""
        chat = ChatRef.of(chat) if isinstance(chat, Path) else chat
        if self.recall(chat) is not None:
            return False
        self._store.save(self._key(chat.path), {"name": name})
        return True

    def forget(self, chat: ChatRef | Path) -> None:
        """Drop the name remembered for this session in ``chat`` (under the real path)."""
        chat = ChatRef.of(chat) if isinstance(chat, Path) else chat
        self._store.forget(self._key(chat.path))

    def resolve(self, chat: ChatRef | Path, name: str | None) -> str:
        """``name`` if given, else the remembered one; ``MissingAgent`` if there is neither."""
        chat = ChatRef.of(chat) if isinstance(chat, Path) else chat
        if name is not None:
            return validate_agent(name, "chat name")
        held = self.recall(chat)
        if held is None:
            raise _refuse_no_name(chat.path)
        return held

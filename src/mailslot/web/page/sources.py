"""What each root given to ``mailslot web`` holds: an exchange, a bus, chats, a peer inbox.

A root is recognised by the files its channel itself requires (an exchange's
``.mailslot/config``, a bus's ``LOG.md`` or charter, ``chat-*.txt`` files, ``peer/inbox``), so
the page never guesses differently from the command line. One root may hold several (a bus
directory that also holds chats). Each source gets a short id for its URLs, unique among the
roots and made of safe characters only, so a hostile directory name never reaches a URL or the
HTML unescaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mailslot.bus.layout import CHARTER, LOG
from mailslot.chat.locate import list_chats
from mailslot.core.errors import MailslotError, NotFound
from mailslot.defaults import board_db, peer_inbox
from mailslot.exchange.layout import Exchange, load_exchange

__all__ = ["Source", "Sources", "find_sources"]

_UNSAFE = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class Source:
    """One root and what it holds (``None``/``False`` where it holds no such thing)."""

    id: str
    root: Path
    exchange: Exchange | None
    bus: bool
    chats: bool
    peer_inbox: Path | None


@dataclass(frozen=True)
class Sources:
    """Every root the page serves, by id, in the order given."""

    by_id: dict[str, Source]

    def get(self, source_id: str) -> Source:
        """The source ``source_id``; ``NotFound`` if there is none."""
        found = self.by_id.get(source_id)
        if found is None:
            raise NotFound(f"no source {source_id!r}")
        return found

    def exchange(self, source_id: str) -> tuple[Source, Exchange]:
        """The exchange at ``source_id``; ``NotFound`` if it holds none."""
        source = self.get(source_id)
        if source.exchange is None:
            raise NotFound(f"{source_id} holds no exchange")
        return source, source.exchange

    @property
    def all(self) -> list[Source]:
        return list(self.by_id.values())


def _slug(root: Path) -> str:
    return _UNSAFE.sub("-", root.name.lower()).strip("-")[:40] or "root"


def _is_bus(root: Path) -> bool:
    return (root / LOG).is_file() or (root / CHARTER).is_file()


def find_sources(roots: list[Path]) -> Sources:
    """What each of ``roots`` holds; ``NotFound`` for a root that is missing or holds nothing
    the page can show (said at start, not as an empty page)."""
    out: dict[str, Source] = {}
    for given in roots:
        root = given.expanduser().absolute()
        if not root.is_dir():
            raise NotFound("no such directory", path=root)
        exchange = None
        if (root / ".mailslot" / "config").is_file():
            try:
                exchange = load_exchange(root)
            except MailslotError:
                exchange = None
        inbox = peer_inbox(root)
        source_id = base = _slug(root)
        n = 2
        while source_id in out:
            source_id, n = f"{base}-{n}", n + 1
        source = Source(
            source_id,
            root,
            exchange,
            _is_bus(root),
            bool(list_chats(root)),
            inbox if inbox.is_dir() else None,
        )
        board = board_db(root).is_file()
        if not (source.exchange or source.bus or source.chats or source.peer_inbox or board):
            raise NotFound(
                "holds no exchange (.mailslot/config), bus (LOG.md), chat (chat-*.txt), peer "
                "inbox (peer/inbox) or board (board/agora.db)",
                path=root,
            )
        out[source_id] = source
    return Sources(out)

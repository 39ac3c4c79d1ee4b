"""The two records search deals in: ``Doc`` (a message as it is indexed) and ``Hit`` (a match).

A ``Hit`` names the message the way its channel does (exchange topic and entry file, chat file
and byte offset, LOG.md line, peer message id) and carries ``link``: the message's file relative
to its root, then ``#`` and its place in that file or thread. A face turns ``link`` into its own
address (the page into a URL, the CLI prints it); nothing in a hit is HTML or markup.

``snippet`` is plain text cut around the match; ``marks`` are ``(start, end)`` character spans of
it that matched, so a face highlights by escaping the text and wrapping those spans itself.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Doc", "Hit"]


class Doc(NamedTuple):
    """One message as an adapter hands it to the index."""

    name: str  # its identity within its source: entry file name, byte offset, line, id
    channel: str  # exchange | chat | log | peer
    thread: str  # topic, chat file name, LOG.md, inbox
    sender: str | None  # by transport (exchange: the verified sender or the side)
    at: str | None  # UTC ISO-8601 when the message says (or its arrival), else None
    title: str  # searchable words beside the body: the topic, the subject
    body: str
    path: str  # the file holding it, relative to the root
    anchor: str  # its place in that file or thread
    fsig: str = ""  # the file's signature when it was read (entries): changed means re-read


class Hit(NamedTuple):
    """One message that matched a search, best first."""

    channel: str
    root: str  # the root it was found under (absolute)
    thread: str
    name: str
    sender: str | None
    at: str | None
    snippet: str
    marks: tuple[tuple[int, int], ...]
    link: str  # ``path#anchor``, relative to ``root``
    score: float  # FTS5 bm25 with the title weighted up: lower is better

    @property
    def path(self) -> str:
        """The file that holds the message, relative to ``root``."""
        return self.link.partition("#")[0]

    @property
    def location(self) -> str:
        """``link`` under ``root``: the message's absolute address, usable from any directory."""
        return f"{self.root.rstrip('/')}/{self.link}"

    @property
    def anchor(self) -> str:
        """The message's place in its file or thread (entry name, offset, line, id)."""
        return self.link.partition("#")[2]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: every field, ``marks`` as ``[[start, end], ...]``, and
        ``location``."""
        out = self._asdict()
        out["marks"] = [list(m) for m in self.marks]
        out["location"] = self.location
        return out

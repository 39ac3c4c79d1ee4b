"""Helpers for the search tests: write files the way a hand-writing agent does."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from mailslot.exchange import Exchange
from mailslot.search import search


class Roots(NamedTuple):
    ex: Exchange
    bus: Path  # a bus with peer/inbox/
    chats: Path
    chat_file: Path

    @property
    def all(self) -> list[Path]:
        return [self.ex.root, self.bus, self.chats]


def hand_entry(topic_dir: Path, number: int, sender: str, body: str, at: str) -> Path:
    """An exchange entry written by hand (no lock, no temp file), CRLF and all."""
    topic_dir.mkdir(parents=True, exist_ok=True)
    path = topic_dir / f"{number:04d}-{sender}.md"
    text = f"---\r\nfrom: {sender}\r\nat: '{at}'\r\naction: fyi\r\n---\r\n{body}\r\n"
    path.write_bytes(text.encode())
    return path


def links(roots: list[Path], query: str, **kw: object) -> list[str]:
    """The links of the hits for ``query``, in rank order."""
    return [h.link for h in search(roots, query, **kw)]  # type: ignore[arg-type]

"""Reader cursors, kept in the reader's own state directory.

A reader may not be allowed to write where it reads (an agent reads an inbox the other side
writes), so cursors live under ``$XDG_STATE_HOME/mailslot`` (or ``$MAILSLOT_STATE_DIR``), never
next to the data. A reader that never read has seen nothing: a missing cursor means "deliver
everything pending", so an offline recipient loses nothing. Cursors are written atomically
(temp + rename); those written without fsync (seen-sets, wait cursors) may come back older
after a power cut, which only re-delivers. A reader writes one only after its output is out.

Two shapes: ``ByteCursor`` for append-only files (an offset plus the file's identity, so a file
replaced under the same name is noticed) and ``SeenSet`` for directories of immutable entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailslot.core.errors import FormatError
from mailslot.core.fsio import atomic_write

__all__ = ["ByteCursor", "CursorStore", "SeenSet", "state_dir"]


def state_dir() -> Path:
    """The per-user state directory mailslot writes cursors and local settings into."""
    explicit = os.environ.get("MAILSLOT_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "mailslot"


@dataclass(frozen=True)
class ByteCursor:
    """A position in an append-only file: ``offset`` bytes consumed of the file ``inode``."""

    offset: int = 0
    inode: int | None = None

    def valid_for(self, path: Path) -> bool:
        """Whether this cursor still points into ``path`` (same file, not shorter than offset)."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return False
        if self.inode is not None and st.st_ino != self.inode:
            return False
        return st.st_size >= self.offset

    @classmethod
    def at_end(cls, path: Path) -> ByteCursor:
        """A cursor past everything currently in ``path``."""
        st = path.stat()
        return cls(st.st_size, st.st_ino)


@dataclass
class SeenSet:
    """The keys of directory entries a reader has already taken."""

    keys: set[str]

    def unseen(self, keys: list[str]) -> list[str]:
        """``keys`` not yet seen, order kept."""
        return [k for k in keys if k not in self.keys]


def _slug(key: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[-60:].strip("._") or "key"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{readable}.{digest}"


class CursorStore:
    """Cursors for one namespace (``chat``, ``exchange``...), one small JSON file per key."""

    def __init__(self, namespace: str, base: Path | None = None) -> None:
        self.dir = (base or state_dir()) / "cursors" / namespace

    def path_for(self, key: str) -> Path:
        """Where the cursor for ``key`` lives (the key may be any string, such as a path)."""
        return self.dir / f"{_slug(key)}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        """The stored value for ``key``, or ``None`` if this reader never stored one."""
        path = self.path_for(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            value = json.loads(raw)
        except ValueError as e:  # not JSON, or not UTF-8
            raise FormatError(f"corrupt cursor: {e}", path=path) from None
        if not isinstance(value, dict):
            raise FormatError("corrupt cursor: not an object", path=path)
        return value

    def save(self, key: str, value: dict[str, Any], *, durable: bool = True) -> None:
        """Store ``value`` for ``key`` atomically; ``durable=False`` skips the fsyncs."""
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"key": key, **value}, sort_keys=True)
        atomic_write(self.path_for(key), data, durable=durable)

    def forget(self, key: str) -> None:
        """Drop the value stored for ``key`` (nothing if there is none)."""
        self.path_for(key).unlink(missing_ok=True)

    def load_bytes(self, key: str) -> ByteCursor:
        """The byte cursor for ``key``; offset 0 if none was stored."""
        value = self.load(key)
        if value is None:
            return ByteCursor()
        return ByteCursor(int(value.get("offset", 0)), value.get("inode"))

    def save_bytes(self, key: str, cursor: ByteCursor, *, durable: bool = True) -> None:
        """Store a byte cursor."""
        self.save(key, {"offset": cursor.offset, "inode": cursor.inode}, durable=durable)

    def load_seen(self, key: str) -> SeenSet:
        """The seen-set for ``key``; empty if none was stored; ``FormatError`` if it does not
        read as a list of keys."""
        value = self.load(key)
        if not value:
            return SeenSet(set())
        keys = value.get("seen", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise FormatError(
                "corrupt cursor: 'seen' is not a list of keys", path=self.path_for(key)
            )
        return SeenSet(set(keys))

    def save_seen(self, key: str, seen: SeenSet) -> None:
        """Store a seen-set atomically, without fsync: a mark lost in a crash or a power cut
        only re-delivers (the safe direction)."""
        self.save(key, {"seen": sorted(seen.keys)}, durable=False)

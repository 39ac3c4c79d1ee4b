"""Reading a file someone else wrote: regular files only, never through a symlink, bounded.

Every file in an exchange inbox was written by the other side (or a person, or a bridge). A FIFO
named like an entry would block a reader forever, a device could feed it without end, and a
symlink could point anywhere. So readers use ``core.fsio.read_regular`` (regular files only, never
blocking) at ``MAX_FILE_BYTES`` (the body limit plus room for the frontmatter): a larger file is
refused, never read whole.
"""

from __future__ import annotations

from pathlib import Path

from mailslot.core import fsio

__all__ = ["MAX_FILE_BYTES", "read_regular"]

# entries.MAX_BODY_BYTES (256 KiB) plus generous room for a hand-written frontmatter
MAX_FILE_BYTES = 256 * 1024 + 64 * 1024


def read_regular(path: Path | str, limit: int = MAX_FILE_BYTES) -> bytes:
    """``core.fsio.read_regular`` at the exchange's limit; ``OSError`` for a symlink, a FIFO, a
    device, a directory, or a file over ``limit`` bytes."""
    return fsio.read_regular(path, limit)

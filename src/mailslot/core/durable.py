"""Visible first, durable before return: fsync a file after its append lock is released.

``locked_append(fsync=True)`` holds the lock through the fsync, so every reader (who takes the
shared lock) waits for the disk -- milliseconds on real disks -- before it can see a record that
is already whole. A writer that appends without fsync, releases the lock and then calls
``sync_file`` keeps both promises: a reader sees the record the moment it is complete, and the
writer does not return (does not claim "sent") until the bytes are durable. If that fsync fails
the record is already there for readers: ``sync_appended`` says so, so the caller does not send
it a second time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mailslot.core.errors import AlreadyWritten

__all__ = ["sync_appended", "sync_file"]


def sync_file(path: Path) -> bool:
    """fsync ``path``'s data through a fresh descriptor; ``False`` if it no longer exists or is
    no longer a regular file (someone put a FIFO or a device under the name since the write).

    ``fsync`` flushes the file (the inode), whichever descriptor wrote the bytes. The open never
    blocks: a FIFO swapped in after the append must not hold the writer forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def sync_appended(path: Path, what: str) -> None:
    """``sync_file`` for a record already appended and visible (``what`` names it); a failed
    fsync is ``AlreadyWritten``, which says the record WAS written, so nobody writes it again."""
    try:
        sync_file(path)
    except OSError as e:
        raise AlreadyWritten(
            f"the {what} WAS written and readers see it, but the disk did not confirm it "
            f"durable ({e.strerror}): do not send it again",
            path=path,
        ) from None

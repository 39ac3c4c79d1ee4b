"""Reading a file someone else wrote: regular files only, never through a symlink, bounded.

Every file in an exchange inbox was written by the other side (or a person, or a bridge). A FIFO
named like an entry would block a reader forever, a device could feed it without end, and a
symlink could point anywhere. So readers open with ``O_NOFOLLOW | O_NONBLOCK``, ``fstat`` the
descriptor and refuse anything but a regular file, and read at most ``MAX_FILE_BYTES`` (the body
limit plus room for the frontmatter): a larger file is refused, never read whole.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "read_regular"]

# entries.MAX_BODY_BYTES (256 KiB) plus generous room for a hand-written frontmatter
MAX_FILE_BYTES = 256 * 1024 + 64 * 1024


def read_regular(path: Path | str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at ``path``; ``OSError`` for a symlink, a FIFO, a device,
    a directory, or a file over ``limit`` bytes (never blocks, never reads past ``limit + 1``)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    return data

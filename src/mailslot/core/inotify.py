"""Linux inotify through the C library, with nothing between: ``INotify``, its events and flags.

``ctypes.util.find_library("c")`` runs ``ldconfig -p`` in a subprocess (90 ms measured on the
development VM) before the first watch, so the library is loaded by its soname, ``libc.so.6``
(glibc and musl both answer to it on Linux); reading and decoding events is plain ``os.read`` and
``struct``. The interface is the small part of ``inotify_simple``'s that mailslot uses.
"""

from __future__ import annotations

import errno
import os
import select
import struct
import sys
from enum import IntFlag
from typing import Any, NamedTuple

__all__ = ["Event", "INotify", "flags", "read_events"]

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (of the NUL-padded name that follows)
_HEADER_SIZE = _HEADER.size
_READ_SIZE = 64 << 10  # events queued at once: about a thousand, read in one call
# A read that came this close to filling the buffer may have left events queued: the kernel
# hands out whole events only, each at most a header and a name of NAME_MAX + 1 bytes, padded
_FULL_MARGIN = _HEADER.size + 256 + 16
_DOT = ord(".")
_FS_ENCODING = sys.getfilesystemencoding()  # names decoded as ``os.fsdecode`` decodes them
_FS_ERRORS = sys.getfilesystemencodeerrors()
_libc: Any = None


class flags(IntFlag):
    """Event and watch flags (``<sys/inotify.h>``)."""

    ACCESS = 0x00000001
    MODIFY = 0x00000002
    ATTRIB = 0x00000004
    CLOSE_WRITE = 0x00000008
    CLOSE_NOWRITE = 0x00000010
    OPEN = 0x00000020
    MOVED_FROM = 0x00000040
    MOVED_TO = 0x00000080
    CREATE = 0x00000100
    DELETE = 0x00000200
    DELETE_SELF = 0x00000400
    MOVE_SELF = 0x00000800
    UNMOUNT = 0x00002000
    Q_OVERFLOW = 0x00004000
    IGNORED = 0x00008000
    ONLYDIR = 0x01000000
    DONT_FOLLOW = 0x02000000
    EXCL_UNLINK = 0x04000000
    MASK_ADD = 0x20000000
    ISDIR = 0x40000000
    ONESHOT = 0x80000000


class Event(NamedTuple):
    """One event: the watch it came from, what happened, the rename cookie, the name in a
    watched directory ("" for the directory itself)."""

    wd: int
    mask: int
    cookie: int
    name: str


def _c() -> Any:
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL("libc.so.6", use_errno=True)
    return _libc


def _raise_errno(what: str) -> None:
    import ctypes

    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


class INotify:
    """An inotify instance (close-on-exec, non-blocking). ``OSError`` if the kernel refuses one."""

    def __init__(self) -> None:
        c = _c()
        fd = c.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if fd < 0:
            _raise_errno("inotify_init1")
        self.fd: int = fd
        self.more = False  # whether the last ``read`` filled its buffer (more may be queued)

    def fileno(self) -> int:
        """The descriptor (readable when events wait)."""
        return self.fd

    def add_watch(self, path: str | bytes, mask: int) -> int:
        """Watch ``path`` for ``mask``; its watch descriptor. ``OSError`` (``ENOSPC``: the watch
        limit) if the kernel refuses."""
        raw = os.fsencode(path)
        wd = int(_c().inotify_add_watch(self.fd, raw, mask))
        if wd < 0:
            _raise_errno(f"inotify_add_watch {raw!r}")
        return wd

    def rm_watch(self, wd: int) -> None:
        """Stop watch ``wd`` (its ``IGNORED`` event is queued); ``OSError`` (``EINVAL``) for a
        watch the kernel dropped already."""
        if _c().inotify_rm_watch(self.fd, wd) < 0:
            _raise_errno(f"inotify_rm_watch {wd}")

    def read(self, timeout: int | None = None, *, dot_names: bool = True) -> list[Event]:
        """The events queued now; with ``timeout`` (ms; ``None``: forever) waits for the first
        when none is queued (0: never blocks: one ``read``, which finds nothing queued at once).
        Without ``dot_names``, events on a name that starts with a dot (an in-flight temp) are
        passed over before anything is made of them. ``more`` then says whether that read may
        have left events queued (it filled the buffer).
        """
        if timeout != 0:
            wait = None if timeout is None else timeout / 1000
            if not select.select([self.fd], [], [], wait)[0]:
                return []
        try:
            events, self.more = read_events(self.fd, dot_names=dot_names)
        except OSError as e:
            if e.errno == errno.EINTR:
                self.more = False
                return []
            raise
        return [Event(*e) for e in events]

    def close(self) -> None:
        """Close the descriptor (slow: see ``core.ending.slow_close``); once."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def read_events(fd: int, *, dot_names: bool = True) -> tuple[list[tuple[int, int, int, str]], bool]:
    """One ``read`` of the events queued on the non-blocking inotify descriptor ``fd``: each as
    ``(wd, mask, cookie, name)`` ("" for the directory itself), and whether that read may have
    left events queued (it came close to filling the buffer). Nothing queued: ``([], False)``.
    Without ``dot_names``, events on a name that starts with a dot (an in-flight temp) are
    passed over before anything is made of them.
    """
    try:
        data = os.read(fd, _READ_SIZE)
    except BlockingIOError:
        return [], False
    end = len(data)
    out = []
    at = 0
    unpack = _HEADER.unpack_from
    while at + _HEADER_SIZE <= end:
        wd, mask, cookie, size = unpack(data, at)
        at += _HEADER_SIZE
        if size and not dot_names and data[at] == _DOT:
            at += size
            continue
        out.append(
            (wd, mask, cookie, data[at : at + size].rstrip(b"\0").decode(_FS_ENCODING, _FS_ERRORS))
        )
        at += size
    return out, end > _READ_SIZE - _FULL_MARGIN

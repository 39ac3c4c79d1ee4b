"""Moving a message or a topic: never over something, never through a symlink, durable.

``safe_move(src, dst)`` is the one move mailslot makes of something someone wrote (an archive
into ``done/`` and back, an outbox take and its undo, a peer message into ``processed/``):

* Never overwrites: on Linux it is ``renameat2(RENAME_NOREPLACE)``, which the kernel refuses
  atomically when ``dst`` exists (a plain ``rename`` silently replaces a file, or an empty
  directory, that arrived under the name since it was checked). Where that call is missing or the
  file system does not take the flag, a file is moved by ``link`` (refuses an existing name) then
  ``unlink``; a directory, which cannot be linked, by a check then ``rename``.
* Never through a symlink: a symlink as ``src``, or as either parent directory, is refused
  (``SymlinkRefused``): a planted link must not carry a message out of its tree or move the link
  instead of what it names.
* Exactly one of two racers moving the same source wins; the other gets ``FileNotFoundError``
  (the fallback's loser removes its second name again).
* Durable: both parent directories are fsync'd before it returns, so a crash after the move
  finds the name where the move put it.
* Killed at any instant (SIGKILL), it leaves the source or the destination whole: the rename is
  one step; the fallback's link leaves, at worst, the same file under both names.

What this cannot protect against: a directory moved by the fallback can still meet a directory
created under ``dst`` between the check and the rename (there is no atomic refusal without
``renameat2``), and a parent replaced by a symlink after the check.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from mailslot.core.errors import Conflict, SymlinkRefused
from mailslot.core.fsio import fsync_dir

__all__ = ["safe_move"]

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
# File systems that do not take the flag answer with one of these; then the fallback moves.
_NO_FLAG = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


def _load_renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2  # glibc 2.28+, musl 1.2.3+
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()


def _refuse_links(src: Path, dst: Path) -> bool:
    """``SymlinkRefused`` for a symlink as ``src`` or a parent; whether ``src`` is a directory."""
    for parent in {src.parent, dst.parent}:
        if os.path.islink(parent):
            raise SymlinkRefused(f"{parent} is a symlink; nothing moved through it", path=parent)
    mode = os.lstat(src).st_mode  # FileNotFoundError: gone (a racer moved it)
    if stat.S_ISLNK(mode):
        raise SymlinkRefused(f"{src} is a symlink; a symlink is never moved", path=src)
    return stat.S_ISDIR(mode)


def _exists(dst: Path) -> Conflict:
    return Conflict(f"{dst} exists; a move never overwrites", path=dst)


def _rename_noreplace(src: Path, dst: Path) -> bool:
    """``renameat2(RENAME_NOREPLACE)``; ``False`` when this system cannot (use the fallback)."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_FLAG:
        return False
    if err == errno.EEXIST:
        raise _exists(dst)
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def _link_then_unlink(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise _exists(dst) from None
    try:
        os.unlink(src)
    except FileNotFoundError:
        # A racer moved the source meanwhile: it won, so this name goes again.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dst)
        raise


def safe_move(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst`` (see the module docstring), both directories fsync'd.

    Raises ``Conflict`` when ``dst`` exists, ``SymlinkRefused`` for a symlink as ``src`` or a
    parent, ``FileNotFoundError`` when ``src`` is gone (a racer moved it), ``OSError`` otherwise
    (across file systems: ``EXDEV``).
    """
    src, dst = Path(src), Path(dst)
    is_dir = _refuse_links(src, dst)
    if not _rename_noreplace(src, dst):
        if is_dir:
            if os.path.lexists(dst):
                raise _exists(dst)
            os.rename(src, dst)
        else:
            _link_then_unlink(src, dst)
    fsync_dir(dst.parent)
    if src.parent != dst.parent:
        fsync_dir(src.parent)

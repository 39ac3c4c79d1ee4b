"""Moving a message or a topic: never over something, never through a symlink, durable.

``safe_move(src, dst)`` is the one move mailslot makes of something someone wrote (an archive
into ``done/`` and back, an outbox take and its undo, a peer message into ``processed/``):

* Never overwrites: on Linux it is ``renameat2(RENAME_NOREPLACE)``, which the kernel refuses
  atomically when ``dst`` exists (a plain ``rename`` silently replaces a file, or an empty
  directory, that arrived under the name since it was checked). Where that call is missing or the
  file system does not take the flag, a file is moved by ``link`` (refuses an existing name),
  then taken from its name by a ``rename`` to a private dot-name and unlinked there only if it is
  what was linked (a name swapped in between keeps what it holds); a directory, which cannot be
  linked, by a check then ``rename``.
* Never through a symlink: a symlink as ``src``, or as either parent directory, is refused
  (``SymlinkRefused``): a planted link must not carry a message out of its tree or move the link
  instead of what it names. Race-free: each parent is opened once (``O_DIRECTORY|O_NOFOLLOW``)
  and every later step -- the check, the rename, the fsync -- names the entry relative to that
  descriptor, so a parent swapped for a symlink after it was opened is never followed; and a
  rename never follows its last component, so a source swapped for a symlink after the check is
  moved as the link itself, never what it names.
* Exactly one of two racers moving the same source wins; the other gets ``FileNotFoundError``
  (the fallback's loser removes its second name again).
* Durable: both parent directories are fsync'd before it returns, so a crash after the move
  finds the name where the move put it -- unless the caller asks for ``durable=False`` (a claim
  whose loss only re-delivers, made durable after its output): the move is then as atomic, and
  a crash before the caller's ``fsync_dir`` finds the name in one of its two places.
* Killed at any instant (SIGKILL), it leaves the source or the destination whole: the rename is
  one step; the fallback's link leaves, at worst, the same file under both names (or under the
  destination and a private dot-name, ``.NAME.PID.RAND.moving``, that no reader takes).

What this cannot protect against: a directory moved by the fallback can still meet a directory
created under ``dst`` between the check and the rename (there is no atomic refusal without
``renameat2``); and only the last component of each parent is refused as a symlink -- a
symlink higher up (``ROOT`` itself on a symlinked home) is the caller's tree, and followed.
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


# A parent is opened as itself: ``O_NOFOLLOW`` refuses a symlink as its last component.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_parent(directory: Path) -> int:
    """A descriptor of ``directory`` itself; ``SymlinkRefused`` when it is a symlink."""
    try:
        return os.open(directory, _DIR_FLAGS)
    except OSError as e:
        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:
            mode = os.lstat(directory).st_mode
        except OSError:
            raise e from None
        # The open met a symlink (a directory found now was swapped back since): refused.
        if not (stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):
            raise
    raise SymlinkRefused(f"{directory} is a symlink; nothing moved through it", path=directory)


def _refuse_link(src: Path, src_fd: int) -> bool:
    """``SymlinkRefused`` for a symlink as ``src``; whether ``src`` is a directory."""
    mode = os.stat(src.name, dir_fd=src_fd, follow_symlinks=False).st_mode  # FileNotFoundError
    if stat.S_ISLNK(mode):
        raise SymlinkRefused(f"{src} is a symlink; a symlink is never moved", path=src)
    return stat.S_ISDIR(mode)


def _exists(dst: Path) -> Conflict:
    return Conflict(f"{dst} exists; a move never overwrites", path=dst)


def _rename_noreplace(src: Path, src_fd: int, dst: Path, dst_fd: int) -> bool:
    """``renameat2(RENAME_NOREPLACE)``; ``False`` when this system cannot (use the fallback)."""
    if _renameat2 is None:
        return False
    name, new = os.fsencode(src.name), os.fsencode(dst.name)
    if _renameat2(src_fd, name, dst_fd, new, _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_FLAG:
        return False
    if err == errno.EEXIST:
        raise _exists(dst)
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def _link_then_unlink(src: Path, src_fd: int, dst: Path, dst_fd: int) -> None:
    try:
        os.link(src.name, dst.name, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
    except FileExistsError:
        raise _exists(dst) from None
    linked = os.stat(dst.name, dir_fd=dst_fd, follow_symlinks=False)
    # The name may hold something else by now (swapped in since the link): take whatever it
    # holds under a private name, in one rename, and let it go only if it is what was linked.
    mine = f".{src.name}.{os.getpid()}.{os.urandom(4).hex()}.moving"
    try:
        os.rename(src.name, mine, src_dir_fd=src_fd, dst_dir_fd=src_fd)
    except FileNotFoundError:
        # A racer moved the source meanwhile: it won, so this name goes again.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dst.name, dir_fd=dst_fd)
        raise
    taken = os.stat(mine, dir_fd=src_fd, follow_symlinks=False)
    if (taken.st_dev, taken.st_ino) != (linked.st_dev, linked.st_ino):
        # What was linked (a link swapped in) stays moved as itself; what is here goes back.
        try:
            os.link(mine, src.name, src_dir_fd=src_fd, dst_dir_fd=src_fd, follow_symlinks=False)
        except FileExistsError:
            raise Conflict(
                f"{src} was replaced during the move; what it held is kept as {src.parent / mine}",
                path=src.parent / mine,
            ) from None
    os.unlink(mine, dir_fd=src_fd)


def _check_then_rename(src: Path, src_fd: int, dst: Path, dst_fd: int) -> None:
    try:
        os.stat(dst.name, dir_fd=dst_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(src.name, dst.name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        return
    raise _exists(dst)


def safe_move(src: Path, dst: Path, *, durable: bool = True) -> None:
    """Move ``src`` to ``dst`` (see the module docstring), both directories fsync'd (with
    ``durable=False``, neither: the caller fsyncs them when it needs to).

    Raises ``Conflict`` when ``dst`` exists, ``SymlinkRefused`` for a symlink as ``src`` or a
    parent, ``FileNotFoundError`` when ``src`` is gone (a racer moved it), ``OSError`` otherwise
    (across file systems: ``EXDEV``).
    """
    src, dst = Path(src), Path(dst)
    with contextlib.ExitStack() as fds:
        src_fd = _open_parent(src.parent)
        fds.callback(os.close, src_fd)
        dst_fd = src_fd
        if dst.parent != src.parent:
            dst_fd = _open_parent(dst.parent)
            fds.callback(os.close, dst_fd)
        is_dir = _refuse_link(src, src_fd)
        if not _rename_noreplace(src, src_fd, dst, dst_fd):
            if is_dir:
                _check_then_rename(src, src_fd, dst, dst_fd)
            else:
                _link_then_unlink(src, src_fd, dst, dst_fd)
        if not durable:
            return
        os.fsync(dst_fd)
        if dst_fd != src_fd:
            os.fsync(src_fd)

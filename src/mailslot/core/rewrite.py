"""Rewrite a hand-editable file atomically without dropping edits made by writers that take no lock.

Files people and agents also edit by hand (checklists, STATE.md) cannot be append-only, and the
hand editors take no lock. ``rewrite`` is a compare-and-swap against them:

* The edit is computed from the file's bytes, the new file is written to a dot-named temp and
  fsync'd, and it is renamed into place only if the file still holds exactly those bytes. If
  lines were only appended meanwhile (``echo ... >> file``), they are carried over into the new
  file; any other change starts the edit over on the new content.
* A writer that opened the old file just before the rename writes into the file we replaced.
  So after the rename we keep the old file open, wait until nobody else has it open for writing
  (a Linux read lease is granted only then; elsewhere, a grace period), read it once more, and if
  it grew or changed, redo the edit on its bytes plus whatever was appended to the new file
  since. Readers are not waited for; a writer is, up to ``SETTLE_MAX``: one descheduled between
  its ``open`` and its ``write`` on a loaded machine can stall for a second.
* The file is someone else's to write: it is opened without following a symlink (its target's
  bytes are never copied into the tree) or blocking on a FIFO, and one past ``REWRITE_MAX_BYTES``
  is refused whole, never read into memory.
* Callers serialise among themselves with ``lock``; the edit must be a pure function of the
  bytes (it may run several times).
* A fragment left by a ``locked_append`` killed mid-write is cut out first (``settle_appends``),
  so the rewrite never turns half a record into a line.

What remains: a writer that opens the old file and stalls longer than ``SETTLE_MAX`` before
writing; one whose ``open`` had looked the name up just before the rename but counts as an
opener only after the wait looked (microseconds); or an editor that saves a stale buffer later.
Nothing can see those.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
import stat
import time
from collections.abc import Callable
from pathlib import Path

from mailslot.core.errors import Conflict, FormatError, LimitExceeded, SymlinkRefused
from mailslot.core.fsio import (
    file_lock,
    fsync_dir,
    no_space,
    read_regular,
    settle_appends,
    write_all,
)

__all__ = ["REWRITE_ATTEMPTS", "REWRITE_MAX_BYTES", "Edit", "rewrite"]

Edit = Callable[[bytes], bytes]

# The largest file rewritten: a hand-edited checklist or state file is kilobytes, and a file
# someone made gigabytes long must be refused, not read into memory.
REWRITE_MAX_BYTES = 16 << 20
# A rewrite that keeps colliding with hand edits gives up (visibly) rather than spin.
REWRITE_ATTEMPTS = 20
# Appends carried over in one swap before starting over: people append a few lines, not a stream.
CATCH_UP_ROUNDS = 50
# How long to wait for writers still holding the replaced file open: an append takes
# microseconds, but a writer descheduled between its open and its write on a loaded machine may
# stall for a second or more. Readers (`tail -f` keeps the file open forever) are not waited for.
SETTLE_MAX = 10.0
# Without leases (not Linux, NFS, a file someone else owns): a fixed wait covers most stalls.
SETTLE_GRACE = 0.02


def _read_fd(fd: int, path: Path) -> bytes:
    """The file's bytes; ``LimitExceeded`` past ``REWRITE_MAX_BYTES`` (never more is read)."""
    chunks = []
    offset = 0
    while offset <= REWRITE_MAX_BYTES and (
        chunk := os.pread(fd, min(1 << 20, REWRITE_MAX_BYTES + 1 - offset), offset)
    ):
        chunks.append(chunk)
        offset += len(chunk)
    if offset > REWRITE_MAX_BYTES:
        raise LimitExceeded(path.name, REWRITE_MAX_BYTES, offset, "bytes", unread=True)
    return b"".join(chunks)


def _open_regular(path: Path) -> int:
    """A read-only descriptor of the regular file ``path`` itself: ``SymlinkRefused`` for a
    symlink (its target is not ours to copy into the tree), ``FormatError`` for a FIFO, device
    or directory (opened without blocking), ``LimitExceeded`` past ``REWRITE_MAX_BYTES``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SymlinkRefused(f"{path} is a symlink; it is not rewritten", path=path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError("not a regular file; nothing rewritten", path=path)
        if st.st_size > REWRITE_MAX_BYTES:
            raise LimitExceeded(path.name, REWRITE_MAX_BYTES, st.st_size, "bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _settle(fd: int) -> None:
    """Return once no other process holds the file behind ``fd`` open for writing, or
    ``SETTLE_MAX`` passed. ``fd`` is read-only: a read lease is granted exactly when nobody has
    the file open for writing, whoever reads it."""
    setlease = getattr(fcntl, "F_SETLEASE", None)
    if setlease is None:
        time.sleep(SETTLE_GRACE)
        return
    deadline = time.monotonic() + SETTLE_MAX
    while True:
        try:
            fcntl.fcntl(fd, setlease, fcntl.F_RDLCK)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EBUSY):
                time.sleep(SETTLE_GRACE)  # leases unsupported here
                return
            if time.monotonic() >= deadline:
                return  # a writer keeps it open (`exec 3>>file`): use what is there
            time.sleep(0.001)
            continue
        fcntl.fcntl(fd, setlease, fcntl.F_UNLCK)
        return


def _swap(
    path: Path, fd: int, source: bytes, current: bytes, after: bytes, edit: Edit
) -> tuple[bytes, bytes, bytes] | None:
    """Write ``after`` (``edit(source)``) to a temp file, rename it over ``path`` if that still
    holds ``current``, carrying over lines appended meanwhile. Returns what ``path`` held when
    it was replaced, what replaced it and the source that was edited (appends included), or
    ``None`` when the file changed in another way (the caller starts over)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    tfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(tfd, os.fstat(fd).st_mode & 0o7777)
        write_all(tfd, after)
        os.fsync(tfd)
        for _ in range(CATCH_UP_ROUNDS):
            try:
                now = read_regular(path, REWRITE_MAX_BYTES)
            except OSError:
                return None  # gone, grown past the bound, or no longer a file: start over
            if now == current:
                os.replace(tmp, path)
                return current, after, source
            tail = now[len(current) :]
            if not now.startswith(current) or edit(source + tail) != after + tail:
                return None  # not a plain append: redo the edit on the new content
            write_all(tfd, tail)  # someone appended: carry their lines over
            os.fsync(tfd)
            source, current, after = source + tail, now, after + tail
        return None
    finally:
        os.close(tfd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def rewrite(path: Path, edit: Edit, *, lock: Path) -> None:
    """Replace ``path`` with ``edit(its bytes)`` atomically, keeping concurrent hand edits.

    Raises ``Conflict`` after ``REWRITE_ATTEMPTS`` collisions, ``FileNotFoundError`` if ``path``
    is missing, ``SymlinkRefused`` for a symlink, ``FormatError`` for a FIFO, device or
    directory, ``LimitExceeded`` past ``REWRITE_MAX_BYTES``, ``NoSpace`` when the disk is full
    (``path`` is left as it was), and whatever ``edit`` raises (nothing is written then).
    """
    # After a write landed in a file we had replaced: the source to edit (ours plus theirs) and
    # what we had put in the file's place (anything after it was appended since).
    recovered: tuple[bytes, bytes] | None = None
    with file_lock(lock), no_space(path):
        settle_appends(path)  # a killed appender's fragment is cut out, not carried over
        for attempt in range(REWRITE_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, 0.002 * attempt))  # let a burst of edits pass
            fd = _open_regular(path)
            try:
                current = _read_fd(fd, path)
                source = current
                if recovered is not None and current.startswith(recovered[1]):
                    # the old file's late writes, then what was appended to ours since
                    source = recovered[0] + current[len(recovered[1]) :]
                recovered = None
                after = edit(source)
                if after == current:
                    return
                swapped = _swap(path, fd, source, current, after, edit)
                if swapped is None:
                    continue
                fsync_dir(path.parent)
                _settle(fd)
                replaced = _read_fd(fd, path)
                held, wrote, edited = swapped
                if replaced == held:
                    return
                # someone wrote into the old file during the swap: redo with their bytes too
                if replaced.startswith(held):
                    recovered = (edited + replaced[len(held) :], wrote)
                else:  # rewritten in place: their version is the new source
                    recovered = (replaced, wrote)
            finally:
                os.close(fd)
    raise Conflict(f"gave up after {REWRITE_ATTEMPTS} collisions with other edits", path=path)

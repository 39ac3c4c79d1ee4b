"""Store primitives: the only code in mailslot that writes message files.

Invariants, after cpython's ``mailbox.Maildir`` plus the directory fsync it skips:

* A created file is never half-visible: bytes go to a dot-named temp file in the same directory,
  are fsync'd, and appear under their final name by ``link`` (which refuses to overwrite), then the
  directory is fsync'd. Readers ignore dot-names, so a writer killed mid-write leaves nothing a
  reader can see. ``sweep_temps`` removes such leftovers.
* A created file never overwrites: an existing name is ``Conflict``, always.
* A payload too big to hold in memory is streamed into the same kind of temp
  (``stream_to_temp``) and published by ``publish_temp``: a writer killed mid-copy leaves only a
  dot-named temp, which no reader sees and ``sweep_temps`` removes once it is stale.
* Numbered names are claimed, not guessed: under an optional lock the next number is computed over
  every sibling directory, and the ``link`` still refuses a name someone took without the lock.
* Appends to a shared log hold ``flock``, write the whole record at the end, and cut the file back
  to where it was if the write or the fsync fails, so a failed append leaves nothing. Readers take
  the shared lock.
* A writer killed inside its append never leaves a record a reader takes as whole. Before the
  bytes go out it records its intent -- start offset, length, CRC of the record, and (up to
  ``INTENT_RECORD_MAX`` bytes) a copy of the record -- at the start of a small dot-named sidecar
  beside the file (``.<name>.intent``: a fixed-size line with its own CRC, then the copy, which
  that line's record CRC checks; so an intent torn by the same kill is recognisably invalid and
  cuts nothing), and drops it once the record is written (and fsync'd, when asked). The writer
  holds the exclusive ``flock`` while an intent is in the sidecar, so anyone who holds the lock
  and still finds a valid one knows its writer is gone -- no pids involved. A reader (shared
  lock) then delivers nothing at or past the intent's start unless the record there is whole
  (its CRC matches); the next appender (exclusive lock) repairs, and so does a reader that may
  write the file when nobody else holds the lock.
* The sidecar stays between appends when it is the file's twin: made by the file's owner, in the
  file's group, with the file's permission bits (so exactly whoever may write the file may write
  it, and whoever may read the file may read it). An appender drops its intent by overwriting the
  sidecar's first byte with a cleared mark (one byte, one system call: a kill leaves the intent
  whole or cleared), and the next appender writes its own over it: no file is created or removed
  per append (and a process keeps the sidecar open between its appends, using it only while the
  name still holds that very file). A sidecar that is empty or starts with the mark holds no
  intent; bytes past an intent and its copy are left from a longer one before it and mean nothing.
  An appender that finds the sidecar anything but a clear twin (a dead writer's intent, a torn
  one, one an older mailslot made for a single append, one made before the file's mode or group
  changed, none) settles what is there and makes the sidecar anew; one made by anyone but the
  file's owner is removed after its append, so nobody is left a sidecar others may not write. A
  sidecar holding no intent is left only by an appender, after any repair has ended, so an
  appender that finds a clear twin has nothing to settle and does not look for a repair plan.
* A repair moves only the fragment into ``<name>.torn`` and keeps everything appended after it
  without the lock (hand writers' ``>>``), in order and in place: the fragment is the longest
  prefix of the intended record found at its start, so a hand line glued to its partial last
  line is whole again. Before touching the file the repairer puts a plan in place
  (``.<name>.repair``: fragment and kept bytes, renamed in whole), so a repairer killed part-way
  leaves work the next one finishes, never losing or doubling the kept bytes or the ``.torn``
  entry; bytes appended while it runs are folded into the plan before the file is cut back.
  Without a copy of the record (a sidecar written before copies, or a record over the cap) the
  repair cannot tell the fragment from what followed it and moves both into ``.torn``.
  ``torn_of`` reports that file.
  A sidecar (or plan) is believed only if it names the file's own device and inode (a file
  replaced by a rename, or a sidecar carried along by a copy, is not the file it spoke of) and
  its owner could have written the file itself: in a shared directory anyone may create a
  dot-file, so a sidecar planted by a user without write access must never cut a committed
  record. An append (or a repair by ``settle_appends``) refuses a symlink in the file's place:
  a channel's files are written where they are, never through a link that may lead out of its
  tree. A reader may read through one: it resolves to the real name, so it finds the sidecar
  there. The sidecar takes the file's permission bits, so everyone who may read the file
  may read it.
  What this cannot protect: a writer that bypasses mailslot (a shell's ``flock f >> file``)
  records no intent, so its own torn write stays undetectable; an older mailslot, which takes a
  sidecar as valid only when it holds exactly one intent, ignores one written over a longer one;
  the sidecar is not fsync'd (that would double the fsyncs of every append), so it guards against
  a killed process, not against a power cut in the middle of an append; an unlocked ``>>`` landing
  in the few microseconds between the repair's last size check and its cut-back is lost (no system
  call cuts a file only if it has not grown); and a repairer killed after its cut-back, followed
  by hand bytes repeating exactly the last bytes it cut, loses those repeated bytes.
* Files someone else may have named are read bounded: ``read_regular`` and ``read_from`` refuse a
  FIFO, a device or a directory without blocking, and refuse (never truncate) more than their
  byte limit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import re
import stat
import threading
import time
import weakref
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from mailslot.core.errors import (
    Conflict,
    DirectoryFull,
    FormatError,
    LimitExceeded,
    LockBusy,
    NoSpace,
    NotFound,
    SymlinkRefused,
)
from mailslot.core.lockwait import wait_for

__all__ = [
    "READ_FROM_MAX",
    "HeldLock",
    "HeldReader",
    "Staged",
    "Torn",
    "append_unsynced",
    "atomic_create",
    "atomic_write",
    "create_many",
    "due",
    "file_lock",
    "fsync_dir",
    "fsync_dir_shared",
    "held_temp",
    "highest_number",
    "is_temp_name",
    "link_unnamed",
    "locked_append",
    "no_space",
    "numbered_create",
    "open_unnamed",
    "publish_temp",
    "read_from",
    "read_regular",
    "settle_appends",
    "stage_write",
    "stream_to_temp",
    "sweep_temps",
    "temp_in_use",
    "torn_of",
    "write_all",
    "written_ns",
]

# A temp file older than this belongs to a writer that died: a write takes milliseconds.
STALE_TEMP_SECONDS = 3600
_TEMP_RE = re.compile(r"^\..+\.[0-9]+\.[0-9a-f]{8}\.tmp$")
# The most ``read_from`` returns in one call: a chat, LOG.md or relay inbox this big is no longer
# a conversation, and a file named like one (a 3 GB log, a sparse file) must not be read whole.
READ_FROM_MAX = 64 << 20


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


@contextlib.contextmanager
def no_space(path: Path) -> Iterator[None]:
    """Turn a full disk or quota into ``NoSpace`` naming ``path``: a refusal the faces can name
    (507, exit 1). For writes that leave nothing behind when they fail."""
    try:
        yield
    except OSError as e:
        _raise_no_space(e, path)
        raise


def _raise_no_space(e: OSError, path: Path) -> None:
    """``NoSpace`` naming ``path`` when ``e`` is a full disk or quota (``no_space`` without a
    context manager, for the hottest path)."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        raise NoSpace(f"no space left to write {path.name}", path=path.parent) from None


def _temp_path(directory: Path, final_name: str) -> Path:
    """A fresh dot-named temp beside ``final_name``, in the form ``sweep_temps`` recognises."""
    return directory / f".{final_name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_unsynced(path: Path, data: bytes, *, mode: int = 0o666, fresh_line: bool = False) -> int:
    """Append ``data`` to ``path`` (created if missing) in one ``O_APPEND`` write, without fsync
    and without a lock (the caller serialises writers if it must); returns the file's size after.

    For records whose loss only repeats work (reader cursors): no new name, no rename, so it
    costs a few microseconds where a temp + rename costs a journal commit under load. A crash
    may leave the last record cut short; readers take only lines that end in a newline.
    ``OSError`` for a symlink, a FIFO or anything else not a regular file; ``NoSpace`` for a
    full disk (a record may be left cut short). ``fresh_line``: a
    file that does not end in a newline (its last record cut short) gets one first, so ``data``
    is not read as the tail of the cut record.
    """
    flags = os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    flags |= os.O_RDWR if fresh_line else os.O_WRONLY  # reading the last byte needs read access
    fd = os.open(path, flags, mode)  # O_NONBLOCK: a FIFO under the name cannot block the open
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if fresh_line and st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            data = b"\n" + data
        with no_space(path):
            write_all(fd, data)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of the regular file at ``path``; ``OSError`` for a symlink, a FIFO, a device,
    a directory, or a file over ``limit`` bytes.

    For files someone else wrote: ``O_NOFOLLOW | O_NONBLOCK`` and an ``fstat`` check mean a FIFO
    named like a message cannot block the reader, a device cannot feed it without end and a
    symlink cannot point it anywhere; it never reads past ``limit + 1`` bytes.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        left = limit + 1
        want = min(left, 65536)
        data = os.read(fd, want)
        # short of what was asked, at the size fstat gave: the end, no read to see (the common
        # small file: one read); else read on to the end or past ``limit``
        if data and not (len(data) < want and len(data) >= st.st_size):
            chunks = [data]
            left -= len(data)
            while left > 0:
                want = min(left, 65536)
                chunk = os.read(fd, want)
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
                if len(chunk) < want and limit + 1 - left >= st.st_size:
                    break
            data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    return data


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries durable (a created or renamed name survives a crash)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _DirSyncs:
    """The fsyncs of one directory, numbered in the order they begin (``fsync_dir_shared``)."""

    __slots__ = ("__weakref__", "begun", "cond", "ended", "error", "failed", "running")

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.begun = 0  # fsyncs begun
        self.ended = 0  # the last that ended, failed or not
        self.failed = 0  # the last that ended with an error
        self.error: OSError | None = None  # that one's error
        self.running = False


_dir_syncs: weakref.WeakValueDictionary[str, _DirSyncs] = weakref.WeakValueDictionary()
_dir_syncs_lock = threading.Lock()


def fsync_dir_shared(directory: Path) -> None:
    """``fsync_dir`` for concurrent writers: return once an fsync of ``directory`` that *began
    after this call* has ended (a group commit).

    A writer that linked a name and then calls this is exactly as durable as with its own
    ``fsync_dir``: the fsync that covers it began after its link. Writers that arrive while an
    fsync runs wait for it, then share the next one, so N concurrent links cost about two
    fsyncs, not N. ``OSError`` if any fsync begun after this call failed before it returns (every
    writer it covered gets the error): once an fsync failed, the kernel may have dropped what it
    was writing, so a later success proves nothing about this writer's link."""
    key = os.fspath(directory)
    with _dir_syncs_lock:
        syncs = _dir_syncs.get(key)
        if syncs is None:
            syncs = _dir_syncs[key] = _DirSyncs()
    with syncs.cond:
        needed = syncs.begun + 1  # one running now may have begun before our link
        while syncs.ended < needed:
            if syncs.running:
                syncs.cond.wait()
                continue
            syncs.running = True
            syncs.begun += 1
            number = syncs.begun
            error: OSError | None = None
            syncs.cond.release()
            try:
                fsync_dir(directory)
            except OSError as e:
                error = e
            except BaseException as e:
                error = OSError(errno.EIO, f"directory fsync interrupted: {e!r}", key)
                raise
            finally:
                syncs.cond.acquire()
                syncs.running = False
                syncs.ended = number
                if error is not None:
                    syncs.failed = number
                    syncs.error = error
                syncs.cond.notify_all()
        if syncs.failed < needed:
            return
        error = syncs.error or OSError(errno.EIO, "directory fsync failed", key)
        raise OSError(error.errno, error.strerror, key)


def _write_temp(
    directory: Path, final_name: str, data: bytes, mode: int, *, sync: bool = True
) -> Path:
    return stream_to_temp(directory, final_name, (data,), mode=mode, sync=sync)


def _locked_temp(directory: Path, final_name: str, mode: int) -> tuple[Path, int]:
    """A new dot-named temp beside ``final_name``, open and held under ``flock``: (path, fd)."""
    while True:
        tmp = _temp_path(directory, final_name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            return tmp, fd
        os.close(fd)  # swept in the instant before our lock: start again


def _fill(fd: int, chunks: Iterable[bytes], sync: bool) -> None:
    """Write every chunk to ``fd``, then fsync it when ``sync``."""
    for chunk in chunks:
        write_all(fd, chunk)
    if sync:
        os.fsync(fd)


def stream_to_temp(
    directory: Path,
    final_name: str,
    chunks: Iterable[bytes],
    *,
    mode: int = 0o666,
    sync: bool = True,
) -> Path:
    """Write ``chunks`` to a new dot-named temp in ``directory`` (named for ``final_name``, in
    the form ``sweep_temps`` removes), fsync'd; return its path.

    Readers ignore dot-names, so the temp is never taken for a message. If anything raises (the
    disk, or the caller's iterator refusing a limit) the temp is removed and the error raised.
    The writer holds ``flock`` on the temp while the bytes go in (a pipe may stall for hours):
    ``sweep_temps`` never removes a temp whose writer is alive; a killed writer's lock is gone.
    """
    tmp, fd = _locked_temp(Path(directory), final_name, mode)
    try:
        _fill(fd, chunks, sync)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


@contextlib.contextmanager
def held_temp(
    directory: Path,
    final_name: str,
    chunks: Iterable[bytes],
    *,
    mode: int = 0o666,
    sync: bool = True,
    what: str | None = None,
) -> Iterator[Path]:
    """``stream_to_temp`` whose writer keeps its lock on the temp until the block ends: publish
    it inside the block. Locked from creation to publication, such a temp is dead as soon as it
    is unlocked (``sweep_temps(held=...)`` removes it at once, whatever its age).

    A full disk is ``NoSpace`` naming ``what`` (default ``final_name``); the temp is removed
    when the block ends, published or not.
    """
    directory = Path(directory)
    with no_space(directory / (what or final_name)):
        tmp, fd = _locked_temp(directory, final_name, mode)
        try:
            _fill(fd, chunks, sync)
            yield tmp
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)  # gone already when published
            os.close(fd)


def publish_temp(tmp: Path, final: Path) -> Path:
    """Give the fsync'd temp ``tmp`` the name ``final`` (same directory), never replacing one.

    ``Conflict`` if ``final`` exists: the temp is kept, so the caller may try another name (and
    removes it when it gives up). On success the temp name is gone and the directory fsync'd.
    """
    with no_space(Path(final)):
        _link_into_place(Path(tmp), Path(final))
        fsync_dir(Path(final).parent)
    return Path(final)


def _link_into_place(tmp: Path, final: Path) -> None:
    """Publish ``tmp`` as ``final`` without ever replacing an existing ``final``."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise Conflict("already exists; mailslot never overwrites a message", path=final) from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A filesystem without hard links: reserve the name exclusively, then replace the
        # reservation. The name is claimed exactly once; it is briefly visible empty.
        try:
            os.close(os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise Conflict("already exists; mailslot never overwrites", path=final) from None
        os.replace(tmp, final)
        return
    os.unlink(tmp)


# What an O_TMPFILE open fails with where there is none (an old kernel, a filesystem without it),
# and what its link fails with where /proc or hard links are missing: use a named temp instead.
_NO_UNNAMED = (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL, errno.ENOENT)
_NO_LINK = (errno.ENOENT, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV)


def open_unnamed(directory: Path | str, mode: int = 0o666) -> int | None:
    """A descriptor, open for writing, of a new file with no name in ``directory`` (Linux
    ``O_TMPFILE``), which ``link_unnamed`` gives a name once it is whole; ``None`` where the
    system has no such files (an old kernel, a file system without them). Anything else the
    open meets (the directory missing, no permission) is raised."""
    unnamed = getattr(os, "O_TMPFILE", 0)
    if not unnamed:
        return None
    try:
        return os.open(directory, unnamed | os.O_WRONLY | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno in _NO_UNNAMED and os.path.isdir(directory):
            return None
        raise


def link_unnamed(fd: int, path: Path | str) -> bool:
    """Give the unnamed file open on ``fd`` (``open_unnamed``) the name ``path``, in one step:
    ``False`` (nothing done) where it cannot be linked here (no ``/proc``, no hard links,
    another file system); ``FileExistsError`` if ``path`` exists (never replaced)."""
    try:
        # linkat(AT_SYMLINK_FOLLOW) of the file's /proc name; that path is absolute, so the
        # descriptor given only makes Python call linkat rather than link
        os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=fd, follow_symlinks=True)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno in _NO_LINK:
            return False
        raise
    return True


def _create_unnamed(path: Path, data: bytes, mode: int) -> bool:
    """Create ``path`` from a file written and fsync'd with no name, then linked in whole: no
    temp name to create, lock and remove, and a writer killed before the link leaves nothing at
    all. ``False`` (nothing done) where the system cannot; ``Conflict`` if ``path`` exists."""
    fd = open_unnamed(path.parent, mode)
    if fd is None:
        return False
    try:
        write_all(fd, data)
        os.fsync(fd)
        try:
            return link_unnamed(fd, path)
        except FileExistsError:
            raise Conflict(
                "already exists; mailslot never overwrites a message", path=path
            ) from None
    finally:
        os.close(fd)


def atomic_create(
    path: Path, data: str | bytes, *, mode: int = 0o666, concurrent: bool = False
) -> Path:
    """Create ``path`` with ``data``, durable and all-or-nothing; ``Conflict`` if it exists.

    ``concurrent``: for a directory many writers create into at once (an inbox). The file is
    written unnamed where the system allows (``O_TMPFILE``) and the directory's fsync is shared
    with concurrent creators (``fsync_dir_shared``), each exactly as durable as alone."""
    path = Path(path)
    with no_space(path):
        if concurrent and _create_unnamed(path, _as_bytes(data), mode):
            fsync_dir_shared(path.parent)
            return path
        tmp = _write_temp(path.parent, path.name, _as_bytes(data), mode)
        try:
            _link_into_place(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        (fsync_dir_shared if concurrent else fsync_dir)(path.parent)
    return path


# From this many files (or directories) on, one ``syncfs`` flushes them all, instead of one
# fsync each: a group commit (measured under load here: 2,000 fsyncs at ~4 ms each).
SYNCFS_MIN = 8


def _syncfs(fd: int) -> bool:
    """Flush the whole filesystem holding ``fd`` and wait (Linux ``syncfs``); ``False`` where
    there is none, so the caller fsyncs each file instead. ``OSError`` when the flush fails."""
    global _libc_syncfs
    if _libc_syncfs is None:
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            _libc_syncfs = libc.syncfs
        except (OSError, AttributeError, TypeError):
            _libc_syncfs = False
    if _libc_syncfs is False:
        return False
    if _libc_syncfs(fd) != 0:  # type: ignore[operator]
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return True


_libc_syncfs: object = None


def create_many(items: Sequence[tuple[Path, bytes, int]]) -> list[bool]:
    """``atomic_create`` for many files at once, the syncs batched: every temp is written and
    made durable (one ``syncfs`` for a batch of ``SYNCFS_MIN`` or more, else an fsync each),
    then each is linked into place (never over an existing name), then the directories are made
    durable the same way. Per item ``True`` (created) or ``False`` (the name exists: left as
    it was).

    When it returns every created file is durable. If it raises, no temp is left; files linked
    before the failure stay (each whole), and the caller may retry the batch (they are ``False``
    then).
    """
    temps: list[tuple[Path, int]] = []
    created: list[bool] = []
    try:
        for path, data, mode in items:
            with no_space(path):
                tmp, fd = _locked_temp(Path(path).parent, Path(path).name, mode)
                temps.append((tmp, fd))
                _fill(fd, (data,), sync=False)
        if len(temps) < SYNCFS_MIN or not _syncfs(temps[0][1]):
            for _, fd in temps:
                os.fsync(fd)
        for (path, _, _), (tmp, _) in zip(items, temps, strict=True):
            try:
                with no_space(Path(path)):
                    _link_into_place(tmp, Path(path))
                created.append(True)
            except Conflict:
                created.append(False)
        dirs = {Path(p).parent for (p, _, _), new in zip(items, created, strict=True) if new}
        if len(dirs) < SYNCFS_MIN or not _syncfs(temps[0][1]):
            for directory in dirs:
                fsync_dir(directory)
    finally:
        for tmp, fd in temps:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return created


def _replace(tmp: Path, path: Path) -> None:
    """``os.replace(tmp, path)``; a directory at ``path`` is an error naming ``path`` (the
    rename's own error names the hidden temp, which nobody asked to write)."""
    try:
        os.replace(tmp, path)
    except IsADirectoryError:
        raise IsADirectoryError(
            errno.EISDIR, "is a directory where a file belongs; nothing written", str(path)
        ) from None


def atomic_write(path: Path, data: str | bytes, *, mode: int = 0o666, durable: bool = True) -> Path:
    """Create or replace ``path`` atomically and durably (state files, never messages).

    ``durable=False`` skips both fsyncs: still all-or-nothing for readers, but a crash may bring
    back the previous version. For state whose loss only repeats work (a reader cursor: the safe
    direction is re-delivery), on a hot path where two fsyncs would dominate.
    """
    path = Path(path)
    with no_space(path):
        tmp = _write_temp(path.parent, path.name, _as_bytes(data), mode, sync=durable)
        try:
            _replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if durable:
            fsync_dir(path.parent)
    return path


class Staged(NamedTuple):
    """A replacement for ``final`` written and fsync'd aside, not yet in place (``stage_write``)."""

    tmp: Path
    final: Path

    def commit(self) -> None:
        """Put it in place, durably (a rename: needs no free space)."""
        _replace(self.tmp, self.final)
        fsync_dir(self.final.parent)

    def discard(self) -> None:
        """Remove it; ``final`` stays as it was."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)


def stage_write(path: Path, data: str | bytes, *, mode: int = 0o666) -> Staged:
    """Write ``data`` aside for ``path`` so that it can replace it later with ``commit``.

    For state that must change together with an append: stage the state first (where a full disk
    fails, nothing is written yet), append, then commit -- or discard if the append failed.
    """
    path = Path(path)
    with no_space(path):
        return Staged(_write_temp(path.parent, path.name, _as_bytes(data), mode), path)


def highest_number(directories: Iterable[Path], width: int = 4, *, longer: bool = False) -> int:
    """The highest ``N`` of any ``N-...`` name (``width`` ASCII digits) in ``directories``; 0 if
    none. With ``longer``, numbers of more than ``width`` digits (not zero-padded) count too: a
    numbering with no last number, which pads to ``width`` and goes on past it.

    The numbers are zero-padded to one width, so the highest is the greatest such prefix as a
    string (by length first, with ``longer``): each name costs a slice and a comparison (a
    folder that keeps every item ever taken is listed whole on each put), and only a new best
    is checked for digits.
    """
    best = ""
    for directory in directories:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            continue
        for name in names:
            if longer:  # a wider number is higher, unless padded past ``width`` (never made so)
                dash = name.find("-", width)
                if dash < len(best) or (dash > width and name[0] == "0"):
                    continue
                head = name[:dash]
                if dash == len(best) and head <= best:
                    continue
            else:
                head = name[:width]
                if head <= best or name[width : width + 1] != "-":
                    continue
            if head.isascii() and head.isdigit():
                best = head
    return int(best) if best else 0


@contextlib.contextmanager
def file_lock(
    path: Path,
    *,
    shared: bool = False,
    blocking: bool = True,
    timeout: float | None = None,
    busy: str | None = None,
) -> Iterator[int]:
    """Hold ``flock`` on ``path`` (created if it can be; a read-only file locks too; ``OSError``
    for a symlink, a FIFO or anything else that is not a regular file).

    ``flock`` works on a descriptor opened read-only, so two sides that may each write only their
    own folder can still serialise on a lock file both can read. Raises ``LockBusy`` when
    ``blocking`` is false and someone else holds it, or when ``timeout`` seconds pass while
    someone else holds it (a lock another party can take must not hang this one forever; the
    wait is ``lockwait.wait_for``'s, and ``busy`` is what the error says then).
    """
    # O_NOFOLLOW: a symlink planted under the lock's name must not make this create or lock a
    # file elsewhere; O_NONBLOCK: a FIFO under it must not block the open (read-only, it waits
    # for a writer that never comes). Neither is a lock file: refused.
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o666)
    except PermissionError:
        fd = os.open(path, os.O_RDONLY | flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file, so not a lock file", str(path))
        op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if blocking and timeout is None:
            fcntl.flock(fd, op)
        else:

            def take() -> bool:
                try:
                    fcntl.flock(fd, op | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                return True

            if not wait_for(take, timeout if blocking else 0):
                if not blocking:
                    raise LockBusy(busy or "held by another process", path=path)
                raise LockBusy(
                    busy or f"held by another process for over {timeout:g}s; is a writer stuck?",
                    path=path,
                )
        yield fd
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class HeldLock:
    """``file_lock``'s exclusive lock for a process that takes it again and again (a watcher
    taking one delivery after another): the lock file is opened once and kept open, and each
    ``with`` only ``flock``s and unlocks it, which another process's ``file_lock`` (or
    ``HeldLock``) on the same name excludes as before.

    A lock file is only a lock while its name names it: once the lock is taken, the name is
    looked at (``lstat``), and if it names another file or none (removed, replaced, moved aside),
    the file held is let go and the name opened (or made) again and locked, so this one and a
    process that opens the name lock the same file. ``OSError`` as ``file_lock`` raises it
    (a symlink, a FIFO, anything but a regular file under the name). ``close`` lets it go.
    """

    __slots__ = ("_fd", "_ident", "_where", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._where = str(path)  # ``path`` for the ``lstat`` of every take: no ``pathlib`` call
        self._fd = -1
        self._ident = (0, 0)  # (device, inode) of the file held open

    def _open(self) -> None:
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | flags, 0o666)
        except PermissionError:
            fd = os.open(self.path, os.O_RDONLY | flags)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file, so not a lock file", str(self.path))
        self._fd, self._ident = fd, (st.st_dev, st.st_ino)

    def __enter__(self) -> int:
        while True:
            if self._fd < 0:
                self._open()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                st = os.lstat(self._where)
            except FileNotFoundError:
                st = None
            except BaseException:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                raise
            if st is not None and (st.st_dev, st.st_ino) == self._ident:
                return self._fd
            self.close()  # not the file the name names: that one is opened and locked

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Let the file go (and the lock with it, if held)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def numbered_create(
    directory: Path,
    suffix: str,
    data: str | bytes,
    *,
    siblings: Iterable[Path] = (),
    lock: Path | None = None,
    width: int = 4,
    mode: int = 0o666,
    lock_wait: float | None = None,
) -> tuple[int, Path]:
    """Create ``directory/NNNN-suffix`` with the next number free across ``siblings`` too.

    Returns ``(number, path)``. Numbers are never reused and names never overwritten: the number
    is computed under ``lock`` and the final ``link`` still refuses a taken name, moving on to the
    next number, so writers that skip the lock cannot make this one overwrite. ``lock_wait``
    bounds the wait for ``lock`` (``LockBusy`` past it; ``None`` waits as long as it takes).
    """
    directory = Path(directory)
    scan = [directory, *siblings]
    raw = _as_bytes(data)
    limit = 10**width - 1
    held = file_lock(lock, timeout=lock_wait) if lock is not None else contextlib.nullcontext()
    with held:
        number = highest_number(scan, width) + 1
        with no_space(directory / f"{'N' * width}-{suffix}"):
            tmp = _write_temp(directory, f"new-{suffix}", raw, mode)
        try:
            while True:
                if number > limit:
                    raise DirectoryFull(f"no numbers left ({limit} used)", path=directory)
                final = directory / f"{number:0{width}d}-{suffix}"
                try:
                    _link_into_place(tmp, final)
                except Conflict:
                    number += 1
                    continue
                break
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        fsync_dir(directory)
    return number, final


class Torn(NamedTuple):
    """The ``<name>.torn`` file beside an append-only file: fragments of killed appends."""

    path: Path
    size: int

    def to_json(self) -> dict[str, object]:
        """``{"path", "size"}``."""
        return {"path": str(self.path), "size": self.size}


def _real(path: Path) -> Path:
    """``path`` with every symlink resolved: a file reached through a symlink keeps its sidecar
    and ``.torn`` beside its real name, so every spelling of it finds the same ones."""
    return Path(os.path.realpath(path))


def _open_real(path: Path, flags: int, mode: int = 0o666) -> tuple[int, Path]:
    """Open ``path``; return the descriptor and the name its sidecar goes beside: ``path``
    itself, or its real name when ``path`` is a symlink (resolved only then: cheap when not)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode), path
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
    real = _real(path)
    return os.open(real, flags, mode), real


def _sidecar_name(path: Path, suffix: str) -> str:
    """``.<name><suffix>`` beside ``path``, as a string: built on every append and read, where
    a ``Path`` would cost more than the system calls it is for."""
    full = os.fspath(path)
    cut = full.rfind("/") + 1  # a Path never ends in "/"; a bare name has none
    return f"{full[:cut]}.{full[cut:]}{suffix}"


def _intent_path(path: Path) -> str:
    return _sidecar_name(path, ".intent")


def _torn_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.torn")


def torn_of(path: Path) -> Torn | None:
    """The fragments file of ``path`` (bytes of appends whose writer was killed), or ``None``."""
    torn = _torn_path(_real(path))
    try:
        st = os.lstat(torn)
    except FileNotFoundError:
        return None
    return Torn(torn, st.st_size)


class _Intent(NamedTuple):
    """What an appender is about to write into the file ``(dev, ino)``: ``length`` bytes at
    ``start`` with CRC ``crc``; ``record`` is a copy of those bytes when the sidecar carries one
    (records up to ``INTENT_RECORD_MAX`` bytes), else ``None``."""

    dev: int
    ino: int
    start: int
    length: int
    crc: int
    record: bytes | None = None

    def encode(self) -> bytes:
        return _encode_intent(*self)


def _encode_intent(
    dev: int, ino: int, start: int, length: int, crc: int, record: bytes | None
) -> bytes:
    """``_Intent.encode`` without the tuple (an append's hottest line)."""
    if record is None:
        body = b"mailslot-intent %016x %016x %016x %016x %08x" % (dev, ino, start, length, crc)
        return body + b" %08x\n" % zlib.crc32(body)
    body = b"mailslot-intent2 %016x %016x %016x %016x %08x" % (dev, ino, start, length, crc)
    return body + b" %08x\n" % zlib.crc32(body) + record


# An intent is dropped by overwriting its first byte with this mark; a sidecar that is empty or
# starts with it holds no intent.
_CLEARED = b"-"
_NO_INTENT = (b"", _CLEARED)
# Records up to this size travel in their sidecar, so a repair knows exactly which bytes are the
# fragment and keeps whatever was appended after it; a bigger record's repair moves everything
# from its start into ``.torn`` (it cannot tell the fragment from what followed it).
INTENT_RECORD_MAX = 256 << 10
# The longest intent header (a record's copy follows it).
_INTENT_HEAD = len(_Intent(0, 0, 0, 0, 0, b"").encode())
# Sidecar patterns are compiled on first use (by ``re``'s cache): most processes never read one.
_INTENT_PATTERN = (
    rb"^(mailslot-intent(2?) ([0-9a-f]{16}) ([0-9a-f]{16}) ([0-9a-f]{16}) ([0-9a-f]{16})"
    rb" ([0-9a-f]{8})) ([0-9a-f]{8})\n"
)


def _cut_path(path: Path) -> str:
    return _sidecar_name(path, ".repair")


class _Cut(NamedTuple):
    """A repair's plan (``.<name>.repair``): the file ``(dev, ino)`` becomes its bytes before
    ``start``, then ``tail``; ``fragment`` -- the dead writer's bytes at ``start`` -- goes into
    ``.torn`` under a header stamped ``stamp``. Put in place whole (a rename) before the file is
    touched, so a repairer killed part-way leaves a plan the next one finishes."""

    dev: int
    ino: int
    start: int
    stamp: str
    fragment: bytes
    tail: bytes

    def encode(self) -> bytes:
        body = b"mailslot-repair %016x %016x %016x %016x %016x %s" % (
            self.dev,
            self.ino,
            self.start,
            len(self.fragment),
            len(self.tail),
            self.stamp.encode(),
        )
        crc = zlib.crc32(self.tail, zlib.crc32(self.fragment, zlib.crc32(body)))
        return body + b" %08x\n" % crc + self.fragment + self.tail


_CUT_PATTERN = (
    rb"^(mailslot-repair ([0-9a-f]{16}) ([0-9a-f]{16}) ([0-9a-f]{16}) ([0-9a-f]{16})"
    rb" ([0-9a-f]{16}) ([0-9]{1,20}\.[0-9]{3})) ([0-9a-f]{8})\n"
)


def _open_sidecar(sidecar: str, file_st: os.stat_result) -> tuple[int, int] | bool | None:
    """``sidecar`` (an intent or a repair plan) kept beside the file whose status is
    ``file_st``, open for reading: ``(fd, size)``; ``None`` when there is none; ``False`` when
    it is not to be believed: unreadable, something other than a regular file, or written by a
    user who could not write the file itself."""
    try:
        fd = os.open(sidecar, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and _could_write(st.st_uid, file_st):
            return fd, st.st_size
    except OSError:
        pass
    os.close(fd)
    return False


def _read_sidecar(sidecar: str, file_st: os.stat_result, limit: int) -> bytes | bool | None:
    """The bytes of ``sidecar`` (as ``_open_sidecar``); ``False`` also when it is longer than
    ``limit``."""
    opened = _open_sidecar(sidecar, file_st)
    if not isinstance(opened, tuple):
        return opened
    fd, size = opened
    try:
        return _pread_all(fd, size, 0) if size <= limit else False
    except OSError:
        return False
    finally:
        os.close(fd)


def _read_cut(plan: str, file_st: os.stat_result) -> _Cut | bool | None:
    """The repair plan in ``plan`` for the file whose status is ``file_st``; ``None`` when there
    is none; ``False`` when it is not to be believed (as ``_read_intent``)."""
    raw = _read_sidecar(plan, file_st, 256 + INTENT_RECORD_MAX + READ_FROM_MAX)
    if not isinstance(raw, bytes):
        return raw
    m = re.match(_CUT_PATTERN, raw)
    if m is None:
        return False
    dev, ino, start, k, n = (int(m[i], 16) for i in range(2, 7))
    rest = raw[m.end() :]
    crc = zlib.crc32(rest, zlib.crc32(m[1]))
    if len(rest) != k + n or crc != int(m[8], 16) or k == 0:
        return False
    if (dev, ino) != (file_st.st_dev, file_st.st_ino):
        return False
    return _Cut(dev, ino, start, m[7].decode(), rest[:k], rest[k:])


def _write_cut(path: Path, cut: _Cut, mode: int) -> None:
    """Put the plan ``cut`` in place whole and durably (a fsync'd temp renamed over the old)."""
    plan = Path(_cut_path(path))
    tmp = _write_temp(plan.parent, plan.name, cut.encode(), stat.S_IMODE(mode) & 0o666)
    try:
        os.replace(tmp, plan)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(plan.parent)


def _could_write(uid: int, st: os.stat_result) -> bool:
    """Whether user ``uid`` may write the file whose status is ``st``: its owner, root, this
    process's user, or anyone its mode lets write it."""
    if uid in (0, st.st_uid, os.geteuid()) or st.st_mode & stat.S_IWOTH:
        return True
    if not st.st_mode & stat.S_IWGRP:
        return False
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        return False
    return st.st_gid in os.getgrouplist(user.pw_name, user.pw_gid)


def _read_intent(sidecar: str, file_st: os.stat_result) -> _Intent | bool | None:
    """The intent in ``sidecar`` for the file whose status is ``file_st``; ``None`` when there is
    none; ``False`` when it is not to be believed: torn by a kill before its record's first byte,
    something else under its name, an intent for another file (one since replaced by a rename,
    or a sidecar copied from elsewhere), or planted by a user who could not write the file
    itself (in a shared directory anyone may create a dot-file; only a writer may cut).
    A sidecar that is empty or cleared holds none. Bytes past the intent (and its copy of the
    record) are what is left of a longer intent written there before: they mean nothing."""
    opened = _open_sidecar(sidecar, file_st)
    if not isinstance(opened, tuple):
        return opened
    fd, size = opened
    try:
        head = os.pread(fd, _INTENT_HEAD, 0)
        if head[:1] in _NO_INTENT:
            return None
        m = re.match(_INTENT_PATTERN, head)
        if m is None or zlib.crc32(m[1]) != int(m[8], 16):
            return False
        dev, ino, start, length, crc = (int(m[i], 16) for i in range(3, 8))
        record = None
        if m[2]:  # the record travels with it: torn by a kill before its record's first byte
            if length > INTENT_RECORD_MAX or size < m.end() + length:
                return False
            record = _pread_all(fd, length, m.end())
            if len(record) != length or zlib.crc32(record) != crc:  # went out, if not whole
                return False
    except OSError:
        return False
    finally:
        os.close(fd)
    if (dev, ino) != (file_st.st_dev, file_st.st_ino):
        return False
    return _Intent(dev, ino, start, length, crc, record)


def _record_whole(fd: int, intent: _Intent, size: int) -> bool:
    """Whether the bytes at the intent's place are the record it announced, all of them."""
    if size < intent.start + intent.length:
        return False
    crc = 0
    pos, left = intent.start, intent.length
    while left > 0:
        chunk = os.pread(fd, min(left, 1 << 20), pos)
        if not chunk:
            return False
        crc = zlib.crc32(chunk, crc)
        pos += len(chunk)
        left -= len(chunk)
    return crc == intent.crc


def _visible_end(path: Path, fd: int, size: int) -> int:
    """Where what a reader may take ends: ``size``, or the start of a dead writer's torn record.

    Called under a lock: while anyone holds one, no live mailslot writer owns the sidecar.
    """
    intent = _read_intent(_intent_path(path), os.fstat(fd))
    if not isinstance(intent, _Intent) or intent.start >= size:
        return size
    return size if _record_whole(fd, intent, size) else intent.start


def _repair(path: Path, fd: int) -> os.stat_result:
    """Under the exclusive lock: settle what a killed appender left (see the module docstring).
    Returns the file's status once settled."""
    st = os.fstat(fd)
    plan = _cut_path(path)
    cut = _read_cut(plan, st)
    if cut is False:  # not one of ours, or not for this file: it changes nothing
        with contextlib.suppress(FileNotFoundError):
            os.unlink(plan)
        cut = None
    sidecar = _intent_path(path)
    if cut is None:
        intent = _read_intent(sidecar, st)
        if intent is None:
            return st
        if isinstance(intent, _Intent):
            cut = _plan_cut(path, fd, intent)
    if isinstance(cut, _Cut):
        _finish_cut(path, fd, cut)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sidecar)  # before the plan: a plan alone finds its cut made and ends
    with contextlib.suppress(FileNotFoundError):
        os.unlink(plan)
    return os.fstat(fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """Write every byte of ``data`` to ``fd`` at ``offset`` (``os.pwrite`` may write fewer)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _pread_all(fd: int, length: int, offset: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, min(length, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _plan_cut(path: Path, fd: int, intent: _Intent) -> _Cut | None:
    """What to cut for the dead writer's ``intent``: ``None`` when nothing is (its record is
    whole, or none of it went out). Without a copy of the record (an old sidecar, or a record
    over ``INTENT_RECORD_MAX``) everything from its start goes to ``.torn`` here and now."""
    st = os.fstat(fd)
    size = st.st_size
    if intent.start >= size or _record_whole(fd, intent, size):
        return None
    record = intent.record
    if record is not None:
        fragment = record[: _common_prefix(_pread_all(fd, len(record), intent.start), record)]
        if not fragment:
            return None  # none of the record went out: what is there was written by others
        tail_len = size - intent.start - len(fragment)
        if tail_len <= READ_FROM_MAX:
            tail = _pread_all(fd, tail_len, intent.start + len(fragment))
            cut = _Cut(st.st_dev, st.st_ino, intent.start, f"{time.time():.3f}", fragment, tail)
            _write_cut(path, cut, st.st_mode)
            return cut
    _keep_fragment(path, fd, intent.start, size)
    os.ftruncate(fd, intent.start)
    os.fsync(fd)
    return None


def _finish_cut(path: Path, fd: int, cut: _Cut) -> None:
    """Carry out ``cut`` (also one a killed repairer began): the fragment into ``.torn`` once,
    then the file cut back to the fragment's start followed by everything after the fragment --
    including what was appended without a lock while this ran."""
    _keep_once(path, cut)
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_APPEND)  # pwrite means its offset
    try:
        while True:
            k = len(cut.fragment)
            keep_end = cut.start + len(cut.tail)
            end = keep_end + k
            size = os.fstat(fd).st_size
            # The bytes past ``keep_end`` are untouched until the cut: if they are gone, the cut
            # was made (by a repairer killed before it could remove its plan).
            if size < end or os.pread(fd, k, keep_end) != (cut.fragment + cut.tail)[-k:]:
                break
            if size > end:  # appended since the plan: kept as well, planned before moved
                more = _pread_all(fd, size - end, end)
                cut = _Cut(cut.dev, cut.ino, cut.start, cut.stamp, cut.fragment, cut.tail + more)
                _write_cut(path, cut, os.fstat(fd).st_mode)
                continue
            pos = 0
            while pos < len(cut.tail):
                pos += os.pwrite(fd, cut.tail[pos : pos + (1 << 20)], cut.start + pos)
            if os.fstat(fd).st_size != end:
                continue  # someone appended while the tail moved: fold it in first
            os.ftruncate(fd, keep_end)
            break
        os.fsync(fd)
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _keep_once(path: Path, cut: _Cut) -> None:
    """Append the fragment's entry to ``<name>.torn`` durably, unless it already ends with it."""
    k = len(cut.fragment)
    header = (
        f"--- torn append: bytes {cut.start}..{cut.start + k} of {path.name}, cut at {cut.stamp}\n"
    )
    entry = header.encode() + cut.fragment + b"\n"
    out = os.open(
        _torn_path(path),
        os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        0o666,
    )
    try:
        size = os.fstat(out).st_size
        if size >= len(entry) and os.pread(out, len(entry), size - len(entry)) == entry:
            return
        write_all(out, entry)
        os.fsync(out)
    finally:
        os.close(out)


def _keep_fragment(path: Path, fd: int, start: int, end: int) -> None:
    """Append bytes ``start..end`` of ``path`` to ``<name>.torn`` with a header, durably."""
    header = f"--- torn append: bytes {start}..{end} of {path.name}, cut at {time.time():.3f}\n"
    out = os.open(
        _torn_path(path),
        os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        0o666,
    )
    try:
        write_all(out, header.encode())
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(end - pos, 1 << 20), pos)
            if not chunk:
                break
            write_all(out, chunk)
            pos += len(chunk)
        write_all(out, b"\n")
        os.fsync(out)
    finally:
        os.close(out)


class _HeldSidecar:
    """An intent sidecar kept open between uses -- by an appender between its appends, by a
    ``HeldReader`` between its reads -- and believed only while its name still holds that very
    file: an ``lstat`` of the name and a ``pread`` of its first byte (``clear_at``) stand for an
    open, a read and a close."""

    __slots__ = ("dev", "fd", "ino", "path")

    def __init__(self, path: str, fd: int, st: os.stat_result) -> None:
        self.path, self.fd, self.dev, self.ino = path, fd, st.st_dev, st.st_ino

    def clear_at(self, st: os.stat_result) -> bool:
        """Whether ``st``, what an ``lstat`` of the sidecar's name found, is this very file and
        it holds no intent: it is empty or starts with the cleared mark, whoever wrote it
        (``OSError`` from the read)."""
        return (
            st.st_ino == self.ino
            and st.st_dev == self.dev
            and os.pread(self.fd, 1, 0) in _NO_INTENT
        )

    def close(self) -> None:
        os.close(self.fd)


# Kept sidecars this process has open, by the name of their file. An entry is taken out while
# its append runs (so two threads never share one), checked against what the sidecar's name
# holds now, and put back after; at most ``_HELD_SIDECARS`` stay open.
_held_sidecars: dict[str, _HeldSidecar] = {}
_HELD_SIDECARS = 16


def _is_twin(st: os.stat_result, file_st: os.stat_result) -> bool:
    """Whether the sidecar whose status is ``st`` is the file's twin: a regular file with one
    link, of the file's owner, group and permission bits."""
    return (
        st.st_nlink == 1
        and st.st_mode == stat.S_IFREG | (file_st.st_mode & 0o666)
        and st.st_uid == file_st.st_uid
        and st.st_gid == file_st.st_gid
    )


def _reusable_sidecar(
    sidecar: str, file_st: os.stat_result, held: _HeldSidecar | None
) -> _HeldSidecar | bool | None:
    """The sidecar, held open for writing, when it may take this append's intent in place;
    ``False`` when it may not, ``None`` when there is none.

    It may when it holds no intent (it is empty or starts with the cleared mark) and is the
    file's twin (``_is_twin``) -- so exactly whoever may write the file may write it, and
    whoever may read the file may read it. A sidecar that is anything else (a dead writer's
    intent, a torn one, one left by an older mailslot, one planted, one whose file was since
    chmod'ed) goes through ``_repair`` and is made anew. One this process holds open (``held``,
    taken out of ``_held_sidecars``) is used when the name still holds that very file (one
    ``lstat`` instead of an open and a close)."""
    if held is not None:
        try:
            st = os.lstat(sidecar)
            if held.clear_at(st) and _is_twin(st, file_st):
                return held
        except OSError:
            pass
        held.close()
    try:
        fd = os.open(sidecar, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if _is_twin(st, file_st):
            side = _HeldSidecar(sidecar, fd, st)
            if side.clear_at(st):
                return side
    except OSError:
        pass  # unreadable: settled and made anew (``_repair`` says what it cannot do)
    os.close(fd)
    return False


def _hold_sidecar(name: str, side: _HeldSidecar) -> None:
    """Keep the kept sidecar ``side`` of the file ``name`` open for this process's next append
    to it."""
    if len(_held_sidecars) >= _HELD_SIDECARS:
        with contextlib.suppress(KeyError):
            _held_sidecars.popitem()[1].close()
    old = _held_sidecars.pop(name, None)  # another thread's, put back meanwhile
    if old is not None:
        old.close()
    _held_sidecars[name] = side


def _new_sidecar(sidecar: str, file_st: os.stat_result) -> tuple[_HeldSidecar, bool]:
    """Create ``sidecar`` empty, readable by exactly whoever may read the file (its mode and
    group, whoever writes it: a reader who cannot read the sidecar could not tell a torn record
    from a whole one, whatever this writer's umask and group); return it held open, and
    ``kept``: whether it is the file's twin (made by the file's owner, in the file's group), so
    it stays between appends, cleared; any other writer's sidecar is removed after its append,
    so nobody is left a sidecar they may not write."""
    side = os.open(
        sidecar,
        os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        0o600,
    )
    try:
        os.fchmod(side, stat.S_IMODE(file_st.st_mode) & 0o666)
        kept = os.geteuid() == file_st.st_uid
        st = os.fstat(side)
        if st.st_gid != file_st.st_gid:  # any writer: a reader in the file's group must read it
            try:
                os.fchown(side, -1, file_st.st_gid)
            except PermissionError:
                kept = False
    except BaseException:
        os.close(side)
        with contextlib.suppress(OSError):
            os.unlink(sidecar)
        raise
    return _HeldSidecar(sidecar, side, st), kept


def _drop_intent(side: _HeldSidecar, kept: bool) -> None:
    """Say "no intent" in the sidecar ``side``: when it stays, overwrite its first byte with the
    cleared mark (one byte in one system call: a kill leaves the intent whole or cleared, never
    half; its block stays, where emptying it would free it and the next intent allocate it
    again); else remove it."""
    if kept:
        os.pwrite(side.fd, _CLEARED, 0)
    else:
        os.unlink(side.path)


def _require_regular(fd: int, path: Path) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise FormatError(
            "not a regular file (a FIFO, device or directory); nothing read", path=path
        )
    return st


def settle_appends(path: Path) -> None:
    """Cut out what an appender killed mid-write left in ``path`` (into ``<name>.torn``).

    For code about to rewrite ``path`` whole (a checklist edit): the fragment must go before its
    bytes are carried into a new file, where the intent's offset would no longer mean anything.
    Takes the exclusive ``flock``; a missing file, or a symlink in its place (never appended
    through, so nothing to settle), is left to the caller.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as e:
        if e.errno == errno.ELOOP:
            return
        raise
    try:
        _require_regular(fd, path)
        fcntl.flock(fd, fcntl.LOCK_EX)
        _repair(path, fd)
    finally:
        os.close(fd)


_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def locked_append(path: Path, data: str | bytes, *, fsync: bool = False) -> int:
    """Append one whole record to ``path`` under ``flock``; return the offset it starts at.

    The record's intent is in the sidecar while its bytes go out, so a writer killed part-way
    leaves nothing a reader delivers and the next append cuts the fragment out into
    ``<name>.torn``. If the write or the fsync fails the file is cut back to its old length:
    ``NoSpace`` (a full disk) or another ``OSError`` means nothing was appended. ``FormatError``
    if ``path`` is not a regular file; ``SymlinkRefused`` (naming it) if it is a symlink: a
    channel's files are written where they are, never through a link that may lead anywhere
    (one planted in a shared directory, or committed to a tree someone checks out).
    """
    raw = _as_bytes(data)
    if not isinstance(path, Path):
        path = Path(path)
    try:
        fd = os.open(path, _APPEND_FLAGS, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP and os.path.islink(path):
            raise SymlinkRefused(
                f"{path} is a symlink; nothing is appended through it", path=path
            ) from None
        raise
    try:
        return _append_whole(path, fd, raw, fsync)
    except OSError as e:
        _raise_no_space(e, path)
        raise
    finally:
        os.close(fd)


def _append_whole(path: Path, fd: int, raw: bytes, fsync: bool) -> int:
    """``locked_append``'s work on the open ``fd``: lock, repair, intent, write, cut back on
    failure; the offset the record starts at."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _require_regular(fd, path)  # before waiting: a FIFO's lock may be held forever
        fcntl.flock(fd, fcntl.LOCK_EX)
    st = _require_regular(fd, path)
    name = os.fspath(path)
    held = _held_sidecars.pop(name, None)
    sidecar = held.path if held is not None else _intent_path(path)
    reused = _reusable_sidecar(sidecar, st, held)
    if isinstance(reused, _HeldSidecar):
        side, kept, made = reused, True, False
    else:
        # Nothing to reuse: settle what a dead writer left (a plan, an intent), then make the
        # sidecar anew. A sidecar holding no intent is left only by an appender, after any
        # repair had ended (a repairer removes the sidecar before its plan): so where one is
        # reused there is nothing to settle.
        st = _repair(path, fd)
        if reused is False:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sidecar)  # one not to be reused that held no intent
        side, kept = _new_sidecar(sidecar, st)
        made = True
    # A failed append leaves no sidecar it made: only one that was there stays, cleared.
    keep_if_failed = kept and not made
    try:
        start = st.st_size
        copy = raw if len(raw) <= INTENT_RECORD_MAX else None
        try:
            encoded = _encode_intent(st.st_dev, st.st_ino, start, len(raw), zlib.crc32(raw), copy)
            if os.pwrite(side.fd, encoded, 0) < len(encoded):
                _pwrite_all(side.fd, encoded, 0)
        except BaseException:
            # None of the record went out: whatever part of the intent is there cuts nothing.
            kept = False
            with contextlib.suppress(OSError):
                _drop_intent(side, keep_if_failed)
            raise
        try:
            written = os.write(fd, raw)
            if written < len(raw):
                write_all(fd, raw[written:])
            if fsync:
                os.fsync(fd)
        except BaseException:
            kept = False
            os.ftruncate(fd, start)
            _drop_intent(side, keep_if_failed)  # once the cut succeeded: else repaired
            raise
        # The record is whole: an intent that cannot be dropped now is harmless (readers find
        # its record whole, the next append settles it), and failing here would make the caller
        # retry a record that is already in the file.
        try:
            _drop_intent(side, kept)
        except OSError:
            kept = False  # its intent stays: the next append settles it
        return start
    finally:
        if kept:
            _hold_sidecar(name, side)
        else:
            side.close()


def _repair_aside(path: Path, fd: int) -> bool:
    """For a reader holding the shared lock on ``fd`` that found a dead writer's fragment:
    repair it now if this process may write the file and nobody else holds the lock (so a file
    that only hand writers append to is not stuck behind it). Returns holding the shared lock
    again; ``True`` if it repaired."""
    try:
        wfd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        mine, theirs = os.fstat(fd), os.fstat(wfd)
        if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(wfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a writer is in: it repairs first
        try:
            _repair(path, wfd)
        except OSError:
            return False  # a full disk: the fragment stays hidden until an appender repairs
        return True
    finally:
        os.close(wfd)
        fcntl.flock(fd, fcntl.LOCK_SH)


def read_from(path: Path, offset: int = 0, *, limit: int = READ_FROM_MAX) -> bytes:
    """The bytes of ``path`` from ``offset`` on, read under the shared lock.

    Never blocks on a FIFO and never reads more than ``limit`` bytes; never returns bytes of an
    append whose writer was killed part-way. ``NotFound``; ``FormatError`` for something that is
    not a regular file; ``LimitExceeded`` when more than ``limit`` bytes follow ``offset``.
    """
    path = Path(path)
    try:
        fd, real = _open_real(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFound("no such file", path=path) from None
    try:
        _require_regular(fd, path)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _read_visible(fd, real, path, offset, limit)
    finally:
        os.close(fd)


def _read_visible(fd: int, real: Path, path: Path, offset: int, limit: int) -> bytes:
    """``read_from``'s read, on ``fd`` (the file ``real``) held under the shared lock."""
    size = os.fstat(fd).st_size
    end = _visible_end(real, fd, size)
    if end < size and _repair_aside(real, fd):
        end = _visible_end(real, fd, os.fstat(fd).st_size)
    if end - offset > limit:
        raise LimitExceeded(f"{path} from byte {offset}", limit, end - offset, "bytes")
    chunks = []
    pos = offset
    while pos < end:
        chunk = os.pread(fd, min(end - pos, 1 << 20), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


# What a ``HeldReader`` asks for beyond the size its caller saw: appends that landed since, in
# the same read.
_READ_AHEAD = 4096


class HeldReader:
    """``read_from`` for one reader that reads the same file again and again (a waiter): the
    file stays open between reads, so a read costs the lock, a look for a dead writer's intent
    and the ``pread`` of what follows ``offset``. The rules are ``read_from``'s: the shared lock,
    never a dead writer's fragment, never more than ``limit`` bytes.

    ``read(offset, ino, size)`` reads the file whose inode (and size) the caller just found at
    the name: when the held file is another one (replaced since), the name is opened again.
    With no intent in the sidecar the file's end is the visible end, found by the read itself:
    it asks for what follows ``offset`` up to ``size`` and a page more, and a read that comes
    back short of that, having reached ``size``, is at the end (no ``fstat``, no read that only
    returns nothing; as ``read_regular``). ``NotFound`` when the name is gone, ``FormatError`` for
    something that is not a regular file; ``close`` when done.

    The intent sidecar is held open too: under the lock, an ``lstat`` of its name that finds the
    held one there, and a ``pread`` of its first byte, say whether it holds an intent (no open
    and close per read); another file at its name is opened instead.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.ino = -1  # the inode of the file the last read read (-1 before the first)
        self._fd = -1
        self._real = self.path
        self._sidecar = ""
        self._side: _HeldSidecar | None = None  # the sidecar held open

    def read(self, offset: int, ino: int, size: int, *, limit: int = READ_FROM_MAX) -> bytes:
        """The bytes from ``offset`` to the visible end of the file with inode ``ino``, which
        the caller found ``size`` bytes long."""
        if ino != self.ino:
            self._open()
        fd = self._fd
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            # Under the lock no live writer fills the sidecar: none there means nothing torn.
            if not self._holds_no_intent():
                return _read_visible(fd, self._real, self.path, offset, limit)
            seen = size - offset
            want = min(seen + _READ_AHEAD if seen > 0 else _READ_AHEAD, limit + 1)
            data = os.pread(fd, want, offset)
            if len(data) < want and len(data) >= seen:
                return data  # short of what was asked, past what the caller saw: the end
            return self._read_on(fd, offset, limit, data)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _open(self) -> None:
        """Hold the file the name holds now (and forget the sidecar of the one held before)."""
        self.close()
        try:
            fd, self._real = _open_real(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NotFound("no such file", path=self.path) from None
        try:
            self.ino = _require_regular(fd, self.path).st_ino
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._sidecar = _intent_path(self._real)

    def _read_on(self, fd: int, offset: int, limit: int, data: bytes) -> bytes:
        """``data`` (read at ``offset``) and the rest of ``fd`` after it, to a read that returns
        nothing; ``LimitExceeded`` past ``limit``."""
        chunks = [data]
        got = len(data)
        while data and got <= limit:
            data = os.pread(fd, min(1 << 20, limit + 1 - got), offset + got)
            chunks.append(data)
            got += len(data)
        if got > limit:
            end = os.fstat(fd).st_size
            raise LimitExceeded(f"{self.path} from byte {offset}", limit, end - offset, "bytes")
        return b"".join(chunks)

    def _holds_no_intent(self) -> bool:
        """Whether the sidecar is absent, empty or cleared (its first byte, whoever wrote it),
        read through the held copy while its name still holds that very file; ``False``: it
        must be read whole. Called under the lock."""
        try:
            st = os.lstat(self._sidecar)
        except FileNotFoundError:
            self._drop_sidecar()
            return True
        except OSError:
            return False
        side = self._side
        try:
            if side is not None and side.clear_at(st):
                return True
        except OSError:
            return False
        # Another file at its name (or a held one that holds an intent): the one there is read.
        self._drop_sidecar()
        if not stat.S_ISREG(st.st_mode):
            return False  # read whole by ``_visible_end``, which refuses it
        try:
            fd = os.open(self._sidecar, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        try:
            self._side = _HeldSidecar(self._sidecar, fd, os.fstat(fd))
        except OSError:
            os.close(fd)
            return False
        try:
            # False also when the name changed since the lstat: the sidecar is then read whole
            return self._side.clear_at(st)
        except OSError:
            return False

    def _drop_sidecar(self) -> None:
        if self._side is not None:
            self._side.close()
            self._side = None

    def close(self) -> None:
        """Release the held file (and its sidecar)."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self.ino = -1, -1
        self._drop_sidecar()


def written_ns(st: os.stat_result) -> int:
    """When a file's content was last written, as far as anyone but its writer can tell: the
    earlier of its ctime and mtime (ns). A ``chmod``/``chown``/link moves the ctime to now without
    writing anything; a writer that back-dates the mtime moves it only earlier."""
    return min(st.st_ctime_ns, st.st_mtime_ns)


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of the dot-named temp files this module writes."""
    return _TEMP_RE.match(name) is not None


def temp_in_use(path: str | Path) -> bool:
    """Whether a live writer holds the temp at ``path`` locked (``stream_to_temp`` does): the
    one test of "alive" every sweep and every report of leftover temps uses."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _remove_if_unlocked(path: str) -> bool | None:
    """Remove the temp at ``path`` unless a writer holds it locked; the unlink happens under our
    own lock, so a writer that created it a moment ago sees it gone (``held_temp`` starts again).
    ``True`` removed, ``False`` held by a live writer, ``None`` where locks cannot be tested."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            return None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return True
    finally:
        os.close(fd)


def due(marker: Path, every: float) -> bool:
    """Whether work that one caller does for all, at most once in ``every`` seconds, is due:
    ``marker``'s mtime says when it was last done (missing: never). When it is, the marker is
    touched (made if missing) before this returns, so the next caller waits its turn; two
    callers at once may both do it. A marker that cannot be looked at or touched (no folder
    for it, another user's) leaves the work due every time: done too often, never skipped. One
    dated more than ``every`` ahead (a clock set back, a hand-touched file) is due, never put off
    till then (less ahead is a file server's clock a little fast); a symlink there is looked at
    and touched itself, never the file it points to."""
    try:
        if -every < time.time() - os.lstat(marker).st_mtime < every:
            return False
        os.utime(marker, follow_symlinks=False)
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            os.close(os.open(marker, flags, 0o666))
    except OSError:
        pass
    return True


def sweep_temps(
    directory: Path, older_than: float = STALE_TEMP_SECONDS, *, held: str | None = None
) -> list[Path]:
    """Remove temp files that dead writers left in ``directory``; return what was removed.

    A temp whose writer holds it locked (alive, waiting on a stalled pipe) always stays; a killed
    writer's lock died with it. Temps made by ``held_temp`` for a final name starting with
    ``held`` are locked from creation to publication, so unlocked means dead: removed at once.
    Any other temp goes once it is older than ``older_than`` (its writer may have closed it and
    not yet published it), and that age alone decides where locks cannot be tested.
    """
    removed = []
    cutoff = time.time() - older_than
    for entry in os.scandir(directory):
        name = entry.name
        if name[0] != "." or not _TEMP_RE.match(name):  # most are not temps: no match for them
            continue
        try:
            stale = entry.stat(follow_symlinks=False).st_mtime < cutoff
        except FileNotFoundError:
            continue
        if not stale and not (held is not None and entry.name.startswith(f".{held}")):
            continue
        gone = _remove_if_unlocked(entry.path)
        if gone is None and stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                gone = True
        if gone:
            removed.append(Path(entry.path))
    return removed

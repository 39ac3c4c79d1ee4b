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
  to where it was if the write fails, so no torn record survives. Readers take the shared lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from mailslot.core.errors import Conflict, LockBusy, MailslotError, NotFound

__all__ = [
    "atomic_create",
    "atomic_write",
    "file_lock",
    "fsync_dir",
    "highest_number",
    "locked_append",
    "numbered_create",
    "publish_temp",
    "read_from",
    "read_regular",
    "stream_to_temp",
    "sweep_temps",
    "write_all",
]

# A temp file older than this belongs to a writer that died: a write takes milliseconds.
STALE_TEMP_SECONDS = 3600
_TEMP_RE = re.compile(r"^\..+\.[0-9]+\.[0-9a-f]{8}\.tmp$")


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of the regular file at ``path``; ``OSError`` for a symlink, a FIFO, a device,
    a directory, or a file over ``limit`` bytes.

    For files someone else wrote: ``O_NOFOLLOW | O_NONBLOCK`` and an ``fstat`` check mean a FIFO
    named like a message cannot block the reader, a device cannot feed it without end and a
    symlink cannot point it anywhere; it never reads past ``limit + 1`` bytes.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
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


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries durable (a created or renamed name survives a crash)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(
    directory: Path, final_name: str, data: bytes, mode: int, *, sync: bool = True
) -> Path:
    return stream_to_temp(directory, final_name, (data,), mode=mode, sync=sync)


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
    """
    tmp = Path(directory) / f".{final_name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        for chunk in chunks:
            write_all(fd, chunk)
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def publish_temp(tmp: Path, final: Path) -> Path:
    """Give the fsync'd temp ``tmp`` the name ``final`` (same directory), never replacing one.

    ``Conflict`` if ``final`` exists: the temp is kept, so the caller may try another name (and
    removes it when it gives up). On success the temp name is gone and the directory fsync'd.
    """
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


def atomic_create(path: Path, data: str | bytes, *, mode: int = 0o666) -> Path:
    """Create ``path`` with ``data``, durable and all-or-nothing; ``Conflict`` if it exists."""
    path = Path(path)
    tmp = _write_temp(path.parent, path.name, _as_bytes(data), mode)
    try:
        _link_into_place(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write(path: Path, data: str | bytes, *, mode: int = 0o666, durable: bool = True) -> Path:
    """Create or replace ``path`` atomically and durably (state files, never messages).

    ``durable=False`` skips both fsyncs: still all-or-nothing for readers, but a crash may bring
    back the previous version. For state whose loss only repeats work (a reader cursor: the safe
    direction is re-delivery), on a hot path where two fsyncs would dominate.
    """
    path = Path(path)
    tmp = _write_temp(path.parent, path.name, _as_bytes(data), mode, sync=durable)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
    return path


def highest_number(directories: Iterable[Path], width: int = 4) -> int:
    """The highest ``N`` of any ``N-...`` name (``width`` digits) in ``directories``; 0 if none."""
    pattern = re.compile(rf"^([0-9]{{{width}}})-")
    best = 0
    for directory in directories:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            continue
        for name in names:
            m = pattern.match(name)
            if m:
                best = max(best, int(m.group(1)))
    return best


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False, blocking: bool = True) -> Iterator[int]:
    """Hold ``flock`` on ``path`` (created if it can be; a read-only file locks too).

    ``flock`` works on a descriptor opened read-only, so two sides that may each write only their
    own folder can still serialise on a lock file both can read. Raises ``LockBusy`` when
    ``blocking`` is false and someone else holds it.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, op | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LockBusy("held by another process", path=path) from None
        yield fd
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def numbered_create(
    directory: Path,
    suffix: str,
    data: str | bytes,
    *,
    siblings: Iterable[Path] = (),
    lock: Path | None = None,
    width: int = 4,
    mode: int = 0o666,
) -> tuple[int, Path]:
    """Create ``directory/NNNN-suffix`` with the next number free across ``siblings`` too.

    Returns ``(number, path)``. Numbers are never reused and names never overwritten: the number
    is computed under ``lock`` and the final ``link`` still refuses a taken name, moving on to the
    next number, so writers that skip the lock cannot make this one overwrite.
    """
    directory = Path(directory)
    scan = [directory, *siblings]
    raw = _as_bytes(data)
    limit = 10**width - 1
    with file_lock(lock) if lock is not None else contextlib.nullcontext():
        number = highest_number(scan, width) + 1
        tmp = _write_temp(directory, f"new-{suffix}", raw, mode)
        try:
            while True:
                if number > limit:
                    raise MailslotError(f"no numbers left ({limit} used)", path=directory)
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


def locked_append(path: Path, data: str | bytes, *, fsync: bool = False) -> int:
    """Append one whole record to ``path`` under ``flock``; return the offset it starts at.

    If the write fails part-way the file is cut back to its old length, so a reader (who takes
    the shared lock) sees the record entirely or not at all.
    """
    raw = _as_bytes(data)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        start = os.fstat(fd).st_size
        try:
            write_all(fd, raw)
            if fsync:
                os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, start)
            raise
        return start
    finally:
        os.close(fd)


def read_from(path: Path, offset: int = 0) -> bytes:
    """The bytes of ``path`` from ``offset`` on, read under the shared lock; ``NotFound``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFound("no such file", path=path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.lseek(fd, offset, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def sweep_temps(directory: Path, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove temp files that dead writers left in ``directory``; return what was removed."""
    removed = []
    cutoff = time.time() - older_than
    for entry in os.scandir(directory):
        if _TEMP_RE.match(entry.name) and entry.stat().st_mtime < cutoff:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed

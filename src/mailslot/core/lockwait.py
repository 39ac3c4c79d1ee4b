"""Waiting for a lock someone else holds: one loop, always bounded, loud when it gives up.

Every lock another process can take -- ``flock`` on a lock file (``fsio.file_lock``: the tick
lock, the send lock) and the ``mkdir FILE.lock`` lock that bash writers of a chat take by hand
(``mkdir_lock``) -- is waited for by ``wait_for``: try, sleep a short interval, try again, until
a deadline. A holder that hangs or died holding the lock (a killed bash writer leaves its
directory behind) makes the waiter fail with ``LockBusy`` naming the lock and how to clear it,
never hang forever.

A ``mkdir_lock`` mailslot takes holds its owner's record (``OWNER``, one line: pid, the
process's start time from ``/proc/<pid>/stat``, the boot id, the host name and a random token),
written right after the ``mkdir`` and before any work under the lock. A waiter breaks the lock
only when that record proves its owner dead on this very host: the pid is gone, or it is another
process now (its start time differs), or the machine rebooted since (the boot id differs).

A lock without a record is never broken when a bash writer made it (``mkdir`` writes nothing
inside), since nothing on disk says whether that writer still runs: a person typing into
``cat >> chat`` holds it for minutes, so no age proves it dead, and breaking a live one lets two
writers interleave in one file. The waiter fails loudly instead, naming the ``rmdir`` that frees
it (fail safe). A lock mailslot makes carries the sticky bit, which bash's ``mkdir`` never sets,
and its record is written microseconds after the ``mkdir``; so a sticky lock still without a
whole record ``ABANDONED_S`` after it last changed is a mailslot taker's that died between the
two (or whose record a full disk refused; it held the lock for milliseconds), and is broken like
a dead owner's. Only a taker frozen (``SIGSTOP``) for that long between its ``mkdir`` and its
record could lose its lock that way. Nor is a lock from
another host broken. ``flock`` locks (``fsio.file_lock``) need no such rule: the kernel frees
them when their holder exits, however it ends, so they are never stale, and the file left
behind holds nothing. Breaking is one ``rename`` of the lock
directory aside (only one of several waiters can move it); the breaker then checks that what it
moved holds the very record it judged, and puts back a live lock it moved by mistake. Freeing
is a ``rename`` aside too, so a holder killed while freeing never leaves the lock held.

Why polling: neither lock has a kernel wait with a timeout (``flock`` blocks without one; a
directory's removal can be watched, but the next ``mkdir`` is a race anyway), and a lock is held
for milliseconds, so a 20 ms poll costs nothing and is as prompt as a waiter needs.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from mailslot.core.errors import LockBusy

__all__ = ["OWNER", "POLL_S", "mkdir_lock", "wait_for"]

# Between tries: a lock is held for milliseconds, and a waiter need not be more prompt than this.
POLL_S = 0.02
# The file inside a mailslot-held ``mkdir`` lock that names its owner.
OWNER = "owner"
# The most of an owner record that is read: a record is one short line.
OWNER_MAX_BYTES = 512
# A held lock's record is judged at most this often (a waiter may spin every millisecond).
JUDGE_EVERY_S = 0.05
# A lock mailslot made (sticky) that holds no whole record this long after it last changed was
# left by a taker that died between its ``mkdir`` and its record.
ABANDONED_S = 10.0
# The mode a mailslot taker makes its lock with (the umask still applies to the permissions).
_MAILSLOT_LOCK_MODE = 0o1777

T = TypeVar("T")


def wait_for(
    attempt: Callable[[], T | None],
    timeout: float | None,
    *,
    interval: float = POLL_S,
    on_first_miss: Callable[[], None] | None = None,
) -> T | None:
    """Call ``attempt`` until it returns something other than ``None`` or ``False``; that.

    Tries once more at the deadline (``timeout`` seconds from now; ``None`` waits as long as it
    takes) and returns ``None`` if every try missed. ``on_first_miss`` runs once, after the
    first miss (a waiter that repairs what a dead holder left).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    missed = False
    while True:
        got = attempt()
        if got is not None and got is not False:
            return got
        if not missed:
            missed = True
            if on_first_miss is not None:
                on_first_miss()
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(interval, left))
        else:
            time.sleep(interval)


def _stuck(lock: Path, timeout: float) -> str:
    """Why ``lock`` could not be taken in ``timeout`` seconds, and the command that clears it."""
    import shlex  # only a lock that will not come free is worth its import

    quoted = shlex.quote(str(lock))
    try:
        mode = os.lstat(lock).st_mode
    except FileNotFoundError:
        return f"{lock} was held for {timeout:g}s and has just been freed; try again"
    except OSError as e:
        return f"{lock} has been held for {timeout:g}s and cannot be examined ({e.strerror})"
    if stat.S_ISDIR(mode):
        try:
            with os.scandir(lock) as entries:
                names = [e.name for e in entries]
        except OSError:
            names = []
        if names == [OWNER]:
            record = _read_owner(lock)
            who = f"process {record[0]} on {record[3]}" if record else "a mailslot writer"
            return (
                f"{lock} has been held for {timeout:g}s by {who}, which is still running or "
                f"cannot be checked from here; if it is not, remove the lock (rm -r {quoted})"
            )
        if not names:
            return (
                f"{lock} has been held for {timeout:g}s; if no writer is running, remove it "
                f"(rmdir {quoted})"
            )
        return (
            f"{lock} is a directory with files in it, not a lock a writer leaves; look inside, "
            f"then remove it (rm -r {quoted})"
        )
    kind = "a special file"
    if stat.S_ISLNK(mode):
        kind = "a symlink"
    elif stat.S_ISREG(mode):
        kind = "a regular file"
    return (
        f"{lock} is {kind}, not the directory a writer takes as the lock, so no writer frees "
        f"it; remove it (rm {quoted})"
    )


@contextlib.contextmanager
def mkdir_lock(
    lock: Path,
    timeout: float,
    *,
    interval: float = POLL_S,
    on_first_miss: Callable[[], None] | None = None,
    busy: str | None = None,
    busy_path: Path | None = None,
) -> Iterator[None]:
    """Hold the lock that is the directory ``lock`` (``mkdir`` takes it, ``rmdir`` frees it).

    ``mkdir`` is atomic and works the same from bash (``mkdir FILE.lock``), so mailslot and
    hand writers share it. Raises ``LockBusy`` (message ``busy``, about ``busy_path``) when it
    is still held after ``timeout`` seconds; the default message says how to clear what is
    actually there (an empty directory, a directory with files in it, a file, a symlink).
    """

    record = _own_record()
    tries = 0
    judged = 0.0

    def take() -> bool:
        nonlocal tries, judged
        tries += 1
        try:
            os.mkdir(lock, _MAILSLOT_LOCK_MODE)
        except FileExistsError:
            # From the second try on: the first miss runs ``on_first_miss`` (a repair) first.
            if tries < 2 or time.monotonic() - judged < JUDGE_EVERY_S:
                return False
            judged = time.monotonic()
            if not _break_if_dead(lock):
                return False
            try:
                os.mkdir(lock, _MAILSLOT_LOCK_MODE)
            except FileExistsError:
                return False
        _write_owner(lock, record)
        return True

    if not wait_for(take, timeout, interval=interval, on_first_miss=on_first_miss):
        raise LockBusy(busy or _stuck(lock, timeout), path=busy_path or lock)
    try:
        yield
    finally:
        _release(lock)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            return f.read(64).decode("ascii", "replace").strip() or "-"
    except OSError:
        return "-"


def _start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (when the process started, in ticks since boot), or
    ``None`` when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read(4096)
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the name, in parentheses, may hold spaces
    return fields[19].decode("ascii", "replace") if len(fields) > 19 else "?"


def _host() -> str:
    """This machine's name as the record holds it (``gethostname``, read from ``uname``: the
    socket module, and what it loads, is not needed for it)."""
    return os.uname().nodename.replace(" ", "_") or "-"


def _own_record() -> str:
    pid = os.getpid()
    return f"{pid} {_start_time(pid) or '?'} {_boot_id()} {_host()} {os.urandom(8).hex()}\n"


def _write_owner(lock: Path, record: str) -> None:
    """Put the owner record into the lock just taken (one write: no reader sees half of it)."""
    with contextlib.suppress(OSError):  # no record: the lock is judged like a bash writer's
        fd = os.open(
            lock / OWNER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        try:
            os.write(fd, record.encode())
        finally:
            os.close(fd)


def _read_owner(lock: Path) -> list[str] | None:
    """The owner record in ``lock`` as its five fields, or ``None`` (none, or not one)."""
    try:
        fd = os.open(lock / OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, OWNER_MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = raw.decode("utf-8", "replace").split()
    if len(fields) != 5 or not raw.endswith(b"\n") or not fields[0].isdigit():
        return None
    return fields


def _dead(record: list[str]) -> bool:
    """Whether the owner ``record`` names is known dead: on this host, after a reboot, or its
    pid gone or now another process. A record from another host is never judged dead."""
    pid, started, boot, host, _ = record
    if host != _host():
        return False
    if boot != _boot_id():
        return True
    now = _start_time(int(pid))
    return now is None or now != started


def _aside(lock: Path, why: str) -> Path:
    return lock.with_name(f"{lock.name}.{why}-{os.getpid()}-{os.urandom(4).hex()}")


def _remove_aside(aside: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(aside / OWNER)
    with contextlib.suppress(OSError):
        os.rmdir(aside)


def _break_if_dead(lock: Path) -> bool:
    """Move ``lock`` aside if its owner record proves the owner dead (or, with no record, if
    ``_abandoned``); whether it did."""
    record = _read_owner(lock)
    if record is None:
        return _break_if_abandoned(lock)
    if not _dead(record):
        return False
    return _break(lock, lambda aside: _read_owner(aside) == record)


def _break_if_abandoned(lock: Path) -> bool:
    """Move ``lock`` aside if mailslot made it (sticky) and it has held no whole record for
    ``ABANDONED_S``; whether it did. What was moved must be that very directory, not changed
    since (its inode and mtime), with still no record."""
    try:
        st = os.lstat(lock)
    except OSError:
        return False
    if not _abandoned(st):
        return False

    def unchanged(aside: Path) -> bool:
        try:
            moved = os.lstat(aside)
        except OSError:
            return False
        same = (moved.st_ino, moved.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
        return same and _read_owner(aside) is None

    return _break(lock, unchanged)


def _break(lock: Path, still_judged: Callable[[Path], bool]) -> bool:
    """Move ``lock`` aside and remove it if what was moved is still the lock that was judged
    (``still_judged(aside)``); whether it did.

    Several waiters may judge the same stale lock: the ``rename`` moves it for one of them; a
    waiter whose rename moved a lock taken since (another record, or none yet) puts it back.
    """
    aside = _aside(lock, "stale")
    try:
        os.rename(lock, aside)
    except OSError:
        return False  # another waiter moved it first
    if still_judged(aside):
        _remove_aside(aside)
        return True
    try:  # a live lock, taken after the stale one was moved: its holder gets it back
        os.rename(aside, lock)
    except OSError:
        import logging

        logging.getLogger(__name__).warning(
            "moved a live lock %s aside to %s and could not put it back", lock, aside
        )
    return False


def _abandoned(st: os.stat_result) -> bool:
    return (
        stat.S_ISDIR(st.st_mode)
        and bool(st.st_mode & stat.S_ISVTX)
        and time.time() - st.st_ctime > ABANDONED_S
    )


def _release(lock: Path) -> None:
    """Free the lock: move it aside (one ``rename``: the lock is free at once, even if this
    process dies next), then remove it. What someone did to it meanwhile (files put in it,
    replaced by a file or a symlink) is logged, never raised: the work under the lock is done,
    and an error now would make the caller do it twice. The next taker is told what is there."""
    try:
        names = sorted(os.listdir(lock))
    except FileNotFoundError:
        return
    except OSError:
        names = []
    if names == [OWNER]:
        aside = _aside(lock, "free")
        try:
            os.rename(lock, aside)
        except FileNotFoundError:
            return
        except OSError:
            pass
        else:
            _remove_aside(aside)
            return
    try:
        os.rmdir(lock)
    except FileNotFoundError:
        pass
    except OSError as e:
        import logging  # here: every send and say imports this module, and logging is heavy

        logging.getLogger(__name__).warning(
            "could not free the lock %s (%s); the next writer will say how", lock, e
        )

"""Waiting for a lock someone else holds: one loop, always bounded, loud when it gives up.

Every lock another process can take -- ``flock`` on a lock file (``fsio.file_lock``: the tick
lock, the send lock) and the ``mkdir FILE.lock`` lock that bash writers of a chat take by hand
(``mkdir_lock``) -- is waited for by ``wait_for``: try, sleep a short interval, try again, until
a deadline. A holder that hangs or died holding the lock (a killed bash writer leaves its
directory behind) makes the waiter fail with ``LockBusy`` naming the lock and how to clear it,
never hang forever.

Why polling: neither lock has a kernel wait with a timeout (``flock`` blocks without one; a
directory's removal can be watched, but the next ``mkdir`` is a race anyway), and a lock is held
for milliseconds, so a 20 ms poll costs nothing and is as prompt as a waiter needs.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from mailslot.core.errors import LockBusy

__all__ = ["POLL_S", "mkdir_lock", "wait_for"]

# Between tries: a lock is held for milliseconds, and a waiter need not be more prompt than this.
POLL_S = 0.02

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
                empty = next(entries, None) is None
        except OSError:
            empty = True
        if empty:
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

    def take() -> bool:
        try:
            os.mkdir(lock)
        except FileExistsError:
            return False
        return True

    if not wait_for(take, timeout, interval=interval, on_first_miss=on_first_miss):
        raise LockBusy(busy or _stuck(lock, timeout), path=busy_path or lock)
    try:
        yield
    finally:
        _release(lock)


def _release(lock: Path) -> None:
    """Remove the lock directory; what someone did to it meanwhile (files put in it, replaced
    by a file or a symlink) is logged, never raised: the work under the lock is done, and an
    error now would make the caller do it twice. The next taker is told what is there."""
    try:
        os.rmdir(lock)
    except FileNotFoundError:
        pass
    except OSError as e:
        import logging  # here: every send and say imports this module, and logging is heavy

        logging.getLogger(__name__).warning(
            "could not free the lock %s (%s); the next writer will say how", lock, e
        )

"""How a mailslot process ends: output flushed, state on disk, then out at once.

A command whose results are on disk when it returns (a blocking wait whose seen-mark or cursor is
written, a send whose entry is fsync'd) gains nothing from the interpreter's teardown -- threads
joined, every object freed, atexit hooks run -- which costs milliseconds after the answer is out,
and an agent blocked on the command waits for the exit, not the output. Such a command calls
``end_promptly()``; ``end`` then flushes standard output and error and leaves with ``os._exit``.
A process ends promptly only when its entry point said it owns the process (``begin``): a
library caller or a test runner in the same interpreter is never exited.

One kernel cost would survive ``os._exit``: the last close of an inotify descriptor waits for an
RCU grace period (4-30 ms measured on the development VM), and the kernel closes a process's
descriptors before it reports the exit. So ``slow_close`` arranges that close when the
descriptor is made: in a process that ends promptly, a holder (``cat`` reading a pipe only this
process writes, in a session of its own, its output on ``/dev/null``, nothing else inherited)
shares the descriptor from the start; releasing it closes this process's reference first --
instant, it is not the last -- and then the pipe, and the holder's exit pays the grace period
while nobody waits on it. A holder never outlives its watch, or its process if that is killed.
Anywhere else the process's one closing thread makes the close.

Exit status: a reader that closed standard output before it was all written (``| head``) ends the
process with 141 (128 + SIGPIPE) and nothing said, like any Unix filter; a Python process ignores
SIGPIPE, so it sees the closed pipe as ``BrokenPipeError`` and reports it here.

What this cannot do: a holder that cannot start (no ``cat``, no process slots) leaves the close
to this process -- slower, never wrong.
"""

from __future__ import annotations

import _thread
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `--help` loads this
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

__all__ = [
    "CLOSED_PIPE",
    "begin",
    "end",
    "end_promptly",
    "ends_promptly",
    "quiet_stdout",
    "slow_close",
]

CLOSED_PIPE = 128 + 13  # 141: the status a shell shows for a filter whose reader went away

_owner = False  # the entry point owns this process and will end it through ``end``
_prompt = False  # ...and asked to end it with os._exit once the output is flushed


def begin() -> None:
    """Called by the entry point before it runs a command: it owns this process and ends it
    through ``end`` (the ordinary exit until the command says ``end_promptly``)."""
    global _owner, _prompt
    _owner, _prompt = True, False


def end_promptly() -> None:
    """Ask ``end`` to leave with ``os._exit`` once the output is flushed, skipping the
    interpreter's teardown. For commands whose results are on disk when they return; called
    before such a command makes its watches, so their slow closes are arranged for it."""
    global _prompt
    _prompt = True


def ends_promptly() -> bool:
    """Whether this process will end with ``os._exit`` at ``end``."""
    return _owner and _prompt


def slow_close(fd: int, close: Callable[[], None]) -> Callable[[], None]:
    """Arrange the release of ``fd``, a descriptor whose last close waits on the kernel, that
    ``close`` closes; returns the function that releases it (call it once).

    In a process that ends promptly a holder shares ``fd`` from now on and makes its last
    close; anywhere else (or if the holder cannot start) a daemon thread calls ``close``.
    """
    _reap()
    if ends_promptly() and fd > 2:
        pipe_w = _holder(fd)
        if pipe_w is not None:

            def release() -> None:
                close()  # not the last reference: the holder has one
                os.close(pipe_w)  # the holder sees end-of-file, exits, makes the last close
                _reap()

            return release
    return lambda: _close_elsewhere(close)


_closing: Any = None  # the queue the closing thread takes closes from, once one runs
_closing_lock = _thread.allocate_lock()  # threading.Lock, without loading threading


def _close_elsewhere(close: Callable[[], None]) -> None:
    """Hand ``close`` to this process's one closing thread (started on first use): a put costs
    microseconds where starting a thread per close cost milliseconds under load, on the way out
    of every wait."""
    global _closing
    with _closing_lock:
        if _closing is None:
            import queue
            import threading

            _closing = queue.SimpleQueue()
            threading.Thread(
                target=_closer, args=(_closing,), name="slow-close", daemon=True
            ).start()
        _closing.put(close)


def _closer(closes: Any) -> None:
    while True:
        close = closes.get()
        try:
            close()
        except OSError:
            pass


def _forget_closer() -> None:
    global _closing
    _closing = None  # a forked child has the queue but not the thread: it starts its own


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_closer)


_holders: list[int] = []  # holders started by this process and not yet reaped


def _reap() -> None:
    """Collect the holders that have exited (no zombies pile up in a long-lived process)."""
    for pid in list(_holders):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else
            done = pid
        if done:
            _holders.remove(pid)


def _holder(fd: int) -> int | None:
    """Start ``cat`` holding ``fd`` until the returned pipe end is closed (or this process is
    gone); ``None`` if it cannot start."""
    cat = next((p for p in ("/bin/cat", "/usr/bin/cat") if os.access(p, os.X_OK)), None)
    if cat is None:
        return None
    try:
        r, w = os.pipe()  # both close-on-exec: only the holder's own stdin survives its exec
    except OSError:
        return None
    try:
        actions: list[tuple[object, ...]] = [
            (os.POSIX_SPAWN_CLOSE, int(name))
            for name in os.listdir("/proc/self/fd")
            if int(name) > 2 and int(name) not in (fd, r, w) and _inheritable(int(name))
        ]
        actions += [
            (os.POSIX_SPAWN_DUP2, r, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            # onto another number, which is inherited across the exec (``fd`` is close-on-exec)
            (os.POSIX_SPAWN_DUP2, fd, 4 if fd == 3 else 3),
        ]
        _holders.append(os.posix_spawn(cat, ["cat"], {}, file_actions=actions, setsid=True))
    except OSError:
        os.close(w)
        return None
    finally:
        os.close(r)
    return w


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # closed since the listing (the listing's own descriptor)
        return False


def quiet_stdout() -> None:
    """Point standard output at ``/dev/null``: its reader is gone, and a later flush (the
    interpreter's own, at exit) must not complain about it."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _flushed() -> bool:
    """Flush standard output and error; ``False`` if standard output's reader is gone."""
    ok = True
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        ok = False
        quiet_stdout()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    return ok


def end(code: int) -> NoReturn:
    """The one exit: flush standard output and error, then end with ``code`` -- 141 instead of
    0 when standard output's reader went away -- through ``os._exit`` if the process ends
    promptly, else through ``sys.exit``."""
    if not _flushed() and code == 0:
        code = CLOSED_PIPE
    if ends_promptly():
        os._exit(code)
    sys.exit(code)

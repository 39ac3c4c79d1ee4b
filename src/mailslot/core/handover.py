"""Show, then record: the order every blocking reader hands something over in.

A reader that takes something -- a seen-mark, a cursor, a delivery record -- records it only
after the output that shows it was written and flushed, so nothing is ever recorded as taken
that its reader was not shown (``show_then_record``):

* ``show`` fails (a closed pipe: EPIPE; Ctrl-C while a write is stalled on a full pipe):
  nothing is recorded and the next reader gets all of it.
* The process is killed (SIGKILL) after the output, or a power cut loses the record (records
  may skip the fsync): the next reader gets it again. Never lost; at worst shown twice.
* SIGINT or SIGTERM arriving after the output was written is held until the record is written,
  then raised (exit 130 / 143), so output already out is recorded once.

* The output is not taken (nobody reads standard output: a full pipe): ``write_before`` gives up
  once nothing was taken for ``OUTPUT_STALL_SECONDS`` past the reader's deadline, with
  ``Incomplete``, so a wait with a timeout ends soon after it, and nothing is recorded. What
  went out of the output is cut short.

A signal landing in the few bytecodes between the end of the output and the start of the hold
unwinds before the record: the safe direction (shown twice, never lost). Signals can be held
only in the main thread; in any other thread (a server's worker) ``held_signals`` holds none.

``MAILSLOT_TEST_PAUSE_AFTER_OUTPUT=SECONDS`` (set by tests only) pauses between the output and
the record, for up to that long or until a signal is held, and says so on standard error
(``PAUSE_LINE``), so a test can interrupt or kill a process at exactly that moment.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from mailslot.core.errors import Incomplete

__all__ = [
    "OUTPUT_STALL_SECONDS",
    "PAUSE_ENV",
    "PAUSE_LINE",
    "held_signals",
    "show_then_record",
    "write_before",
]

PAUSE_ENV = "MAILSLOT_TEST_PAUSE_AFTER_OUTPUT"
PAUSE_LINE = b"mailslot: paused between output and record (test hook)\n"
_HELD = tuple(
    int(s) for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s
)
# The C module's own ``signal``: ``signal.signal`` wraps it to convert numbers and handlers to
# and from enums, four Python calls a hold that doubled its cost (60 us measured) on every take.
_set_handler: Callable[[int, Any], Any] = _signal.signal
_sigmask: Callable[[int, Any], set[int]] = _signal.pthread_sigmask

T = TypeVar("T")

# A write of at most this many bytes to a pipe that polls writable never blocks (POSIX PIPE_BUF).
_WRITE_STEP = select.PIPE_BUF
# Past a reader's deadline its output goes on while the other end takes some of it at least this
# often: a consumer that reads (``--timeout 0`` and a long answer) gets all of it, one that takes
# nothing for this long is not reading, and the command ends.
OUTPUT_STALL_SECONDS = 2.0


def _deliver(signum: int, handler: Any) -> None:
    """Act on ``signum`` as ``handler`` (the one in place before the hold) would have."""
    if callable(handler):
        handler(signum, None)  # KeyboardInterrupt, or the CLI's Stopped
    elif handler in (signal.SIG_DFL, None):
        signal.raise_signal(signum)
    # SIG_IGN: ignored, as it would have been


class held_signals:
    """Within: SIGINT and SIGTERM are held, not acted on; on leaving, the first one held is acted
    on as the handler in place would. Holds nothing outside the main thread.

    A process with no other thread blocks both in its signal mask (two system calls: a pending
    one is delivered as the mask is restored, its handler run then). With other threads, which
    the kernel may hand a signal to, a handler that notes it is put in place instead (the list
    yielded) and the handlers are restored on leaving (four).
    """

    __slots__ = ("_before", "_mask", "caught")

    def __init__(self) -> None:
        self.caught: list[int] = []
        self._mask: set[int] | None = None
        self._before: dict[int, Any] = {}

    def __enter__(self) -> list[int]:
        if threading.current_thread() is not threading.main_thread():
            return self.caught
        if threading.active_count() == 1:
            self._mask = _sigmask(_signal.SIG_BLOCK, _HELD)
        else:
            note = self.caught.append
            self._before = {s: _set_handler(s, lambda signum, _frame: note(signum)) for s in _HELD}
        return self.caught

    def __exit__(self, *exc: object) -> None:
        if self._mask is not None:
            _sigmask(_signal.SIG_SETMASK, self._mask)  # a pending one is delivered: its handler
            return
        before, caught = self._before, self.caught
        for s, handler in before.items():
            _set_handler(s, handler if handler is not None else signal.SIG_DFL)
        if caught:
            _deliver(caught[0], before[caught[0]])


def _held_pending(caught: list[int]) -> bool:
    """Whether a signal is held: noted by the handler, or pending in the mask."""
    return bool(caught) or any(s in _HELD for s in _signal.sigpending())


def _test_pause(caught: list[int]) -> None:
    raw = os.environ.get(PAUSE_ENV)
    if not raw:
        return
    os.write(2, PAUSE_LINE)  # the test strikes once it reads this
    end = time.monotonic() + float(raw)
    while not _held_pending(caught) and time.monotonic() < end:
        time.sleep(0.01)


def show_then_record(show: Callable[[], None] | None, record: Callable[[], T]) -> T:
    """Run ``show`` (write and flush the output), then ``record`` with SIGINT/SIGTERM held.

    If ``show`` raises, ``record`` never runs and the exception propagates: nothing is taken.
    A signal that arrives while ``record`` runs is acted on once it has returned.
    """
    if show is not None:
        show()
    with held_signals() as caught:
        if show is not None:
            _test_pause(caught)
        return record()


def write_before(
    fd: int, data: bytes, deadline: float | None, *, stall: float = OUTPUT_STALL_SECONDS
) -> None:
    """Write every byte of ``data`` to ``fd``, giving up once the descriptor has taken nothing
    for ``stall`` seconds past ``deadline`` (``time.monotonic()``; ``None``: however long it
    takes): ``Incomplete``, with part of ``data`` possibly written. A reader that keeps taking
    the output gets all of it, however late; one that takes nothing (a full pipe nobody reads)
    holds the writer until ``deadline + stall`` at most. ``OSError`` as ``os.write`` raises it
    (``BrokenPipeError`` for a reader that went away).

    Waits on ``poll`` and writes at most ``PIPE_BUF`` bytes once writable, which a pipe takes
    without blocking; the descriptor's own flags are left alone (another process may share them:
    a terminal, the caller's pipe). A descriptor that blocks after polling writable (a socket
    short of room, a terminal stopped with ^S) can still hold a write past the deadline.
    """
    view = memoryview(data)
    if deadline is None:
        while view:
            view = view[os.write(fd, view) :]
        return
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        wait = max(0.0, deadline - time.monotonic()) + stall
        if not poller.poll(int(wait * 1000) + 1):
            raise Incomplete(
                f"standard output took nothing for {stall:g}s past the timeout (nobody is "
                "reading it: a full pipe); nothing was marked read or seen, so the next wait "
                "shows it again"
            )
        view = view[os.write(fd, view[:_WRITE_STEP]) :]

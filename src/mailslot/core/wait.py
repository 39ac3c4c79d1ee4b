"""Block until a file or directory changes, on the kernel's file events.

Arm before check: a ``Watch`` is armed when a path is added, so the pattern ::

    with Watch([inbox]) as w:
        while not (found := check()):
            w.wait(timeout)

cannot miss a write that lands between ``check()`` and ``wait()``: the event is already queued.
``wait_until`` is that loop with a deadline, re-adding paths each round (a new subdirectory is
watched before the check that could find its contents).

Backends: inotify on Linux, kqueue on BSD/macOS, polling only as a fallback (no kernel support,
or the inotify watch limit reached). Events are hints: callers always re-check the disk.

This is mailslot's one watcher of files: a waiter blocks in ``wait``; a long runner with its own
event loop (the bridge) waits on ``fileno`` and takes what changed. With inotify a ``Watch`` also
says *which* names changed in a watched directory and what the last event said about each
(``take_changes``: a ``Change`` per name), so such a runner re-reads only those names. That is
also how a reader tells a file still being written in place (``cat > f``: ``WRITING`` until its
writer closes it) from one that is whole (``CLOSED``: closed after writing, or renamed into
place); a file linked into place, or created and not yet written, is only ``APPEARED``.
``being_written`` asks the kernel the same question for any file, events or not, and
``settled`` puts the two together with a bound, for whoever reads files others write.

A waiter made afresh for every wait (``chat.wait`` called per message) asks for
``Watch(reuse=True)``: closing it keeps its inotify instance for the next such ``Watch`` instead
of paying, on the way out of the wait, the slow close or its hand-off to the closing thread
(``core.ending.slow_close``). The next one removes the old watches and drops their queued events
before it arms its own, so it hears only its own paths. At most ``REUSE_MAX`` are kept per
process, each a descriptor held (with the watches of its last user) until it is reused or the
process ends; an instance whose descriptor was handed out (``fileno``) is never kept.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from mailslot.core.ending import slow_close
from mailslot.core.errors import WaitTimeout

__all__ = [
    "APPEARED",
    "CLOSED",
    "GONE",
    "OPEN_SETTLE",
    "POLL_INTERVAL",
    "QUIET_SETTLE",
    "REUSE_MAX",
    "TOUCHED",
    "WRITING",
    "Change",
    "Settled",
    "Watch",
    "being_written",
    "settled",
    "wait_for_change",
    "wait_until",
]

if TYPE_CHECKING:
    import logging


def _log() -> logging.Logger:
    import logging  # here: every blocking command imports this module, and logging is heavy

    return logging.getLogger(__name__)


# Fallback polling period: a tenth of a blink, cheap for a handful of stats.
POLL_INTERVAL = 0.05
# A file its writer still holds open is shown as it stands once unchanged this long: a writer
# that pauses longer than this mid-file (or never closes) is shown part-way, flagged, and shown
# again when it changes; an agent writing a message pauses far less.
OPEN_SETTLE = 30.0
# With neither file events nor a lease to ask, a file changed this recently may still be being
# written in place: it is looked at again once it has been left alone this long.
QUIET_SETTLE = 2.0
# Inotify instances kept for reuse by ``Watch(reuse=True)``: one per waiter a process runs at
# once is the common case; more would be descriptors held for nothing.
REUSE_MAX = 2

T = TypeVar("T")


# What the last event on a name in a watched directory says about its content.
APPEARED = "appeared"  # created or linked in: whether it is whole is not known from events
WRITING = "writing"  # written in place and not closed since
CLOSED = "closed"  # closed after writing, or renamed into place: its writer is done with it
GONE = "gone"  # removed or moved away
TOUCHED = "touched"  # its attributes only (chmod, utime): says nothing of its content


class Change(NamedTuple):
    """A name in a watched ``directory`` that had events, and what the last of them says
    (``APPEARED``, ``WRITING``, ``CLOSED``, ``GONE``; ``TOUCHED`` only when nothing else came)."""

    directory: Path
    name: str
    is_dir: bool
    state: str

    @property
    def gone(self) -> bool:
        """Whether the name was removed or moved away."""
        return self.state == GONE


# A path's changes since the last take: name -> its Change; None when the event was about the
# path itself (moved, removed, its own attributes, its watch dropped): anything in it may differ.
Changes = dict[Path, dict[str, Change] | None]


def _existing(path: Path) -> Path:
    """``path`` if it exists, else its nearest existing parent (watching that sees it appear)."""
    p = path
    while not p.exists() and p.parent != p:
        p = p.parent
    return p


def _identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path``, or ``None`` if it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Backend:
    def add(self, path: Path) -> bool:
        raise NotImplementedError

    def fileno(self) -> int | None:
        """A descriptor readable while events that carry names wait (inotify's only)."""
        return None

    def wait(self, timeout: float | None) -> bool:
        raise NotImplementedError

    def take_changed(self) -> Changes | None:
        """The armed paths with events since the last call, each with the names its events
        carried (``None``: an event on the path itself); ``None``: not known (any may)."""
        return None

    def take_one(self) -> Change | None:
        """The one ``Change`` since the last take, when that is all (inotify's only)."""
        return None

    def watching(self, path: Path) -> bool:
        """Whether events for ``path`` still come (the kernel has not dropped its watch)."""
        return True

    def close(self) -> None:
        pass


class _Inotify(_Backend):
    def __init__(self) -> None:
        from mailslot.core.inotify import INotify, flags, read_events

        self._ino = INotify()
        self._read_events = read_events
        self.dot_names = True  # whether events on dot-names are kept (``Watch(dot_names=...)``)
        # whether ``wait`` just took every event queued: the next take need not read again
        self._taken = False
        self._mask = (
            flags.CREATE
            | flags.MOVED_TO
            | flags.MOVED_FROM
            | flags.DELETE
            | flags.MODIFY
            | flags.CLOSE_WRITE
            | flags.ATTRIB
            | flags.DELETE_SELF
            | flags.MOVE_SELF
        )
        self._ignored = int(flags.IGNORED)  # plain ints: an IntFlag's ``&`` is a Python call
        self._overflow = int(flags.Q_OVERFLOW)
        self._isdir = int(flags.ISDIR)
        self._writing = int(flags.MODIFY)
        self._closed = int(flags.CLOSE_WRITE | flags.MOVED_TO)
        self._appeared = int(flags.CREATE)
        self._gone = int(flags.DELETE | flags.MOVED_FROM)
        # the one name renamed or closed into an armed directory, when that is all the events
        # taken since the last take said (dot names aside): kept as it is, no ``Changes`` made
        # for it until they are asked for (``take_one``)
        self._one: Change | None = None
        self._more = False  # whether the last read filled its buffer (more may be queued)
        self._fd = self._ino.fileno()
        self._moved_to = int(flags.MOVED_TO)
        self._close_write = int(flags.CLOSE_WRITE)
        self._wd: dict[int, Path] = {}
        self._live: dict[Path, int] = {}  # path -> its watch, while the kernel keeps it
        # armed path -> a Change per name its events carried (None: an event on the directory
        # itself); None as a whole: the queue overflowed, events were lost
        self._changed: Changes | None = {}
        self._poller = select.poll()
        self._poller.register(self._ino.fileno(), select.POLLIN)
        # The last close of an inotify descriptor waits for an RCU grace period in the kernel
        # (4-30 ms measured here), which every wait would pay on its way out, and a process
        # ending at once pays in its exit: ``slow_close`` moves that close elsewhere.
        self._release = slow_close(self._ino.fileno(), self._ino.close)
        self._handed_out = False  # ``fileno`` was given to a caller: never kept for reuse

    def add(self, path: Path) -> bool:
        try:
            wd = self._ino.add_watch(str(path), self._mask)
        except OSError as e:
            _log().debug("inotify cannot watch %s: %s", path, e)
            return False
        self._wd[wd] = path
        self._live[path] = wd
        return True

    def watching(self, path: Path) -> bool:
        return path in self._live

    def fileno(self) -> int | None:
        self._handed_out = True
        return self._ino.fileno()

    def reset(self) -> None:
        """Forget what the last user watched: its watches removed, their queued events dropped."""
        for wd in self._wd:
            with contextlib.suppress(OSError):  # dropped by the kernel already
                self._ino.rm_watch(wd)
        self._wd.clear()
        self._live.clear()
        while self._ino.read(timeout=0):  # one read each: the descriptor never blocks
            pass
        self._changed = {}
        self._one = None
        self._taken = False

    def wait(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        ms = None if timeout is None else max(0, int(timeout * 1000))
        while True:
            if not self._poller.poll(ms):
                return False
            taken = self._drain()
            self._taken = not self._more
            if taken or self._more or self.dot_names:
                return True
            # only names passed over (a writer's temp, before it is renamed into place): the
            # caller has nothing to look at, so the wait goes on
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ms = max(0, int(left * 1000))

    def _drain(self) -> int:
        """Take the events queued now into ``_changed`` (or ``_one``); how many were taken (a
        name passed over is none)."""
        try:
            events, self._more = self._read_events(self._fd, dot_names=self.dot_names)
        except InterruptedError:
            return 0
        if len(events) == 1 and self._one is None and self._changed == {}:
            wd, mask, _, name = events[0]
            path = self._wd.get(wd)
            if name and path is not None and (mask == self._moved_to or mask == self._close_write):
                self._one = Change(path, name, False, CLOSED)  # the common wake
                return 1
        self._keep_one()
        for wd, mask, _, name in events:
            changed = self._changed
            if mask & self._overflow:
                self._changed = None
            elif changed is not None and (path := self._wd.get(wd)) is not None:
                if not name or mask & self._ignored:
                    changed[path] = None  # the directory itself: anything in it may differ
                else:
                    names = changed[path] if path in changed else changed.setdefault(path, {})
                    if names is not None:
                        self._note(names, path, name, mask)
            if mask & self._ignored:  # the directory went away: no more events from it
                gone = self._wd.pop(wd, None)
                if gone is not None and self._live.get(gone) == wd:
                    del self._live[gone]
        return len(events)

    def _keep_one(self) -> None:
        """``_one`` put in ``_changed``, as the events would have put it."""
        one, self._one = self._one, None
        if one is not None and self._changed is not None:
            names = self._changed.setdefault(one.directory, {})
            if names is not None:
                names[one.name] = one

    def _note(self, names: dict[str, Change], path: Path, name: str, mask: int) -> None:
        if mask & self._writing:
            state = WRITING
        elif mask & self._closed:
            state = CLOSED
        elif mask & self._appeared:
            state = APPEARED
        elif mask & self._gone:
            state = GONE
        elif name in names:
            return  # attributes only: what came before still says more
        else:
            state = TOUCHED
        names[name] = Change(path, name, bool(mask & self._isdir), state)

    def take_changed(self) -> Changes | None:
        # events queued since the last wait count too (none: one read), unless that wait has
        # just read them all: one queued since is taken by the next round, as it would be had
        # it come just after this read
        if not self._taken:
            self._drain()
        self._taken = False
        self._keep_one()
        changed, self._changed = self._changed, {}
        return changed

    def take_one(self) -> Change | None:
        """``take_changed`` when all it would hold is one name renamed or closed into an armed
        directory (dot names aside): that name's ``Change``; else ``None``, and the events
        stay for ``take_changed`` (which reads no more than this did)."""
        if not self._taken:
            self._drain()
            self._taken = True
        one = self._one
        if one is not None:
            self._one = None
            self._taken = False
        return one

    def close(self) -> None:
        self._release()


_kept: list[_Inotify] = []  # idle instances for ``Watch(reuse=True)``, at most REUSE_MAX
_kept_lock = threading.Lock()


def _keep(kernel: _Backend) -> bool:
    """Keep ``kernel`` for the next ``Watch(reuse=True)``; ``False``: it is not kept (close it)."""
    if not isinstance(kernel, _Inotify) or kernel._handed_out:
        return False
    with _kept_lock:
        if len(_kept) >= REUSE_MAX:
            return False
        _kept.append(kernel)
    return True


def _take_kept() -> _Inotify | None:
    with _kept_lock:
        kernel = _kept.pop() if _kept else None
    if kernel is not None:
        kernel.reset()
    return kernel


def _forget_kept() -> None:
    """In a forked child: the kept instances are the parent's (a shared queue would split their
    events between the two processes), so the child's copies are closed, never reused."""
    for kernel in _kept:
        with contextlib.suppress(OSError):
            os.close(kernel._ino.fileno())
    _kept.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_kept)


if sys.platform != "linux":  # kqueue exists on BSD and macOS only

    class _Kqueue(_Backend):
        def __init__(self) -> None:
            self._kq = select.kqueue()
            self._fds: list[int] = []

        def add(self, path: Path) -> bool:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                return False
            self._fds.append(fd)
            fflags = (
                select.KQ_NOTE_WRITE
                | select.KQ_NOTE_EXTEND
                | select.KQ_NOTE_DELETE
                | select.KQ_NOTE_RENAME
                | select.KQ_NOTE_ATTRIB
                | select.KQ_NOTE_LINK
            )
            ev = select.kevent(
                fd,
                filter=select.KQ_FILTER_VNODE,
                flags=select.KQ_EV_ADD | select.KQ_EV_CLEAR,
                fflags=fflags,
            )
            self._kq.control([ev], 0, 0)
            return True

        def wait(self, timeout: float | None) -> bool:
            return bool(self._kq.control(None, 64, timeout))

        def close(self) -> None:
            for fd in self._fds:
                os.close(fd)
            self._kq.close()


class _Poll(_Backend):
    """Stat signatures compared every ``POLL_INTERVAL``; the fallback, never the default."""

    def __init__(self) -> None:
        self._paths: list[Path] = []
        self._last: object = None

    def _signature(self) -> object:
        sig: list[object] = []
        for p in self._paths:
            try:
                st = p.stat()
                sig.append((str(p), st.st_ino, st.st_size, st.st_mtime_ns))
                if p.is_dir():
                    sig.append(tuple(sorted(os.listdir(p))))
            except OSError:
                sig.append((str(p), None))
        return tuple(sig)

    def add(self, path: Path) -> bool:
        self._paths.append(path)
        self._last = self._signature()
        return True

    def wait(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            sig = self._signature()
            if sig != self._last:
                self._last = sig
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            left = POLL_INTERVAL if deadline is None else deadline - time.monotonic()
            time.sleep(max(0.0, min(POLL_INTERVAL, left)))


def _kernel_backend(reuse: bool = False) -> _Backend | None:
    if sys.platform.startswith("linux"):
        if reuse and (kept := _take_kept()) is not None:
            return kept
        try:
            return _Inotify()
        except (ImportError, OSError) as e:
            _log().warning("inotify unavailable (%s); falling back to polling", e)
            return None
    if sys.platform != "linux" and hasattr(select, "kqueue"):
        return _Kqueue()
    return None


class Watch:
    """A set of armed watches; ``wait`` returns when any watched path may have changed.

    ``reuse``: the kernel instance comes from, and on ``close`` goes back to, the ones this
    process keeps (see the module docstring) -- for a watch made afresh for every wait.
    Without ``dot_names``, names starting with a dot (in-flight temps, which the caller never
    reads) carry no events: no ``Change`` is made for them, and ``wait`` does not return for
    them alone (a writer's temp wakes nobody; its rename into place does).
    """

    def __init__(
        self,
        paths: Iterable[Path] = (),
        *,
        force_poll: bool = False,
        reuse: bool = False,
        dot_names: bool = True,
    ) -> None:
        self._reuse = reuse
        self._kernel = None if force_poll else _kernel_backend(reuse)
        if isinstance(self._kernel, _Inotify):
            self._kernel.dot_names = dot_names
        self._poll: _Poll | None = None
        self._added: dict[Path, tuple[int, int] | None] = {}
        for p in paths:
            self.add(p)

    @property
    def polling(self) -> bool:
        """Whether any path is watched by polling (no kernel events for it)."""
        return self._poll is not None

    def add(self, path: Path | str) -> None:
        """Arm a watch on ``path`` (or its nearest existing parent); cheap to repeat.

        A kernel watch follows an inode, not a name: when ``path`` now names a different file
        or directory than when it was armed (a topic moved away and another put in its place),
        adding it again arms the new one. Callers that re-add their paths before every check
        (``wait_until`` does) therefore never go deaf to a replaced directory.
        """
        target = _existing(Path(path))
        ident = _identity(target)
        kernel = self._kernel
        if self._added.get(target, 0) == ident and (kernel is None or kernel.watching(target)):
            return
        first_time = target not in self._added
        self._added[target] = ident
        if self._kernel is not None and self._kernel.add(target):
            return
        if self._poll is None:
            self._poll = _Poll()
        if first_time:
            self._poll.add(target)

    def watching(self, path: Path | str) -> bool:
        """Whether ``path`` itself has a kernel watch that still reports (not its parent's, not
        polling): a caller that lists a directory once and then follows its events re-adds a
        directory for which this is false."""
        p = Path(path)
        return p in self._added and self._kernel is not None and self._kernel.watching(p)

    def fileno(self) -> int | None:
        """The descriptor that becomes readable when kernel events carrying names wait, for an
        event loop (``loop.add_reader``) that then calls ``take_changes``; ``None`` without
        inotify, when only a rescan on a timer can tell what changed."""
        return None if self._kernel is None else self._kernel.fileno()

    def armed_as(self, path: Path | str) -> tuple[int, int] | None:
        """The ``(device, inode)`` that ``path`` named when it was last armed by ``add``, or
        ``None`` if it is not armed itself (a missing path arms its parent)."""
        target = Path(path)
        if self._kernel is None or not self._kernel.watching(target):
            return None
        return self._added.get(target)

    def take_changed(self) -> set[Path] | None:
        """The armed paths that had events in the waits since the last call (kernel events
        only); ``None`` when that is not known -- polling, or events lost to a full queue --
        and any path may have changed."""
        changed = self.take_changes()
        return None if changed is None else set(changed)

    def take_changed_names(self) -> dict[Path, set[str] | None] | None:
        """``take_changes`` by name only."""
        changed = self.take_changes()
        if changed is None:
            return None
        return {p: None if names is None else set(names) for p, names in changed.items()}

    def take_one(self) -> Change | None:
        """The one name renamed or closed into an armed directory since the last take, when
        that is all that changed (names with a dot aside; kernel events only): its ``Change``
        (``CLOSED``), made without the rest of ``take_changes``'s work; else ``None``, and
        everything is left for ``take_changes``."""
        if self._poll is not None or self._kernel is None:
            return None
        return self._kernel.take_one()

    def take_changes(self) -> Changes | None:
        """What changed since the last call: for each armed directory with events, a ``Change``
        per name in it that was created, written, closed, renamed, removed or changed in its
        attributes (the last event's word on it); ``None`` for a path whose event was about
        itself (moved, removed, its own attributes, its watch dropped), where anything in it
        may differ. ``None`` as a whole when that is not known -- polling, or events lost to a
        full queue -- and any path may have changed."""
        if self._poll is not None or self._kernel is None:
            return None
        return self._kernel.take_changed()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until an event or ``timeout`` seconds; ``True`` if something may have changed."""
        if self._poll is None:
            return self._kernel.wait(timeout) if self._kernel is not None else False
        if self._kernel is None:
            return self._poll.wait(timeout)
        # Mixed: kernel events for most paths, polling for the rest.
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = POLL_INTERVAL
            if deadline is not None:
                step = min(step, max(0.0, deadline - time.monotonic()))
            if self._kernel.wait(step) or self._poll.wait(0):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def close(self) -> None:
        """Release the kernel resources (with ``reuse``, keep them for the next such watch)."""
        kernel, self._kernel = self._kernel, None
        if kernel is not None and not (self._reuse and _keep(kernel)):
            kernel.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def wait_for_change(paths: Iterable[Path], timeout: float | None) -> bool:
    """Arm watches on ``paths`` and block until one changes; ``False`` on timeout.

    Only safe when the caller has nothing to check first; otherwise use ``Watch`` or
    ``wait_until`` so the check happens after arming.
    """
    with Watch(paths) as w:
        return w.wait(timeout)


def wait_until(
    check: Callable[[], T | None],
    paths: Iterable[Path] | Callable[[], Iterable[Path]],
    timeout: float | None,
    *,
    what: str = "change",
) -> T:
    """Return ``check()``'s first non-``None`` result, blocking on file events between checks.

    Each round arms watches on ``paths`` (called again if it is a function) *before* calling
    ``check``. Raises ``WaitTimeout`` when ``timeout`` seconds pass with nothing found.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    with Watch() as w:
        while True:
            for p in paths() if callable(paths) else paths:
                w.add(p)
            result = check()
            if result is not None:
                return result
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout(f"no {what} within {timeout:g}s")
            w.wait(left)


_F_SETSIG = getattr(fcntl, "F_SETSIG", 10)  # Linux's value, where the module does not name it


def being_written(path: Path | str) -> bool | None:
    """Whether some process holds ``path`` open for writing: ``True``, ``False``, or ``None``
    when this cannot be told (not the file's owner and no ``CAP_LEASE``, a filesystem without
    leases, not a regular file, gone).

    A read lease is granted only while nobody has the file open for writing; taking and at once
    dropping one asks the kernel exactly that, without waiting. A writer opening the file while
    the lease is held breaks it, and the kernel signals the lease's owner -- by default with
    SIGIO, whose default action ends the process -- so the lease is told to signal with SIGURG,
    which a process ignores unless it asked for it: another process's ``open`` never kills us.
    """
    if not hasattr(fcntl, "F_SETLEASE"):  # leases are Linux's
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, _F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError as e:
        if e.errno == errno.EAGAIN:
            return True
        return None
    else:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return False
    finally:
        os.close(fd)


class Settled(NamedTuple):
    """Whether a file someone else writes may be read as whole now (``whole``); if not, the
    ``time.time()`` at which to look again (``again``); if whole only by the bound, why
    (``note``: the file may be shown part-way)."""

    whole: bool
    again: float | None = None
    note: str | None = None


_WHOLE = Settled(True)


def settled(path: Path | str, st: os.stat_result, state: str | None, now: float) -> Settled:
    """Whether the file at ``path`` (``st``: its ``lstat``) is whole, from what its events said
    last (``state``: ``WRITING``, ``CLOSED``, ``APPEARED``, or ``None`` when no event was seen)
    and, when they cannot tell, from the kernel (``being_written``) or how long it has been
    left alone. Never waits, and never holds a file longer than ``OPEN_SETTLE`` past its last
    change (the ``ctime``, which its writer cannot set), so a writer that never closes, or one
    killed part-way, cannot stall a reader: past the bound it is shown with a ``note``.
    """
    if state == CLOSED:
        return _WHOLE
    changed = min(st.st_ctime, now)  # a clock set back never pushes the bound out
    if state == WRITING:
        writing: bool | None = True
    else:
        writing = being_written(path)
        if writing is None:
            if state == APPEARED:
                writing = st.st_size == 0  # linked in whole, or created and not written yet
            elif now - changed < QUIET_SETTLE:
                return Settled(False, changed + QUIET_SETTLE)
            else:
                return _WHOLE
    if not writing:
        return _WHOLE
    if now - changed < OPEN_SETTLE:
        return Settled(False, changed + OPEN_SETTLE)
    return Settled(
        True,
        None,
        f"still open for writing by another process, unchanged for {OPEN_SETTLE:g}s: "
        "shown as it stands, and again if it changes",
    )

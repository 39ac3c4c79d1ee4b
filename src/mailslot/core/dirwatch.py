"""Which names changed in a set of directories: kernel events with the name, for a long runner.

``core.wait.Watch`` answers "may anything have changed?" for a waiter that re-reads everything;
a process that carries files elsewhere (the bridge) must know *which* file, or it rescans the
whole tree on every event. ``DirWatch`` reports ``(directory, name)`` pairs from inotify and
exposes its descriptor, so an event loop can wait on it. Events are hints: the caller re-reads
the disk, and ``overflowed`` (the kernel's queue overflowed, events were lost) means rescan all.
Without inotify (another OS, or the watch limit reached) ``available`` is false and the caller
rescans on a timer.

``being_written`` tells a file some process still holds open for writing from one that is
whole: a file linked or renamed into place is whole on its first event, a file written in place
(``cat > f``) is not until its writer closes it.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import NamedTuple

from mailslot.core.wait import being_written

__all__ = ["Change", "DirWatch", "being_written"]

log = logging.getLogger(__name__)


class Change(NamedTuple):
    """A name in ``directory`` that appeared, was written, moved or removed."""

    directory: Path
    name: str
    is_dir: bool
    gone: bool  # removed or moved away


class DirWatch:
    """inotify watches on directories (not recursive); ``read`` returns what changed."""

    def __init__(self) -> None:
        self.overflowed = False
        self._wd: dict[int, Path] = {}
        self._paths: dict[Path, int] = {}
        try:
            from mailslot.core.inotify import INotify, flags

            self._ino: object | None = INotify(nonblocking=True)
            self._flags = flags
        except (ImportError, OSError) as e:
            log.warning("inotify unavailable (%s): rescanning on a timer", e)
            self._ino = None

    @property
    def available(self) -> bool:
        """Whether kernel events come at all."""
        return self._ino is not None

    def fileno(self) -> int:
        """The descriptor that becomes readable when events wait."""
        assert self._ino is not None
        return self._ino.fileno()  # type: ignore[attr-defined, no-any-return]

    def add(self, directory: Path) -> bool:
        """Watch ``directory`` (again, if it was replaced); whether it is watched."""
        if self._ino is None:
            return False
        f = self._flags
        mask = f.CREATE | f.CLOSE_WRITE | f.MOVED_TO | f.MOVED_FROM | f.DELETE | f.DELETE_SELF
        try:
            wd = self._ino.add_watch(str(directory), mask | f.ONLYDIR)  # type: ignore[attr-defined]
        except OSError as e:
            if e.errno == errno.ENOSPC:
                log.warning("inotify watch limit reached at %s: rescanning on a timer", directory)
            return False
        self._wd[wd] = directory
        self._paths[directory] = wd
        return True

    def watching(self, directory: Path) -> bool:
        """Whether ``directory`` has a watch."""
        return directory in self._paths

    def read(self) -> list[Change]:
        """The changes queued now (never blocks); sets ``overflowed`` when events were lost."""
        if self._ino is None:
            return []
        f = self._flags
        out: list[Change] = []
        for ev in self._ino.read(timeout=0):  # type: ignore[attr-defined]
            if ev.mask & f.Q_OVERFLOW:
                self.overflowed = True
                continue
            directory = self._wd.get(ev.wd)
            if directory is None:
                continue
            if ev.mask & f.IGNORED:
                self._wd.pop(ev.wd, None)
                if self._paths.get(directory) == ev.wd:
                    del self._paths[directory]
                continue
            if not ev.name:
                continue
            gone = bool(ev.mask & (f.DELETE | f.MOVED_FROM))
            out.append(Change(directory, ev.name, bool(ev.mask & f.ISDIR), gone))
        return out

    def close(self) -> None:
        """Release the descriptor."""
        if self._ino is not None:
            self._ino.close()  # type: ignore[attr-defined]
            self._ino = None

"""Git repositories mailslot commits to: recognising a lock a killed git left behind.

A git command that is killed while it holds ``.git/index.lock`` (a tick killed inside ``git add``)
leaves the lock file, and every later ``git add`` or ``commit`` in that repository fails until
someone removes it. Removing a lock that a live git still holds would corrupt the index, so a
lock is *stale* only when all of these hold:

* it is older than ``STALE_AFTER_S`` -- longer than any git a tick runs may take (the tick's git
  calls time out well before it), so a lock this old is not a tick's work in progress;
* no process has the lock file open (``/proc/<pid>/fd``);
* no ``git`` process has its working directory inside the repository, and no ``git`` process whose
  working directory cannot be read exists (it might be in the repository).

Where ``/proc`` is not there to ask (macOS), nothing is ever judged stale: the lock is reported by
path and left to a person. What this cannot see: a process of another user that holds the lock
open while running as someone the caller may not inspect and is not called ``git`` (a GUI or a
library linking libgit2); a tick runs as root and sees every process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["STALE_AFTER_S", "IndexLock", "clear_stale_index_lock", "index_lock"]

# Longer than any git run by mailslot may take (its git calls time out at 300 s) with margin.
STALE_AFTER_S = 600
_PROC = Path("/proc")


@dataclass(frozen=True)
class IndexLock:
    """A ``.git/index.lock``: where, how old, and whether it is stale (why not, if it is not)."""

    path: Path
    age_s: float
    stale: bool
    why_live: str | None  # what makes it look held: its age, a holder, or no way to know
    inode: int = 0  # the file judged, so a lock made afresh since is never the one removed

    def describe(self) -> str:
        """One line naming the file, its age and its standing."""
        if self.stale:
            return f"{self.path} ({self.age_s:.0f} s old, held by no process: stale)"
        return f"{self.path} ({self.age_s:.0f} s old; {self.why_live})"


def _holder(lock: Path, repo: Path) -> str | None:
    """What may hold ``lock`` (a process by pid), ``None`` if nothing does, or why it cannot
    be known."""
    if not _PROC.is_dir():
        return "no /proc to find its holder; remove it by hand once no git runs here"
    # /proc names open files by their real path: compare real paths (a root reached through a
    # symlink, or given relative, must still find the process holding its lock)
    repo_s = str(repo.resolve())
    lock_s = str(lock.parent.resolve() / lock.name)
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        pid = entry.name
        try:
            comm = (_PROC / pid / "comm").read_text().strip()
        except OSError:
            continue  # gone
        if comm.startswith("git"):
            try:
                cwd = os.readlink(_PROC / pid / "cwd")
            except PermissionError:
                return f"git process {pid} may be working in the repository"
            except OSError:
                continue  # exited (or a zombie): it holds nothing
            if cwd == repo_s or cwd.startswith(repo_s + "/"):
                return f"git process {pid} is working in the repository"
        try:
            fds = os.listdir(_PROC / pid / "fd")
        except OSError:
            continue  # not ours to inspect, and not a git: see the module docstring
        for fd in fds:
            try:
                if os.readlink(_PROC / pid / "fd" / fd) == lock_s:
                    return f"process {pid} ({comm}) has it open"
            except OSError:
                continue
    return None


def index_lock(repo: Path, *, now: float | None = None) -> IndexLock | None:
    """The repository's ``.git/index.lock`` and whether it is stale; ``None`` when there is none."""
    lock = repo / ".git" / "index.lock"
    try:
        st = os.lstat(lock)
    except OSError:
        return None
    age = (time.time() if now is None else now) - st.st_mtime
    if age < STALE_AFTER_S:
        young = f"younger than {STALE_AFTER_S} s: git may be running"
        return IndexLock(lock, age, False, young, st.st_ino)
    holder = _holder(lock, repo)
    return IndexLock(lock, age, holder is None, holder, st.st_ino)


def clear_stale_index_lock(repo: Path) -> IndexLock | None:
    """Remove the repository's ``.git/index.lock`` if it is stale (see the module docstring);
    the lock found (``stale`` true if it was removed), ``None`` if there was none."""
    found = index_lock(repo)
    if found is not None and found.stale:
        try:
            if os.lstat(found.path).st_ino == found.inode:
                found.path.unlink()
        except FileNotFoundError:
            pass  # gone meanwhile
    return found

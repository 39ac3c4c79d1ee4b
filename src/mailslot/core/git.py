"""Git, run one way: a fixed environment, a timeout, one error; and a lock a killed git left.

``run_git`` runs every git mailslot runs (the exchange's history, ``doctor``, the owners hook)
through ``core.command.run_command``: its own session, a timeout that stops its whole process
group, bounded output, ``CommandFailed`` naming the git subcommand. ``git_env`` is the environment
it runs in: ``LC_ALL=C`` (messages read the same everywhere), no terminal prompt, no pager or
editor. For mailslot's own repository (``isolated``, the default) nothing of the caller's git leaks
in either: no ``GIT_*`` variables (a tick started from a hook must not commit into the hook's
repository) and no system or user config (a user's ``commit.gpgsign``, ``core.hooksPath`` or
``core.fsmonitor`` never runs in a tick) -- except ``safe.directory``: the repositories the
caller's system or user config declares safe though another user owns them are carried over
(``safe_directories``, read only when git refuses a repository for its owner, then asked again),
so root's tick over an exchange another user owns works exactly where the admin said it may.
Nor does the repository's own config or hook directory run anything:
``core.hooksPath`` points at nothing and ``core.fsmonitor`` is off on the command line, which
outranks every config file, so a ``post-commit`` hook or an fsmonitor command planted in ``.git``
by someone who can write it (the tick's umask leaves ``.git`` group-writable) never runs as the
tick; every filter driver its ``.git/config`` defines is emptied the same way (a ``.gitattributes``
naming one runs nothing), and a config that includes other files is refused. A user's checkout (the
owners hook, which git runs mid-commit) keeps the user's config and the ``GIT_*`` variables git set
for the hook (``GIT_INDEX_FILE`` says which index the commit is made from).

What git makes in mailslot's own repository takes the repository's owner and mode, whoever
runs it and under whatever umask: ``core.sharedRepository`` is set on the command line to the
mode the repository's top directory gives its files (a ``0750`` exchange gets ``0640`` files
and ``0750`` directories, a ``2770`` group exchange ``0660`` and ``2770``), and a git run as
root in a repository another user owns (the timer's tick, under ``UMask=0007``) gives every
file it made there back to that owner and group (``_give_back``): otherwise ``.git`` fills with
root-owned objects that the owner's own git can no longer write.

Recognising a stale index lock:

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

import contextlib
import os
import pwd
import re
import shlex
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mailslot.core.command import MAX_OUTPUT, CommandResult, run_command
from mailslot.core.errors import CommandFailed
from mailslot.core.fsio import read_regular

__all__ = [
    "GIT_TIMEOUT_S",
    "STALE_AFTER_S",
    "IndexLock",
    "clear_stale_index_lock",
    "git_env",
    "index_lock",
    "run_git",
    "safe_directories",
]

# The longest a git mailslot runs may take: a commit of 100,000 new entries on a slow disk.
GIT_TIMEOUT_S = 300.0
# Longer than any git run by mailslot may take (``GIT_TIMEOUT_S``) with margin.
STALE_AFTER_S = 600


# For mailslot's own repository: no hook (``/dev/null`` holds none), no fsmonitor command and
# no signing program, whatever the repository's config or hook directory says.
_NOTHING_RUNS = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgSign=false",
    "log.showSignature=false",
    # an automatic gc runs inside the git that started it, not detached after it returned:
    # what it packs is given back to the repository's owner with the rest (``_give_back``)
    "gc.autoDetach=false",
    "maintenance.autoDetach=false",
)
# The most of a repository's config read to find its filter drivers: mailslot writes a few
# hundred bytes there, and a file past this is not one it made.
CONFIG_MAX = 1 << 20
# A section header: ``[filter "name"]``, ``[filter.name]`` (the older spelling), ``[include]``.
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\]', re.M)


def _filters_off(repo: Path) -> list[str]:
    """``-c`` settings that empty every filter driver the repository's own config defines, so a
    ``.gitattributes`` naming one runs nothing; ``CommandFailed`` for a config that includes
    other files or cannot be read whole (what it defines cannot be known: nothing is run)."""
    git_dir = repo / ".git"
    if not os.path.lexists(git_dir):
        return []  # no repository yet (``git init``), or none: git says so
    if git_dir.is_symlink() or not git_dir.is_dir():
        raise CommandFailed(
            "git",
            f"{git_dir} is not a directory; mailslot's own repository keeps its .git in place",
            path=repo,
        )
    config = git_dir / "config"
    try:
        text = read_regular(config, CONFIG_MAX).decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise CommandFailed("git", f"cannot check {config}: {e.strerror}", path=repo) from None
    names = set()
    for section, sub in _SECTION.findall(text):
        kind, _, dotted = section.partition(".")
        if kind.lower() in ("include", "includeif"):
            raise CommandFailed(
                "git",
                f"{config} includes other config files; mailslot runs git only in a repository "
                "whose config is all in one file (remove its [include] sections)",
                path=repo,
            )
        if kind.lower() == "filter" and (sub or dotted):
            name = sub.replace('\\"', '"').replace("\\\\", "\\") if sub else dotted
            if "=" in name or "\n" in name:  # cannot be named on git's command line
                raise CommandFailed("git", f"{config} defines a filter named {name!r}", path=repo)
            names.add(name)
    return [
        f"filter.{n}.{k}" + ("=false" if k == "required" else "=")
        for n in sorted(names)
        for k in ("clean", "smudge", "process", "required")
    ]


def git_env(*, isolated: bool = True) -> dict[str, str]:
    """The environment git runs in (see the module docstring); ``isolated`` for mailslot's own
    repository, false for a user's checkout."""
    env = dict(os.environ)
    if isolated:
        env = {k: v for k, v in env.items() if not k.startswith("GIT_")}
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        env["GIT_CONFIG_GLOBAL"] = os.devnull
    env.pop("LANGUAGE", None)
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_PAGER"] = "cat"
    env["GIT_EDITOR"] = "true"
    return env


def safe_directories() -> list[str]:
    """``safe.directory`` values of the caller's system and user (global) git config, in order,
    and nothing from any repository's own config (git itself ignores it there); empty when git
    or the setting is missing."""
    argv = ["git", "config", "--show-scope", "--get-all", "safe.directory"]
    try:  # at "/", outside any repository a caller might be in
        result = run_command(
            argv, timeout=GIT_TIMEOUT_S, cwd="/", env=git_env(isolated=False), check=False
        )
    except CommandFailed:
        return []
    out = []
    for line in result.out.splitlines():
        scope, _, value = line.partition("\t")
        if scope in ("system", "global") and value:
            out.append(value)
    return out


def run_git(
    repo: Path,
    *args: str,
    timeout: float = GIT_TIMEOUT_S,
    config: Sequence[str] = (),
    input: str | None = None,
    isolated: bool = True,
    max_output: int = MAX_OUTPUT,
) -> str:
    """``git -C repo [-c KEY=VALUE ...] ARGS``; its standard output as text.

    ``config`` adds ``-c`` settings (an identity, ``safe.directory``). Raises ``CommandFailed``
    (``git SUBCOMMAND failed: ...``, its ``path`` the repository) when git is missing, fails,
    overruns ``timeout`` or prints more than ``max_output`` bytes; a repository git refuses
    because another user owns it is named with its owner and the one command that trusts it.
    """
    owner: os.stat_result | None = None
    if isolated:
        config = [*_NOTHING_RUNS, *_filters_off(repo), *config]
        with contextlib.suppress(OSError):
            owner = os.stat(repo)
            shared = owner.st_mode & 0o666 | 0o600  # git refuses a mode its owner cannot write
            config = [f"core.sharedRepository=0{shared:03o}", *config]
    what = f"git {args[0] if args else ''}"

    def attempt(trusted: Sequence[str]) -> CommandResult:
        argv = ["git"]
        for setting in [*(f"safe.directory={d}" for d in trusted), *config]:
            argv += ["-c", setting]
        argv += ["-C", str(repo), *args]
        try:
            return run_command(
                argv,
                timeout=timeout,
                env=git_env(isolated=isolated),
                input=input,
                check=False,
                max_output=max_output,
            )
        except CommandFailed as e:
            raise CommandFailed(
                "git", f"{what} failed: {e.message}", path=repo, timed_out=e.timed_out
            ) from None

    since = time.time_ns()
    try:
        result = attempt(())
        if isolated and result.returncode != 0 and _DUBIOUS.search(result.err):
            # refused before doing anything: asked again with what the caller's own config
            # trusts (asked for only here, since reading it is a git process of its own)
            trusted = safe_directories()
            if trusted:
                result = attempt(trusted)
    finally:
        if owner is not None and os.geteuid() == 0 and owner.st_uid != 0:
            _give_back(repo / ".git", owner, since)
    if result.returncode != 0:
        refused = _dubious_ownership(result.err)
        if refused is not None:
            raise CommandFailed("git", f"{what} failed: {refused}", path=repo, result=result)
        lines = (result.err.strip() or result.out.strip()).splitlines()
        detail = lines[-1].strip() if lines else f"exit status {result.returncode}"
        raise CommandFailed("git", f"{what} failed: {detail}", path=repo, result=result)
    return result.out


def _give_back(git_dir: Path, owner: os.stat_result, since_ns: int) -> None:
    """Give what a git run as root made or touched in ``git_dir`` since ``since_ns`` (and any
    directory in it) to the repository's ``owner`` (its top directory's ``stat``): its user and
    group, and no permission that directory does not grant (what git wrote without
    ``core.sharedRepository``, under root's umask). Only directories changed since then are
    listed in full: a run adds a few objects, and ``.git`` holds thousands. Never through a
    symlink."""
    uid, gid, granted = owner.st_uid, owner.st_gid, owner.st_mode & 0o777
    try:
        top = os.lstat(git_dir)
    except OSError:
        return
    if not stat.S_ISDIR(top.st_mode):
        return
    _own(str(git_dir), top, uid, gid, granted)
    stack = [str(git_dir)]
    while stack:
        directory = stack.pop()
        try:
            changed = os.lstat(directory).st_mtime_ns >= since_ns
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for e in entries:
            is_dir = e.is_dir(follow_symlinks=False)
            if not (changed or is_dir):
                continue
            try:
                _own(e.path, e.stat(follow_symlinks=False), uid, gid, granted)
            except OSError:
                continue  # gone meanwhile
            if is_dir:
                stack.append(e.path)


def _own(path: str, st: os.stat_result, uid: int, gid: int, granted: int) -> None:
    """``path`` (its ``lstat``: ``st``) to ``uid``:``gid`` with no permission bit beyond
    ``granted``; a symlink is left as it is."""
    if stat.S_ISLNK(st.st_mode):
        return
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.lchown(path, uid, gid)
    if st.st_mode & 0o777 & ~granted and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        # through a descriptor opened without following a symlink: a name the owner swaps for
        # a link meanwhile is refused (ELOOP), never a path outside the repository changed
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            now = os.fstat(fd)
            if now.st_ino == st.st_ino and now.st_dev == st.st_dev:
                os.fchmod(fd, stat.S_IMODE(now.st_mode) & ~(0o777 & ~granted))
        finally:
            os.close(fd)


# git's refusal of a repository another user owns (git 2.35.2+; LC_ALL=C keeps it in English).
_DUBIOUS = re.compile(r"detected dubious ownership in repository at '(.+)'")


def _dubious_ownership(err: str) -> str | None:
    """One line for git's refusal of a repository another user owns: whose it is, and the
    command that trusts it (in the user config ``safe_directories`` carries over); ``None``
    for any other failure."""
    found = _DUBIOUS.search(err)
    if found is None:
        return None
    where = found.group(1)
    try:
        uid = os.stat(where).st_uid
        owner = f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (OSError, KeyError):
        owner = "another user"
    return (
        f"git refuses the repository at {where}: it is owned by {owner}, not by this user; "
        f"if you trust it, run: git config --global --add safe.directory {shlex.quote(where)}"
    )


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

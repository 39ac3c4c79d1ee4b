"""The exchange's local git repository: history that recovers anything overwritten or lost.

The tick commits whenever the tree is dirty, independent of whether anything was worth a
notification (seed 000: gating the commit on notify-worthy activity left an archive move
uncommitted). Commits carry mailslot's own identity (``mailslot <tick@HOST>``) passed on the
command line, so they work where git has no identity configured, and never run hooks or signing.
Archives are plain moves; ``git add -A`` picks them up whether or not the files were tracked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from pathlib import Path

from mailslot.core.errors import MailslotError
from mailslot.core.handover import held_signals

__all__ = ["GITIGNORE", "commit_all", "git_available", "init_repo", "is_repo"]

# Runtime files stay out of history (they change every tick and hold nothing to recover), and so
# does the config: its notification URLs often carry tokens, and history is forever.
GITIGNORE = """# written by mailslot: runtime state and the config (notify URLs) stay out
/.mailslot/
.*.tmp
"""


def git_available() -> bool:
    """Whether a ``git`` executable is on PATH."""
    return shutil.which("git") is not None


def is_repo(root: Path) -> bool:
    """Whether ``root`` is the top of a git repository."""
    return (root / ".git").exists()


def _identity() -> list[str]:
    host = socket.gethostname().split(".")[0] or "localhost"
    return [
        "-c",
        "user.name=mailslot",
        "-c",
        f"user.email=tick@{host}",
        "-c",
        "commit.gpgsign=false",
    ]


# How long an interrupted git gets to remove its lock files and exit before it is killed.
_GIT_STOP_GRACE = 10.0


def _git(root: Path, *args: str) -> str:
    """Run git in ``root``; its stdout.

    A git stopped while it holds ``.git/index.lock`` leaves the lock behind, which fails every
    later tick, and ``git add`` does not reliably end on SIGTERM (it can keep re-raising the
    signal in its cleanup while its worker threads run). So git runs in its own session, where
    a terminal's Ctrl-C does not reach it; an interrupt (Ctrl-C, SIGTERM) during its spawn is
    held until it is spawned; and when the tick is interrupted git is left to finish the step it
    is in (``_GIT_STOP_GRACE``) before it is stopped. Only a git that overruns that, or the
    call's own timeout, is signalled, then killed.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    proc: subprocess.Popen[str] | None = None
    try:
        # A signal during the spawn is acted on once ``proc`` exists, so git is never left
        # running unseen: it unwinds here, where the handler below stops what was spawned.
        with held_signals():
            try:
                proc = subprocess.Popen(
                    ["git", *_identity(), "-C", str(root), *args],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                    start_new_session=True,
                )
            except OSError as e:
                raise MailslotError(f"git {args[0]} failed: {e}", path=root) from None
        out, err = proc.communicate(timeout=300)
    except BaseException as e:
        if proc is None:
            raise
        _stop(proc, finish_first=not isinstance(e, subprocess.TimeoutExpired))
        if isinstance(e, subprocess.TimeoutExpired):
            raise MailslotError(f"git {args[0]} failed: {e}", path=root) from None
        raise
    if proc.returncode != 0:
        detail = (err or out).strip().splitlines()
        raise MailslotError(
            f"git {args[0]} failed: {detail[-1] if detail else proc.returncode}", path=root
        )
    return out


def _stop(proc: subprocess.Popen[str], *, finish_first: bool) -> None:
    """End ``proc``: let it finish first when asked, then SIGTERM, then SIGKILL, each bounded."""
    if finish_first:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=_GIT_STOP_GRACE)  # drains its pipes so it cannot block
            return
    proc.terminate()
    try:
        proc.communicate(timeout=_GIT_STOP_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()  # reaps it and closes its pipes


def init_repo(root: Path) -> None:
    """Create a local-only repository at ``root``; ``MailslotError`` if git fails."""
    if not git_available():
        raise MailslotError("git is not installed; install it or pass --no-git")
    _git(root, "init", "-q")
    _git(root, "config", "core.untrackedCache", "true")


def commit_all(root: Path, message: str) -> str | None:
    """``git add -A`` and commit if anything is dirty; the new sha, or ``None`` if clean.

    A clean tree is found by one ``git status`` (untracked files included), which over 100,000
    entries costs a third of ``git add -A``: the periodic check of a quiet exchange stays cheap.
    """
    if not _git(root, "status", "--porcelain", "--untracked-files=normal"):
        return None
    _git(root, "add", "-A")
    if not _git(root, "status", "--porcelain", "--untracked-files=no"):
        return None  # what was dirty a moment ago is not any more
    _git(root, "commit", "-q", "--no-verify", "-m", message)
    return _git(root, "rev-parse", "HEAD").strip()

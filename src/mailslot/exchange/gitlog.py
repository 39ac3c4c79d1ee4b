"""The exchange's local git repository: history that recovers anything overwritten or lost.

The tick commits whenever the tree is dirty, independent of whether anything was worth a
notification (gating the commit on notify-worthy activity would leave an archive move
uncommitted). Commits carry mailslot's own identity (``mailslot <tick@HOST>``) passed on the
command line, so they work where git has no identity configured, and never run hooks or signing.
Archives are plain moves; ``git add -A`` picks them up whether or not the files were tracked.
What is not the exchange's own -- dot-names (temps, drafts, an editor's swap file or lock) and an
editor's leftovers inside the inboxes -- is never committed: the repository's own
``.git/info/exclude`` says so (``EXCLUDE``, kept there by the tick), which ``git status`` and so
``doctor`` honour too. A file still being written is left out of one commit by name (``skip``).
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from mailslot.core.errors import CommandFailed
from mailslot.core.fsio import atomic_write
from mailslot.core.git import run_git

__all__ = [
    "EXCLUDE",
    "GITIGNORE",
    "commit_all",
    "ensure_exclude",
    "git_available",
    "init_repo",
    "is_repo",
]

# Runtime files stay out of history (they change every tick and hold nothing to recover), and so
# does the config: its notification URLs often carry tokens, and history is forever.
GITIGNORE = """# written by mailslot: runtime state and the config (notify URLs) stay out
/.mailslot/
.*.tmp
"""


# In .git/info/exclude: what ``listing.leftover_name`` names, inside the inboxes (at any depth).
EXCLUDE = """# mailslot: temps, drafts and editors' leftovers in the inboxes are never committed
/to-*/**/.*
/to-*/**/#*#
/to-*/**/*~
"""


def ensure_exclude(root: Path) -> bool:
    """``EXCLUDE`` in ``root``'s ``.git/info/exclude`` (added once, kept after what is there);
    whether it was added."""
    path = root / ".git" / "info" / "exclude"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    if EXCLUDE in text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    if text and not text.endswith("\n"):
        text += "\n"
    atomic_write(path, text + EXCLUDE, mode=0o644)
    return True


def git_available() -> bool:
    """Whether a ``git`` executable is on PATH."""
    return shutil.which("git") is not None


def is_repo(root: Path) -> bool:
    """Whether ``root`` is the top of a git repository."""
    return (root / ".git").exists()


def _identity() -> list[str]:
    host = socket.gethostname().split(".")[0] or "localhost"
    return ["user.name=mailslot", f"user.email=tick@{host}", "commit.gpgsign=false"]


def _git(root: Path, *args: str) -> str:
    """Run git in ``root`` as mailslot (its own identity, no hooks or signing); its stdout.

    ``core.git.run_git`` stops an interrupted git only after it finished the step it is in, so
    a tick interrupted inside ``git add`` does not leave ``.git/index.lock`` behind.
    """
    return run_git(root, *args, config=_identity())


def init_repo(root: Path) -> None:
    """Create a local-only repository at ``root``; ``CommandFailed`` if git fails."""
    if not git_available():
        raise CommandFailed("git", "git is not installed; install it or pass --no-git")
    _git(root, "init", "-q")
    _git(root, "config", "core.untrackedCache", "true")
    ensure_exclude(root)


def commit_all(root: Path, message: str, skip: Sequence[str] = ()) -> str | None:
    """``git add -A`` and commit if anything is dirty; the new sha, or ``None`` if clean.
    ``skip``: root-relative paths left out of this commit (files still being written).

    A clean tree is found by one ``git status`` (untracked files included), which over 100,000
    entries costs a third of ``git add -A``: the periodic check of a quiet exchange stays cheap.
    """
    if not _git(root, "status", "--porcelain", "--untracked-files=normal"):
        return None
    _git(root, "add", "-A", "--", ".", *(f":(exclude,literal){p}" for p in skip))
    if not _git(root, "status", "--porcelain", "--untracked-files=no"):
        return None  # what was dirty a moment ago is not any more
    _git(root, "commit", "-q", "--no-verify", "-m", message)
    return _git(root, "rev-parse", "HEAD").strip()

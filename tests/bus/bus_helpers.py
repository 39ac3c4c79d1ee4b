"""Helpers for the bus tests: real processes, real git, a charter with every kind of row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """Start a real Python process running ``code`` with ``args`` in ``sys.argv[1:]``."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )


def release(procs: list[subprocess.Popen[str]]) -> None:
    """Let processes blocked on ``sys.stdin.readline()`` go at (nearly) the same moment."""
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


def finish(procs: list[subprocess.Popen[str]], timeout: float = 240) -> list[str]:
    """Wait for every process; fail with its stderr if one failed; return their stdouts."""
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err
        outs.append(out)
    return outs


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git in ``repo`` with a fixed identity (CI's git may have none)."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.invalid",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo.parent),
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=check
    )


# A charter in the shape people write: prose around it, backticks and bold, anchors and globs.
CHARTER = """\
# Division of work

Prose before the table | with a pipe that is not a table.

| Path | Writer | Why |
|:-----|:------:|-----|
| `src/` | **Beacon** | the build |
| src/docs/ | lantern | docs inside src |
| src/*.md | lantern | top-level markdown in src |
| ./site/**/*.css | tidal | styles at any depth |
| /config.yaml | beacon | anchored with a slash |
| assets/img?.png | tidal | |
| outbox/taken/ | beacon | consumer |

| other | table |
|---|---|
| ignored | entirely |
"""

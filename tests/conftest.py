"""Shared fixtures: every test gets its own state dir and no inherited mailslot settings."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailslot.core import clock


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Point the state dir at a fresh temp dir; drop MAILSLOT_* from the environment."""
    state = tmp_path_factory.mktemp("state")
    for name in list(os.environ):
        if name.startswith("MAILSLOT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    yield state
    clock.set_clock(None)


@pytest.fixture
def run_cli() -> Iterator[object]:
    """Run the real ``mailslot`` console command in a subprocess; returns CompletedProcess."""

    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "mailslot", *args],
            input=input,
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd,
            timeout=timeout,
        )

    yield run

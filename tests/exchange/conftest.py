"""Exchange fixtures: a fresh exchange between ``claude`` and ``olu`` (git identity in env)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailslot.exchange.create import create_exchange
from mailslot.exchange.layout import Exchange


@pytest.fixture
def ex(tmp_path: Path) -> Exchange:
    """An exchange with sides claude/olu and a human ``will`` on claude's side, with git."""
    return create_exchange(tmp_path / "x", ["claude", "olu"], humans=["will:claude"])


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for the test (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)

"""Watch.close: the slow inotify close happens off the caller's path, and still happens."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from mailslot.core.wait import Watch


def test_a_closed_watch_releases_its_inotify_descriptor(tmp_path: Path) -> None:
    """Watch.close hands the (slow) inotify close to a thread; the fd is still released."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    w = Watch([tmp_path])
    fd = w._kernel._ino.fileno()  # type: ignore[union-attr]
    w.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.fstat(fd)
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError("the inotify descriptor was never closed")

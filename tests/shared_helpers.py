"""What tests of more than one channel share: plain Python, no fixtures (those live in conftest)."""

from __future__ import annotations

import threading


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    """Call ``fn`` in a daemon thread; the thread and a box that gets ``result`` or ``error``."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box

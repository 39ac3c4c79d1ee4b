"""Pausing the cyclic garbage collector around one batch of allocations.

A tick or a monitor over 10,000 topics allocates ~100,000 small containers (directory listings,
parsed headers, records) that all stay alive until the batch ends. Each collection the
allocations trigger walks all of them and frees nothing; after the batch, plain reference
counting frees them. So the batch runs with collection paused, and the objects are dropped
before it resumes (a collection triggered while they are still alive is the same wasted walk).

The collector is process-wide and batches may overlap in threads (the MCP server runs tools in
worker threads): the first batch in pauses it, the last one out resumes it if it was running
before the first, so no interleaving can leave it off.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0  # batches running now
_resume = False  # whether the collector ran before the first of them


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with cyclic collection off (reference counting still frees everything);
    it is back on after the last overlapping block if it was on before the first. Free the
    batch's objects inside the block."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()

"""Rate limits over the ``limits`` library (moving windows, in-memory storage).

Invariant: a limit that counts *accepted* things is consumed only when the thing is accepted, in
one step with the check (``take``), so a refused request never spends the sender's quota and two
concurrent requests cannot both take the last slot. In-memory storage means one server process
owns its counters: the apps run as a single uvicorn process, and a restart forgets the counts
(a restart is rare and operator-driven; the daily cap is a brake, not an accounting system).

Imported by the app factories only (``limits`` is a web extra).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from limits import RateLimitItem, RateLimitItemPerDay, RateLimitItemPerHour, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

__all__ = ["Limiter", "per_day", "per_hour", "per_seconds"]


def per_hour(n: int) -> RateLimitItem:
    """``n`` per hour."""
    return RateLimitItemPerHour(n)


def per_day(n: int) -> RateLimitItem:
    """``n`` per day."""
    return RateLimitItemPerDay(n)


def per_seconds(n: int, seconds: int) -> RateLimitItem:
    """``n`` per ``seconds`` seconds."""
    return parse(f"{n}/{seconds} seconds")


class Limiter:
    """Moving-window limits keyed by strings; ``take`` checks several limits and consumes all
    of them or none."""

    def __init__(self) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._lock = threading.Lock()

    def take(self, key: str, items: Sequence[RateLimitItem]) -> float | None:
        """Consume one unit of every item for ``key``; None if taken, else seconds to wait."""
        with self._lock:
            for item in items:
                if not self._limiter.test(item, key):
                    reset = self._limiter.get_window_stats(item, key).reset_time
                    return max(1.0, reset - time.time())
            for item in items:
                self._limiter.hit(item, key)
        return None

"""Rate limits over the ``limits`` library (moving windows, in-memory storage).

Invariants:

* A limit that counts *requests* (``take``) is consumed in one step with its check, by every
  request that reaches it.
* A limit that counts *accepted* things (``reserve``) is checked before the write and consumed
  only when the write succeeds: the check holds a slot for the write in flight, the write's
  success spends it, and a refusal during the write (a ``MailslotError``: a full disk is 507,
  nothing stored) gives it back. So a refused request never spends the sender's quota, and two
  concurrent requests cannot both take the last slot (a held slot counts against the check).
  A write that fails in an unexpected way spends its slot: whether it stored is unknown, and
  the limit errs toward counting.

In-memory storage means one server process owns its counters: the apps run as a single uvicorn
process, and a restart forgets the counts (a restart is rare and operator-driven; the daily cap
is a brake, not an accounting system).

Imported by the app factories only (``limits`` is a web extra).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from types import TracebackType

from limits import RateLimitItem, RateLimitItemPerDay, RateLimitItemPerHour, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from mailslot.core.errors import MailslotError

__all__ = ["Limiter", "Reservation", "per_day", "per_hour", "per_seconds"]


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
    """Moving-window limits keyed by strings; ``take`` and ``reserve`` check several limits and
    consume all of them or none."""

    def __init__(self) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()  # slots reserved for writes in flight, per key

    def _wait(self, key: str, items: Sequence[RateLimitItem], cost: int) -> float | None:
        """Seconds to wait if ``cost`` more units do not fit every item, else None (locked)."""
        for item in items:
            if not self._limiter.test(item, key, cost=cost):
                reset = self._limiter.get_window_stats(item, key).reset_time
                return max(1.0, reset - time.time())
        return None

    def take(self, key: str, items: Sequence[RateLimitItem]) -> float | None:
        """Consume one unit of every item for ``key``; None if taken, else seconds to wait."""
        with self._lock:
            wait = self._wait(key, items, self._held[key] + 1)
            if wait is None:
                for item in items:
                    self._limiter.hit(item, key)
        return wait

    def reserve(self, key: str, items: Sequence[RateLimitItem]) -> Reservation | float:
        """Hold one unit of every item for ``key`` for a write; the seconds to wait if none is
        free. Use the reservation as ``with`` around the write: it is spent when the write
        returns and given back when the write raises a ``MailslotError``."""
        with self._lock:
            wait = self._wait(key, items, self._held[key] + 1)
            if wait is not None:
                return wait
            self._held[key] += 1
        return Reservation(self, key, tuple(items))

    def _settle(self, key: str, items: Sequence[RateLimitItem], *, spend: bool) -> None:
        with self._lock:
            self._held[key] -= 1
            if not self._held[key]:
                del self._held[key]
            if spend:
                for item in items:
                    self._limiter.hit(item, key)


class Reservation:
    """One held unit of a key's limits; settled once, when its ``with`` block ends."""

    def __init__(self, limiter: Limiter, key: str, items: tuple[RateLimitItem, ...]) -> None:
        self._limiter = limiter
        self._key = key
        self._items = items

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        refused = isinstance(exc, MailslotError)  # nothing stored: the unit goes back
        self._limiter._settle(self._key, self._items, spend=not refused)

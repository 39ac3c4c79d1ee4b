"""Rate limits: moving windows kept in memory.

Invariants:

* A limit ``Rate(amount, seconds)`` holds in every window of ``seconds``: a unit is allowed only
  if fewer than ``amount`` were counted in the ``seconds`` before it (a moving window, never a
  fixed window that lets a burst through at each boundary).
* A limit that counts *requests* (``take``) is consumed in one step with its check, by every
  request that reaches it.
* A limit that counts *accepted* things (``reserve``) is checked before the write and consumed
  only when the write succeeds: the check holds a slot for the write in flight, the write's
  success spends it, and a refusal during the write (a ``MailslotError``: a full disk is 507,
  nothing stored) gives it back. So a refused request never spends the sender's quota, and two
  concurrent requests cannot both take the last slot (a held slot counts against the check).
  A write that fails in an unexpected way spends its slot: whether it stored is unknown, and
  the limit errs toward counting.
* Memory is bounded by the limits: a window keeps at most ``amount`` times, and the windows of
  keys that went quiet are dropped (swept once a ``SWEEP_S``).

In-memory storage means one server process owns its counters: the apps run as a single uvicorn
process, and a restart forgets the counts (a restart is rare and operator-driven; the daily cap
is a brake, not an accounting system).

The windows are kept here rather than in the ``limits`` library's memory storage: that storage
starts a timer thread every 10 ms while hits arrive and scans its windows from it, which under
wrk -c32 on the peer inbox was about a tenth of the event loop's and workers' GIL time per
message (py-spy --gil), one thread start per few messages.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from mailslot.core.errors import MailslotError

__all__ = ["SWEEP_S", "Limiter", "Rate", "Reservation", "per_day", "per_hour", "per_seconds"]

# How often the windows of keys that went quiet are dropped.
SWEEP_S = 60.0


@dataclass(frozen=True)
class Rate:
    """At most ``amount`` units in any ``seconds``-long window."""

    amount: int
    seconds: float


def per_hour(n: int) -> Rate:
    """``n`` per hour."""
    return Rate(n, 3600)


def per_day(n: int) -> Rate:
    """``n`` per day."""
    return Rate(n, 86400)


def per_seconds(n: int, seconds: int) -> Rate:
    """``n`` per ``seconds`` seconds."""
    return Rate(n, seconds)


class Limiter:
    """Moving-window limits keyed by strings; ``take`` and ``reserve`` check several limits and
    consume all of them or none."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()  # slots reserved for writes in flight, per key
        # (key, rate) -> the times of the units counted in its window, oldest first
        self._windows: dict[tuple[str, Rate], deque[float]] = {}
        self._next_sweep = clock() + SWEEP_S

    def _window(self, key: str, rate: Rate, now: float) -> deque[float]:
        times = self._windows.get((key, rate))
        if times is None:
            times = self._windows[key, rate] = deque()
        cutoff = now - rate.seconds
        while times and times[0] <= cutoff:
            times.popleft()
        return times

    def _wait(self, key: str, rates: Sequence[Rate], cost: int, now: float) -> float | None:
        """Seconds to wait if ``cost`` more units do not fit every rate, else None (locked)."""
        if now >= self._next_sweep:
            self._sweep(now)
        for rate in rates:
            times = self._window(key, rate, now)
            over = len(times) + cost - rate.amount
            if over > 0:
                # Room comes when the over-th oldest unit leaves the window; units held for
                # writes in flight are not in it yet, so then at least a second.
                leaves = times[over - 1] + rate.seconds if over <= len(times) else now
                return max(1.0, leaves - now)
        return None

    def _count(self, key: str, rates: Sequence[Rate], now: float) -> None:
        for rate in rates:
            self._window(key, rate, now).append(now)

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + SWEEP_S
        quiet = [
            kr
            for kr, times in self._windows.items()
            if not times or times[-1] <= now - kr[1].seconds
        ]
        for kr in quiet:
            del self._windows[kr]

    def take(self, key: str, rates: Sequence[Rate]) -> float | None:
        """Consume one unit of every rate for ``key``; None if taken, else seconds to wait."""
        with self._lock:
            now = self._clock()
            wait = self._wait(key, rates, self._held[key] + 1, now)
            if wait is None:
                self._count(key, rates, now)
        return wait

    def reserve(self, key: str, rates: Sequence[Rate]) -> Reservation | float:
        """Hold one unit of every rate for ``key`` for a write; the seconds to wait if none is
        free. Use the reservation as ``with`` around the write: it is spent when the write
        returns and given back when the write raises a ``MailslotError``."""
        with self._lock:
            wait = self._wait(key, rates, self._held[key] + 1, self._clock())
            if wait is not None:
                return wait
            self._held[key] += 1
        return Reservation(self, key, tuple(rates))

    def _settle(self, key: str, rates: Sequence[Rate], *, spend: bool) -> None:
        with self._lock:
            self._held[key] -= 1
            if not self._held[key]:
                del self._held[key]
            if spend:
                self._count(key, rates, self._clock())


class Reservation:
    """One held unit of a key's limits; settled once, when its ``with`` block ends."""

    def __init__(self, limiter: Limiter, key: str, rates: tuple[Rate, ...]) -> None:
        self._limiter = limiter
        self._key = key
        self._rates = rates

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        refused = isinstance(exc, MailslotError)  # nothing stored: the unit goes back
        self._limiter._settle(self._key, self._rates, spend=not refused)

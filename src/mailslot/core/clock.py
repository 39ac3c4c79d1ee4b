"""The one clock: every timestamp mailslot writes comes from ``now()``.

mailslot writes UTC with milliseconds and a ``Z`` (``2026-11-29T18:14:00.123Z``) so a send and a
``done`` in the same second still order. It reads what people and other agents write by hand:
second precision, ``+00:00``, other offsets (converted to UTC). Anything else does not parse.
Tests move time with ``set_clock``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from mailslot.core.display import brief
from mailslot.core.errors import FormatError

__all__ = [
    "FUTURE_SKEW",
    "epoch_ms",
    "format_time",
    "now",
    "parse_time",
    "set_clock",
]

# A time further ahead than this does not resolve: clocks on one host agree to well under a
# second, and a minute covers NTP steps and hand-written stamps without hiding a wrong year.
FUTURE_SKEW = timedelta(seconds=60)

_clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731

_TIME_RE = re.compile(
    r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:?[0-9]{2})$"
)


def now() -> datetime:
    """The current time, timezone-aware UTC."""
    return _clock()


def set_clock(clock: Callable[[], datetime] | None) -> None:
    """Replace the clock (tests); ``None`` restores the real one."""
    global _clock
    _clock = clock if clock is not None else (lambda: datetime.now(UTC))


def epoch_ms() -> int:
    """Milliseconds since the epoch, from the real clock (latency stamps T0/T1/T2)."""
    return time.time_ns() // 1_000_000


def format_time(dt: datetime | None = None) -> str:
    """``dt`` (default now) as UTC ISO-8601 with milliseconds and ``Z``."""
    dt = (dt or now()).astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def parse_time(value: object, *, field: str = "time", path: str | None = None) -> datetime:
    """Parse an ISO-8601 time with an explicit zone; raise ``FormatError`` naming ``field``.

    A time without a zone is refused: guessing local time is how two hosts disagree.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise FormatError("time has no timezone", field=field, path=path)
        return value.astimezone(UTC)
    if not isinstance(value, str):
        raise FormatError(f"expected an ISO-8601 time, got {brief(value)}", field=field, path=path)
    text = value.strip()
    if not _TIME_RE.match(text):
        raise FormatError(
            f"expected an ISO-8601 time with Z or an offset, got {brief(value)}",
            field=field,
            path=path,
        )
    text = text.replace(" ", "T", 1)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as e:
        raise FormatError(f"not a valid time {brief(value)}: {e}", field=field, path=path) from None
    return dt.astimezone(UTC)

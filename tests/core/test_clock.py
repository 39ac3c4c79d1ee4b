from datetime import UTC, datetime

import pytest

from mailslot.core import clock
from mailslot.core.errors import FormatError


def test_format_has_milliseconds_and_z() -> None:
    dt = datetime(2026, 11, 29, 18, 14, 0, 123456, tzinfo=UTC)
    assert clock.format_time(dt) == "2026-11-29T18:14:00.123Z"


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-01T18:14:00Z",
        "2026-09-01T18:14:00+00:00",
        "2026-09-01T20:14:00+02:00",
        "2026-09-01T18:14:00.000Z",
        "2026-09-01 18:14:00Z",
        " 2026-09-01T18:14:00Z ",
    ],
)
def test_parse_accepts_hand_written_forms(text: str) -> None:
    assert clock.parse_time(text) == datetime(2026, 9, 1, 18, 14, tzinfo=UTC)


@pytest.mark.parametrize(
    "text", ["2026-09-01T18:14:00", "yesterday", "", "2026-13-01T00:00:00Z", "2026-09-01"]
)
def test_parse_refuses_ambiguous_or_broken(text: str) -> None:
    with pytest.raises(FormatError) as e:
        clock.parse_time(text, field="at")
    assert e.value.field == "at"


def test_clock_can_be_moved() -> None:
    fixed = datetime(2030, 1, 1, tzinfo=UTC)
    clock.set_clock(lambda: fixed)
    assert clock.now() == fixed
    assert clock.format_time() == "2030-01-01T00:00:00.000Z"


def test_round_trip() -> None:
    t = clock.now()
    assert abs((clock.parse_time(clock.format_time(t)) - t).total_seconds()) < 0.001

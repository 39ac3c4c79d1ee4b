"""The rate limiter's moving windows, on a clock the test moves: a limit holds in every window
(no burst at a boundary), the wait names when room comes, held slots count, several limits are
consumed together or not at all, and windows of quiet keys are dropped."""

from __future__ import annotations

from mailslot.core.errors import NoSpace
from mailslot.web.ratelimit import SWEEP_S, Limiter, Reservation, per_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_moving_window_refuses_until_the_oldest_unit_leaves() -> None:
    clock = Clock()
    limiter = Limiter(clock)
    rate = [per_seconds(3, 10)]
    for step in (0, 1, 2):
        clock.now = 1000 + step
        assert limiter.take("a", rate) is None
    clock.now = 1005
    assert limiter.take("a", rate) == 5.0  # the unit of t=0 leaves at t=10
    assert limiter.take("b", rate) is None  # another key has its own window
    clock.now = 1010.5
    assert limiter.take("a", rate) is None
    assert limiter.take("a", rate) == 1.0  # t=1 leaves at 11: the wait is never under 1 s
    clock.now = 1011.5  # t=1 has left; t=2 and t=10.5 still count
    assert limiter.take("a", rate) is None
    assert limiter.take("a", rate) == 1.0  # t=2 leaves at 12, in 0.5 s: the floor is 1 s
    clock.now = 1019.9  # only t=10.5 and t=11.5 are left in the window
    assert limiter.take("a", rate) is None
    assert limiter.take("a", rate) == 1.0


def test_held_slots_count_and_a_refused_write_gives_its_slot_back() -> None:
    clock = Clock()
    limiter = Limiter(clock)
    rate = [per_seconds(2, 60)]
    first = limiter.reserve("p", rate)
    second = limiter.reserve("p", rate)
    assert isinstance(first, Reservation) and isinstance(second, Reservation)
    assert limiter.reserve("p", rate) == 1.0  # both in flight: none free
    try:
        with first:
            raise NoSpace("disk full")
    except NoSpace:
        pass
    with second:
        pass  # stored: spent
    third = limiter.reserve("p", rate)  # the refused write's slot came back
    assert isinstance(third, Reservation)
    with third:
        pass
    assert limiter.reserve("p", rate) == 60.0


def test_several_limits_are_consumed_together_or_not_at_all() -> None:
    clock = Clock()
    limiter = Limiter(clock)
    rates = [per_seconds(1, 20), per_seconds(2, 86400)]
    assert limiter.take("s", rates) is None
    clock.now += 5
    assert limiter.take("s", rates) == 15.0  # the short limit refuses; the day is not spent
    clock.now += 20
    assert limiter.take("s", rates) is None
    clock.now += 20
    assert limiter.take("s", rates) == 86400 - 45


def test_windows_of_quiet_keys_are_dropped() -> None:
    clock = Clock()
    limiter = Limiter(clock)
    for i in range(100):
        assert limiter.take(f"source-{i}", [per_seconds(1, 20)]) is None
    clock.now += SWEEP_S + 1
    assert limiter.take("now", [per_seconds(1, 20)]) is None
    assert len(limiter._windows) == 1

"""The guard as a pure function, over generated inputs: it archives only what resolves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from mailslot.core.clock import FUTURE_SKEW
from mailslot.exchange.guard import GuardSide, decide

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
times = st.one_of(
    st.none(),
    st.integers(-5, 5).map(lambda m: NOW + timedelta(minutes=m)),
    st.just(NOW + timedelta(days=365)),
)
sides = st.builds(
    GuardSide,
    status=st.sampled_from(["open", "done", "done", "blocked", "unknown"]),
    updated_at=times,
    state_error=st.sampled_from([None, None, "bad"]),
    newest=st.sampled_from([None, "0001-a.md", "0002-b.md"]),
    newest_at=times,
)


@given(sides, sides)
def test_archive_only_when_every_comparison_resolves(a: GuardSide, b: GuardSide) -> None:
    d = decide({"a": a, "b": b}, NOW)
    if not d.archive:
        return
    assert a.status == b.status == "done"
    assert a.state_error is None and b.state_error is None
    for mine, theirs in ((a, b), (b, a)):
        if mine.newest is None:
            continue
        assert mine.newest_at is not None and theirs.updated_at is not None
        assert mine.newest_at < theirs.updated_at  # strictly: a tie never archives
        assert theirs.updated_at <= NOW + FUTURE_SKEW and mine.newest_at <= NOW + FUTURE_SKEW


@given(sides, sides)
def test_a_hold_names_the_side_whose_ack_is_older(a: GuardSide, b: GuardSide) -> None:
    d = decide({"a": a, "b": b}, NOW)
    assert not (d.archive and d.holds)
    for owing, entry in d.holds.items():
        writer = b if owing == "a" else a
        ack = (a if owing == "a" else b).updated_at
        assert writer.newest == entry
        assert writer.newest_at is not None and ack is not None and writer.newest_at >= ack

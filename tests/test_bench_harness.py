"""The benchmark harness's own logic: how a row is compared with the baselines of its run, the
walk that is the disk's baseline, and the row a peer that cannot be installed leaves. No timing
is asserted here; the figures themselves come from ``make bench``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_common", BENCH / "common.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_common"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


def test_a_ratio_target_is_judged_against_the_baseline_of_the_same_run(common: ModuleType):
    base = common.Result("peer", "ms", p50=2.0, key="peer")
    fast = common.Result("fast", "ms", p50=1.0, vs=[common.Vs("peer", max_ratio=1.0)])
    slow = common.Result("slow", "ms", p50=3.0, vs=[common.Vs("peer", max_ratio=1.0)])
    common.compare([base, fast, slow])
    assert (fast.vs[0].ratio, fast.ok) == (0.5, True)
    assert (slow.vs[0].ratio, slow.ok) == (1.5, False)
    assert fast.target == "p50 <= 1x peer"


def test_every_target_must_hold_unless_any_one_is_enough(common: ModuleType):
    def verdict(p50: float, need: str) -> bool | None:
        peer = common.Result("peer", "ms", p50=100.0, key="peer")
        bare = common.Result("bare", "ms", p50=40.0, key="bare")
        vs = [common.Vs("peer", max_ratio=1.1), common.Vs("bare", max_over=45)]
        row = common.Result("help", "ms", p50=p50, vs=vs, need=need)
        common.compare([peer, bare, row])
        return row.ok

    assert verdict(105.0, "any") is True  # 1.05x the peer, though 65 ms over the bare start
    assert verdict(105.0, "all") is False
    assert verdict(80.0, "all") is True
    assert verdict(120.0, "any") is False  # 1.2x the peer and 80 ms over the bare start


def test_an_absolute_target_and_a_ratio_target_must_both_hold(common: ModuleType):
    base = common.Result("create", "ms", p50=1.0, key="create")
    row = common.Result("send", "ms", p50=1.2, ok=False, vs=[common.Vs("create", max_ratio=1.5)])
    common.compare([base, row])
    assert row.vs[0].ok is True
    assert row.ok is False


def test_an_absolute_target_or_a_ratio_target_is_enough_when_any_one_is(common: ModuleType):
    def verdict(p50: float, peer_p50: float | None) -> bool | None:
        peer = common.Result("post", "ms", p50=peer_p50, key="post")
        vs = [common.Vs("post", max_ratio=1.0)]
        row = common.Result("send", "ms", p50=p50, ok=p50 <= 60, vs=vs, need="any")
        common.compare([peer, row])
        return row.ok

    assert verdict(55.0, 40.0) is True  # within 60 ms, though behind the peer
    assert verdict(70.0, 75.0) is True  # over 60 ms on a slow day, ahead of the peer
    assert verdict(70.0, 65.0) is False  # neither
    assert verdict(70.0, None) is False  # no peer: the absolute target alone


def test_a_missing_baseline_leaves_the_ratio_at_na_and_the_verdict_to_the_rest(common: ModuleType):
    gone = common.Result("peer", "ms", key="peer", note="n/a (peer not installable: offline)")
    row = common.Result(
        "wait",
        "ms",
        p50=1.0,
        vs=[common.Vs("peer", max_ratio=1.0), common.Vs("raw", max_ratio=2.0)],
    )
    raw = common.Result("raw", "ms", p50=0.4, key="raw")
    common.compare([gone, row, raw])
    assert row.vs[0].ratio is None
    assert row.ok is False  # 2.5x the raw wake, whatever the peer would have said
    text = common.table([gone, row, raw])
    assert "n/a" in text and "FAIL" in text and "n/a (peer not installable: offline)" in text


def test_only_informational_comparisons_leave_no_verdict(common: ModuleType):
    base = common.Result("peer", "ms", p50=4.0, key="peer")
    row = common.Result("send", "ms", p50=2.0, vs=[common.Vs("peer")])
    common.compare([base, row])
    assert (row.vs[0].ratio, row.ok, row.target) == (0.5, None, "")


def test_the_walk_lstats_every_entry_of_every_topic_and_skips_done(
    common: ModuleType, tmp_path: Path
):
    side = tmp_path / "to-olu"
    for t in range(3):
        topic = side / f"2026-11-29-t{t}"
        topic.mkdir(parents=True)
        for n in range(4):
            (topic / f"{n:04d}-claude.md").write_text("x")
    (side / "done" / "2026-11-01-old").mkdir(parents=True)
    (side / "done" / "2026-11-01-old" / "0001-claude.md").write_text("x")
    assert common.walk([side]) == 12
    assert common.walk([side], stat=False) == 12
    assert common.walk([side, side / "done"]) == 13


def test_a_peer_venv_that_cannot_be_made_says_why_in_one_line(
    common: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(common, "PEER_VENV", tmp_path / "venv")
    monkeypatch.setattr(common.sys, "executable", "/bin/false")
    common.peers.cache_clear()
    try:
        pe = common.peers()
    finally:
        common.peers.cache_clear()
    assert pe.python is None and pe.why
    row = pe.na("peer letterbox: wait", "ms")
    assert row.p50 is None
    assert row.note.startswith("n/a (peer not installable: ") and "\n" not in row.note
    assert not (tmp_path / "venv").exists()


def test_rows_built_from_one_list_of_comparisons_are_judged_each_on_its_own(common: ModuleType):
    base = common.Result("peer", "ms", p50=2.0, key="peer")
    shared = [common.Vs("peer", max_ratio=1.0)]
    fast = common.dist("fast", [1.0], "ms", vs=shared)
    slow = common.dist("slow", [4.0], "ms", vs=shared)
    common.compare([base, fast, slow])
    assert (fast.vs[0].ratio, fast.ok) == (0.5, True)
    assert (slow.vs[0].ratio, slow.ok) == (2.0, False)

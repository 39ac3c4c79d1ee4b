"""What the receiving host survives: its disk full, and its bridge killed between writing a
file and acknowledging it. Nothing is written half and nothing is lost once it recovers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bridge_helpers import Pair, cli, converged, need_nats, send_many, wait_for


@pytest.fixture
def small_disk_size() -> str:
    return "2m"


def _litter(root: Path) -> list[Path]:
    """Anything under ``root`` that is not a whole file of the exchange: temp files, empty or
    cut-short entries."""
    files = [p for p in root.rglob("*") if p.is_file()]
    temps = [p for p in files if p.name.endswith(".tmp")]
    return temps + [p for p in files if p.suffix == ".md" and p.stat().st_size == 0]


def test_a_full_disk_on_the_receiving_host_loses_nothing_and_writes_nothing_half(
    tmp_path: Path, small_disk: Path, fill_disk
) -> None:
    need_nats()
    # b's exchange lives on a small disk of its own (its bridge state and store do not)
    (tmp_path / "b").mkdir()
    (small_disk / "ex").mkdir()
    os.symlink(small_disk / "ex", tmp_path / "b" / "ex")
    pair = Pair(tmp_path)
    pair.start()
    try:
        sent = send_many(pair.a, "a", "full", 3, "before")
        wait_for(lambda: converged(pair.a, pair.b), what="the first entries on b")
        filler = fill_disk(small_disk)
        sent += send_many(pair.a, "a", "full", 10, "while b's disk is full " + "x" * 2000)
        wait_for(
            lambda: (pair.b.status().get("peers", {}).get("a", {}).get("pending_in") or 0) > 0,
            what="b holding what it cannot write",
        )
        assert not converged(pair.a, pair.b)
        wait_for(lambda: pair.b.status().get("write_error"), what="b's status saying so")
        assert "no space" in pair.b.status()["write_error"]["reason"]
        doc = cli("bridge", "doctor", "--dir", str(pair.b.dir), "--json", check=False)
        checks = {c["check"]: c["status"] for c in json.loads(doc.stdout)["checks"]}
        assert doc.returncode == 1 and checks["writes"] == "fail"
        for rel in sent:
            p = pair.b.root / rel
            assert not p.exists() or p.read_bytes() == (pair.a.root / rel).read_bytes()
        filler.unlink()
        wait_for(lambda: converged(pair.a, pair.b), 40, "everything on b once there is room")
        assert all((pair.b.root / rel).exists() for rel in sent)
        assert _litter(pair.b.root) == []
        assert pair.b.status()["conflicts"] == 0
        wait_for(lambda: pair.b.status().get("write_error") is None, what="the alert cleared")
    finally:
        pair.stop()


def test_a_receiving_bridge_killed_again_and_again_mid_stream_writes_each_entry_once_whole(
    tmp_path: Path,
) -> None:
    import random
    import threading
    import time

    need_nats()
    pair = Pair(tmp_path)
    pair.start()
    try:
        sent: list[str] = []

        def writer() -> None:
            for i in range(12):
                sent.extend(send_many(pair.a, "a", "kills", 5, f"burst {i} " + "y" * 3000))
                time.sleep(0.05)

        t = threading.Thread(target=writer)
        t.start()
        rng = random.Random(17)
        for _ in range(3):  # b's bridge (and its server) die wherever they are: mid-write, pre-ack
            time.sleep(rng.uniform(0.2, 0.8))
            pair.b.kill9()
            pair.b.start()
        t.join()
        wait_for(lambda: converged(pair.a, pair.b), 60, "convergence after the kills")
        got = sorted(str(p.relative_to(pair.b.root)) for p in pair.b.root.rglob("*-kills/*-a.md"))
        assert got == sorted(sent) and len(sent) == 60  # each once, none missing
        for rel in sent:
            assert (pair.b.root / rel).read_bytes() == (pair.a.root / rel).read_bytes()
        assert [p for p in _litter(pair.b.root) if not p.name.startswith(".")] == []
        assert pair.b.status()["conflicts"] == 0
    finally:
        pair.stop()


def test_an_entry_that_cannot_be_written_here_holds_back_only_itself(tmp_path: Path, pair) -> None:
    pair.proxy.cut()  # what follows reaches b in one batch once the link heals
    stuck: list[str] = []
    free: list[str] = []
    for i in range(4):
        stuck += send_many(pair.a, "a", "stuck", 1, f"stuck {i}")
        free += send_many(pair.a, "a", "free", 1, f"free {i}")
    # on b the stuck topic's folder is a symlink: never written through
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (pair.b.root / "to-b").mkdir(exist_ok=True)
    link = pair.b.root / Path(stuck[0]).parent
    os.symlink(elsewhere, link)
    pair.proxy.heal()
    wait_for(lambda: all((pair.b.root / rel).exists() for rel in free), 30, "the free topic")
    wait_for(lambda: pair.b.status().get("write_error"), what="b saying what it cannot write")
    assert list(elsewhere.iterdir()) == []
    link.unlink()
    wait_for(lambda: converged(pair.a, pair.b), 30, "the stuck topic once the symlink is gone")
    assert list(elsewhere.iterdir()) == [] and _litter(pair.b.root) == []


def test_temps_a_killed_bridge_left_where_it_writes_are_swept_once_stale(pair) -> None:
    import time

    rel = send_many(pair.a, "a", "swept", 1, "one")[0]
    wait_for(lambda: (pair.b.root / rel).exists(), what="the entry on b")
    folder = (pair.b.root / rel).parent
    pair.b.kill9()
    stale, fresh = folder / ".0002-a.md.4242.0badf00d.tmp", folder / ".0003-a.md.4242.0badf00d.tmp"
    for p in (stale, fresh):
        p.write_bytes(b"half an entry")  # what a bridge killed mid-write leaves: never read
    old = time.time() - 600
    os.utime(stale, (old, old))
    pair.b.start()
    wait_for(lambda: not stale.exists(), what="the stale temp swept")
    assert fresh.exists()  # young: its writer may be alive
    assert (pair.b.root / rel).read_bytes() == (pair.a.root / rel).read_bytes()

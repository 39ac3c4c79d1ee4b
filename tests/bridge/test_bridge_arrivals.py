"""The arrival receipts kept on the home host: one line appended per receipt, the first per
entry standing, a line cut short never read, a file of waste rewritten, every read bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bridge_helpers import cli

from mailslot.exchange import arrivals as arr

T = "2026-12-02-receipts"


def _file(meta: Path) -> Path:
    return meta / "arrivals" / "to-b" / f"{T}.jsonl"


def test_each_receipt_is_one_appended_line_and_the_first_stands(tmp_path: Path) -> None:
    assert arr.record_arrival(tmp_path, "b", T, "0001-a.md", 10)
    path = _file(tmp_path)
    ino, size = path.stat().st_ino, path.stat().st_size
    assert arr.record_arrival(tmp_path, "b", T, "0002-a.md", 20)
    assert not arr.record_arrival(tmp_path, "b", T, "0001-a.md", 99)  # a redelivery
    assert path.stat().st_ino == ino  # appended, not rewritten
    lines = path.read_bytes().splitlines()
    assert len(lines) == 2 and path.stat().st_size > size
    assert json.loads(lines[1]) == {"name": "0002-a.md", "ns": 20}
    assert arr.arrivals(tmp_path, "b", T) == {"0001-a.md": 10, "0002-a.md": 20}


def test_a_line_cut_short_is_not_read_and_the_next_receipt_starts_afresh(tmp_path: Path) -> None:
    arr.record_arrival(tmp_path, "b", T, "0001-a.md", 10)
    path = _file(tmp_path)
    with open(path, "ab") as f:
        f.write(b'{"name": "0002-a.md", "ns": 2')  # a writer killed mid-line
    assert arr.arrivals(tmp_path, "b", T) == {"0001-a.md": 10}
    assert arr.record_arrival(tmp_path, "b", T, "0002-a.md", 20)
    assert arr.arrivals(tmp_path, "b", T) == {"0001-a.md": 10, "0002-a.md": 20}
    with open(path, "ab") as f:
        f.write(b'not json\n{"name": 3, "ns": "x"}\n{"name": "0003-a.md", "ns": 1.5}\n')
    assert arr.arrivals(tmp_path, "b", T) == {"0001-a.md": 10, "0002-a.md": 20}


def test_a_large_file_of_waste_is_rewritten_with_its_receipts_only(tmp_path: Path) -> None:
    arr.record_arrival(tmp_path, "b", T, "0001-a.md", 10)
    path = _file(tmp_path)
    with open(path, "ab") as f:
        f.write(b"garbage line\n" * (arr._COMPACT_BYTES // 10))
    assert arr.record_arrival(tmp_path, "b", T, "0002-a.md", 20)
    assert path.stat().st_size < 200
    assert arr.arrivals(tmp_path, "b", T) == {"0001-a.md": 10, "0002-a.md": 20}


def test_a_file_over_its_bound_is_not_read_and_not_grown(tmp_path: Path) -> None:
    arr.record_arrival(tmp_path, "b", T, "0001-a.md", 10)
    path = _file(tmp_path)
    os.truncate(path, arr._MAX_ARRIVALS_BYTES + 1)
    assert arr.arrivals(tmp_path, "b", T) == {}  # unresolved: the topic is not archived
    assert not arr.record_arrival(tmp_path, "b", T, "0002-a.md", 20)
    assert path.stat().st_size == arr._MAX_ARRIVALS_BYTES + 1


def test_a_burst_of_receipts_is_one_append_per_topic_and_the_first_stands(tmp_path: Path) -> None:
    from mailslot.bridge.config import BridgedExchange
    from mailslot.bridge.materialise import Outcome, materialise_receipts
    from mailslot.bridge.wire import KIND_RECEIPT, Incoming
    from mailslot.exchange import load_exchange

    cli("exchange", "init", str(tmp_path / "ex"), "--side", "a", "--side", "b", "--no-git")
    ex = load_exchange(tmp_path / "ex")
    bx = BridgedExchange("ex", ex.root, {"a": "home", "b": "reader"}, "home")
    assert arr.record_arrival(ex.meta, "b", T, "0001-a.md", 10)
    path = _file(ex.meta)
    ino = path.stat().st_ino

    def receipt(name: str, ns: int) -> Incoming:
        return Incoming(KIND_RECEIPT, "reader", bx, "b", T, name, 0, str(ns).encode())

    # a peer catching up: 200 receipts, one redelivered from before, one twice in the run
    run = [receipt(f"{n:04d}-a.md", 1000 + n) for n in range(1, 201)]
    run.append(receipt("0002-a.md", 99))
    outcomes = materialise_receipts(run, {})
    assert outcomes[0] is Outcome.SAME  # 0001 was recorded before with ns 10
    assert outcomes[1:200] == [Outcome.WRITTEN] * 199
    assert outcomes[200] is Outcome.SAME  # the second 0002 in the run
    assert path.stat().st_ino == ino  # appended, not rewritten
    got = arr.arrivals(ex.meta, "b", T)
    assert len(got) == 200 and got["0001-a.md"] == 10 and got["0002-a.md"] == 1002
    assert len(path.read_bytes().splitlines()) == 200

"""A directory's rotation slot trusts its ctime to vouch for its names only once that ctime is
settled: a file system's timestamps can be a whole second coarse, so a name added and the mtime
put back within that second leave both the mtime and the ctime as they were listed. A ctime that
was newer than ``scan.RACY_NS`` when listed is not kept, and the slot lists the directory in full.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from exhelp import hand_entry, tick

from mailslot.exchange import scan
from mailslot.exchange.create import create_exchange

T = "2026-11-01-gate-bug"
OLD = 1_700_000_000


@pytest.fixture
def coarse_disk(tmp_path: Path) -> Iterator[Path]:
    """An ext4 file system with 128-byte inodes, whose timestamps are whole seconds, mounted
    at ``tmp_path/coarse`` (needs root and mkfs.ext4; skipped otherwise)."""
    mkfs = shutil.which("mkfs.ext4") or "/usr/sbin/mkfs.ext4"
    if os.geteuid() != 0 or not os.path.exists(mkfs):
        pytest.skip("mounting an ext4 image needs root and mkfs.ext4")
    image, disk = tmp_path / "coarse.img", tmp_path / "coarse"
    with image.open("wb") as f:
        f.truncate(32 << 20)
    subprocess.run([mkfs, "-q", "-F", "-I", "128", str(image)], check=True, capture_output=True)
    disk.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _quick(root: Path) -> Any:
    import json

    keys, ints, digests, names = json.loads((root / ".mailslot" / "tick-quiet.json").read_text())[
        "copies"
    ]  # tickstate.quick_columns: each copy's fields put back in QuickRecord order
    return {
        key: [*ints[4 * i : 4 * i + 3], digests[i], ints[4 * i + 3], names[i]]
        for i, key in enumerate(keys)
    }


def test_a_name_added_within_the_ctime_second_is_found_in_its_slot(coarse_disk: Path) -> None:
    root = coarse_disk / "x"
    create_exchange(root, ["claude", "olu"], git=False)
    for attempt in range(3):  # each within one second of the clock; a slow machine tries again
        topic = f"2026-11-0{attempt + 1}-gate-bug"
        hand_entry(root, "claude", topic, 1, "olu", "2026-11-01T09:00:00Z")
        d = root / "to-claude" / topic
        time.sleep(2.5)  # the entry settled: the copy keeps a quick record
        os.utime(d, (OLD, OLD))
        tick(root)
        while time.time() % 1 > 0.05:  # the start of a second: what follows fits in it
            time.sleep(0.005)
        os.utime(d, (OLD, OLD))  # a restore puts the mtime back: the ctime is now
        ctime = d.stat().st_ctime_ns
        for _ in range(scan.ROTATION):  # until the slot has looked at the directory since
            tick(root)
        # a hand writer's entry, and the mtime put back again, in the same second
        hand_entry(root, "claude", topic, 2, "olu", "2026-11-01T09:01:00Z")
        os.utime(d, (OLD, OLD))
        if d.stat().st_ctime_ns == ctime:
            break
    assert (d.stat().st_mtime_ns, d.stat().st_ctime_ns) == (OLD * 10**9, ctime)
    found = []
    for _ in range(scan.ROTATION):
        found += tick(root)["new_entries"]
    assert found == [f"to-claude/{topic}/0002-olu.md"]


def test_a_settled_ctime_lets_the_slot_lstat_the_names_without_a_listing(
    ex: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock ten seconds ahead: every ctime is settled, so the slot lstats the names it was
    listed with and lists nothing while they are as they were, and finds an entry rewritten in
    place."""
    ahead = types.SimpleNamespace(time_ns=lambda: time.time_ns() + 10 * 10**9)
    monkeypatch.setattr(scan, "time", ahead)
    root = ex.root
    p = hand_entry(root, "claude", T, 1, "olu", "2026-11-01T09:00:00Z", body="x" * 50)
    os.utime(root / "to-claude" / T, (OLD, OLD))
    tick(root)
    assert _quick(root)[f"to-claude/{T}"][4] > 0  # the ctime kept, with the names
    listed: list[str] = []
    real = scan._scan_dir

    def counted(path: str, *args: Any, **kwargs: Any) -> Any:
        listed.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(scan, "_scan_dir", counted)
    monkeypatch.setattr(scan, "ROTATION", 1)  # every directory's turn
    assert tick(root)["new_entries"] == [] and listed == []
    p.write_text(p.read_text().replace("x" * 50, "small"))  # rewritten in place
    out = tick(root)
    assert [w["path"] for w in out["rewritten"]] == [f"to-claude/{T}/0001-olu.md"]

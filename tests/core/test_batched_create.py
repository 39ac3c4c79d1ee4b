"""create_many: many files created at once with shared syncs, each whole, none overwritten."""

from __future__ import annotations

import os

from mailslot.core.fsio import SYNCFS_MIN, create_many


def test_a_batch_creates_every_file_whole_and_never_overwrites(tmp_path) -> None:
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    existing = tmp_path / "d1" / "0003-a.md"
    existing.write_bytes(b"already here")
    items = [
        (tmp_path / f"d{1 + i % 2}" / f"{i:04d}-a.md", f"entry {i}\n".encode(), 0o640)
        for i in range(SYNCFS_MIN * 3)
    ]
    created = create_many(items)
    assert created == [path != existing for path, _, _ in items]
    assert existing.read_bytes() == b"already here"
    for (path, data, _), new in zip(items, created, strict=True):
        if new:
            assert path.read_bytes() == data
            assert os.stat(path).st_mode & 0o777 == 0o640
    leftovers = [
        p.name for d in ("d1", "d2") for p in (tmp_path / d).iterdir() if p.name.startswith(".")
    ]
    assert leftovers == []


def test_a_small_batch_and_a_repeat_of_one(tmp_path) -> None:
    target = tmp_path / "0001-a.md"
    assert create_many([(target, b"one\n", 0o644)]) == [True]
    assert create_many([(target, b"two\n", 0o644)]) == [False]
    assert target.read_bytes() == b"one\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0001-a.md"]

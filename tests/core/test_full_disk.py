"""A full disk (a real 64 KiB tmpfs) during a core write: ``NoSpace`` naming the file, the old
content byte for byte, no temp or sidecar left behind, and the same write succeeds once there is
room again. A move needs no room at all."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mailslot.core import fsio
from mailslot.core.errors import NoSpace
from mailslot.core.move import safe_move
from mailslot.core.rewrite import rewrite
from shared_helpers import names_left

BIG = b"x" * 20_000  # several pages: with a page or two free, part of it fits, then ENOSPC
OLD = b"old line\n"


def _append_after(body: bytes) -> Callable[[bytes], bytes]:
    return lambda data: data + body


# name -> (file it touches, the write, what the file holds once the write succeeds)
WRITES: dict[str, tuple[str, Callable[[Path], object], bytes | None]] = {
    "atomic_create": ("new.md", lambda d: fsio.atomic_create(d / "new.md", BIG), BIG),
    "atomic_write": ("state.yaml", lambda d: fsio.atomic_write(d / "state.yaml", BIG), BIG),
    "stage_write": ("state.yaml", lambda d: fsio.stage_write(d / "state.yaml", BIG).commit(), BIG),
    "locked_append": (
        "log.md",
        lambda d: fsio.locked_append(d / "log.md", BIG, fsync=True),
        OLD + BIG,
    ),
    "rewrite": (
        "tasks.md",
        lambda d: rewrite(d / "tasks.md", _append_after(BIG), lock=d / ".tasks.lock"),
        OLD + BIG,
    ),
    "numbered_create": (
        "0001-claude.md",
        lambda d: fsio.numbered_create(d, "claude.md", BIG),
        BIG,
    ),
    "create_many": (
        "many.md",
        lambda d: fsio.create_many([(d / "many.md", BIG, 0o644)]),
        BIG,
    ),
}


@pytest.mark.parametrize("leave_pages", [0, 2], ids=["no-page-free", "two-pages-free"])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_full_disk_leaves_the_old_content_and_says_so(
    small_disk: Path, fill_disk, write: str, leave_pages: int
) -> None:
    name, do, after = WRITES[write]
    target = small_disk / "topic"
    target.mkdir()
    for existing in ("state.yaml", "log.md", "tasks.md"):
        (target / existing).write_bytes(OLD)
    (target / ".tasks.lock").touch()
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    filler = fill_disk(small_disk, leave_pages)
    with pytest.raises(NoSpace) as e:
        do(target)
    assert "no space left to write" in e.value.message
    assert e.value.path == target
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before  # nothing else, no temp
    filler.unlink()  # room again: the same write goes through
    do(target)
    assert (target / name).read_bytes() == after
    assert [n for n in names_left(target) if n.startswith(".")] == [".tasks.lock"]


def test_a_move_on_a_full_disk_needs_no_room(small_disk: Path, fill_disk) -> None:
    (small_disk / "to-olu").mkdir()
    (small_disk / "to-olu" / "done").mkdir()
    topic = small_disk / "to-olu" / "2026-12-02-t"
    topic.mkdir()
    (topic / "0001-claude.md").write_bytes(OLD)
    fill_disk(small_disk)
    safe_move(topic / "0001-claude.md", small_disk / "to-olu" / "0001-claude.md")
    safe_move(topic, small_disk / "to-olu" / "done" / topic.name)
    assert (small_disk / "to-olu" / "0001-claude.md").read_bytes() == OLD
    assert os.listdir(small_disk / "to-olu" / "done" / topic.name) == []

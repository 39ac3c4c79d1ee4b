"""A take under damage: nothing after its output waits on the disk; the next take settles it.

A take moves the item into ``taken/`` and writes its taker's record without fsync, prints, and
exits. The put's record (who, for whom, the note, the sha256) stays in ``outbox/records/`` until
a later take, before it claims or waits, has fsync'd the taker's record that carries it and the
folders of the move. SIGKILL at any step of either leaves every item whole in ``outbox/`` or
``taken/`` with its record; what a power cut can undo (a taker's record left empty, a move not
on disk) is played by hand: at worst the item is taken again, never lost, never without its
record.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mailslot.bus import outbox

NOTE = "the card, 1200x630"
TRACED = "fsync,fdatasync,write,rename,renameat,renameat2,link,linkat,unlink,unlinkat"


def _strace() -> str:
    """The strace command; skips where strace cannot trace (fails on CI)."""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("CI"):
            pytest.fail("strace is required on CI (scripts/sysdeps.sh installs it)")
        pytest.skip("strace not installed (make sysdeps)")
    probe = subprocess.run([strace, "-qq", "true"], capture_output=True, text=True)
    if probe.returncode != 0:  # ptrace forbidden here (a container's seccomp, Yama)
        pytest.skip(f"strace cannot trace here: {probe.stderr.strip()}")
    return strace


def _syscalls(argv: list[str], out: Path) -> list[str]:
    """``argv`` run under ``strace -f -y`` (file syscalls and writes): each call's name and its
    first argument (a descriptor with the path it names, ``4</dir/f>``), in order."""
    r = subprocess.run(
        [_strace(), "-f", "-qq", "-y", "-e", f"trace={TRACED}", "-o", str(out), *argv],
        timeout=120,
        stdout=subprocess.DEVNULL,
    )
    assert r.returncode == 0
    found = re.findall(r"^\d+\s+(\w+)\((\d+(?:<[^>]*>)?|\"[^\"]*\")", out.read_text(), re.M)
    return [f"{name}({arg})" for name, arg in found]


def _take_argv(root: Path, *options: str) -> list[str]:
    argv = [sys.executable, "-m", "mailslot", "--root", str(root), "--as", "beacon"]
    return [*argv, "outbox", "take", *options]


def _take(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """A plain take in its own process."""
    return subprocess.run(_take_argv(root, *options), capture_output=True, text=True, timeout=120)


def _killed_take(root: Path, kill_at: str) -> None:
    """A take SIGKILLed by strace on entering the syscall ``kill_at`` (``name:when=N``)."""
    syscall, when = kill_at.split(":")
    inject = f"inject={syscall}:signal=KILL:{when}"
    r = subprocess.run(
        [_strace(), "-f", "-qq", "-e", f"trace={syscall}", "-e", inject, *_take_argv(root)],
        capture_output=True,
        timeout=120,
    )
    assert r.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), r.stderr


def _put(root: Path, tmp_path: Path, name: str = "card.txt") -> outbox.Item:
    src = tmp_path / name
    src.write_text(f"the {name}\n")
    return outbox.put(root, "lantern", src, note=NOTE)


def _records(root: Path, item: outbox.Item) -> list[dict[str, object]]:
    """The records of ``item`` that parse, in ``outbox/records/`` and ``taken/records/``."""
    kept = []
    for folder in ("outbox/records", "outbox/taken/records"):
        path = root / folder / f"{item.name}.json"
        try:
            kept.append(json.loads(path.read_text()))
        except (FileNotFoundError, ValueError):
            continue
    return kept


def _whole(root: Path, item: outbox.Item) -> str:
    """Where ``item`` is (``outbox`` or ``outbox/taken``): in exactly one, its bytes whole, and
    its put's record (the note, the sha256) in one of the two records folders."""
    places = [d for d in ("outbox", "outbox/taken") if (root / d / item.name).exists()]
    content = f"the {item.source}\n"
    assert [(root / d / item.name).read_text() for d in places] == [content], places
    assert any(
        r.get("note") == NOTE and r.get("sha256") == item.sha256 for r in _records(root, item)
    ), "the item lost its record"
    return places[0]


def _settled(root: Path, item: outbox.Item) -> None:
    """``item`` taken for good: its put's record gone, its taker's record carrying it."""
    assert not (root / "outbox" / "records" / f"{item.name}.json").exists()
    rec = json.loads((root / "outbox" / "taken" / "records" / f"{item.name}.json").read_text())
    assert (rec["taken_by"], rec["note"], rec["sha256"]) == ("beacon", NOTE, item.sha256)
    assert (root / "outbox" / "taken" / item.name).read_text() == f"the {item.source}\n"


# -- the order of a take ----------------------------------------------------------------------


def test_nothing_after_a_takes_output_waits_on_the_disk(root: Path, tmp_path: Path) -> None:
    """Claimed (the move, the taker's record), printed, gone: no fsync, rename or unlink after
    the output. A power cut before the disk has it finds the item in outbox/ again."""
    item = _put(root, tmp_path)
    calls = _syscalls(_take_argv(root, "--wait", "5"), tmp_path / "strace.txt")
    claim = next(i for i, c in enumerate(calls) if c.startswith(("renameat2", "link")))
    shown = next(i for i, c in enumerate(calls) if c.startswith("write(1<"))
    assert claim < shown, calls
    assert not [c for c in calls[claim:shown] if "sync" in c], calls[claim : shown + 1]
    assert not [c for c in calls[shown + 1 :] if not c.startswith("write(")], calls[shown:]
    (taken,) = outbox.list_items(root, taken=True)
    assert (taken.name, taken.taken_by, taken.note) == (item.name, "beacon", NOTE)
    # Unsettled: the put's record stays beside the taker's until a later take settles it.
    assert len(_records(root, item)) == 2


def test_the_next_take_settles_the_last_before_it_claims(root: Path, tmp_path: Path) -> None:
    """The taker's record fsync'd, then its folder and the move's two, and only then the put's
    record removed: a power cut at any point leaves the item one whole record."""
    first = _put(root, tmp_path, "a.txt")
    assert _take(root).returncode == 0
    second = _put(root, tmp_path, "b.txt")
    calls = _syscalls(_take_argv(root, "--wait", "5"), tmp_path / "strace.txt")

    def synced(path: Path) -> int:
        return next(i for i, c in enumerate(calls) if c.startswith("fsync(") and f"<{path}>" in c)

    taken = root / "outbox" / "taken"
    removed = calls.index(f'unlink("{root / "outbox" / "records" / first.name}.json")')
    record = synced(taken / "records" / f"{first.name}.json")
    folders = [synced(taken / "records"), synced(taken), synced(root / "outbox")]
    assert record < min(folders) and max(folders) < removed, calls
    claim = next(i for i, c in enumerate(calls) if c.startswith(("renameat2", "link")))
    assert removed < claim, calls
    _settled(root, first)
    assert _whole(root, second) == "outbox/taken"


def test_a_take_waiting_on_an_empty_outbox_has_settled_the_last(root: Path, tmp_path: Path) -> None:
    first = _put(root, tmp_path, "a.txt")
    assert _take(root).returncode == 0
    waiter = subprocess.Popen(
        _take_argv(root, "--wait", "60"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        put_record = root / "outbox" / "records" / f"{first.name}.json"
        for _ in range(1200):  # until the waiter has settled (bounded; not a timing assertion)
            if not put_record.exists() or waiter.poll() is not None:
                break
            time.sleep(0.05)
        assert waiter.poll() is None, waiter.communicate()
        _settled(root, first)  # settled while it waits: nothing was there to take
        second = _put(root, tmp_path, "b.txt")
        out, err = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert out.strip() == str(root / "outbox" / "taken" / second.name)


# -- SIGKILL at every step --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kill_at", "settles"),
    [
        ("write:when=1", False),  # the taker's record, into its unnamed file
        ("linkat:when=1", False),  # the record's file about to be linked under its name
        ("write:when=2", True),  # the output, about to be written (taken, never shown)
        ("exit_group:when=1", True),  # right after the output
    ],
    ids=["record-write", "record-link", "output", "after-output"],
)
def test_a_take_killed_at_any_step_is_settled_or_keeps_the_puts_record(
    root: Path, tmp_path: Path, kill_at: str, settles: bool
) -> None:
    """Killed after its move, the item is in taken/; the next take settles it where the
    taker's record is whole, and otherwise leaves the put's record as the item's record."""
    item = _put(root, tmp_path)
    _killed_take(root, kill_at)
    assert _whole(root, item) == "outbox/taken"
    # The taker's record is whole under its name or not there: no temp of it is left over.
    assert [n for n in os.listdir(root / "outbox" / "taken" / "records") if n[0] == "."] == []
    assert _take(root).returncode == 3  # nothing else to take; the settle ran
    assert _whole(root, item) == "outbox/taken"
    if settles:
        _settled(root, item)
    else:  # no taker's record: the put's stays, and list --taken shows it
        assert (root / "outbox" / "records" / f"{item.name}.json").exists()
        (shown,) = outbox.list_items(root, taken=True)
        assert (shown.note, shown.sha256) == (NOTE, item.sha256)


@pytest.mark.parametrize(
    "kill_at",
    [
        "fsync:when=1",  # the earlier taker's record
        "fsync:when=2",  # taken/records/
        "fsync:when=3",  # taken/
        "fsync:when=4",  # outbox/
        "unlink:when=1",  # the put's record, about to be removed
    ],
)
def test_a_settle_killed_at_any_step_loses_no_item_and_no_record(
    root: Path, tmp_path: Path, kill_at: str
) -> None:
    first = _put(root, tmp_path, "a.txt")
    assert _take(root).returncode == 0
    second = _put(root, tmp_path, "b.txt")
    _killed_take(root, kill_at)  # killed while it settles the first take
    assert _whole(root, first) == "outbox/taken"
    assert _whole(root, second) == "outbox"  # the settle comes before the claim
    r = _take(root)
    assert r.returncode == 0 and r.stdout.strip().endswith(second.name), r.stderr
    assert _take(root).returncode == 3
    _settled(root, first)
    _settled(root, second)


# -- what a power cut can undo, played by hand ------------------------------------------------


def test_a_takers_record_a_power_cut_emptied_leaves_the_puts_in_place(
    root: Path, tmp_path: Path
) -> None:
    """A rename without fsync can come back from a power cut as an empty file: the put's record
    is removed only for a taker's record that carries it, so it stays the item's record."""
    item = _put(root, tmp_path)
    assert _take(root).returncode == 0
    (root / "outbox" / "taken" / "records" / f"{item.name}.json").write_text("")
    assert _take(root).returncode == 3
    assert (root / "outbox" / "records" / f"{item.name}.json").exists()
    r = _take(root)  # and again: never settled on an empty record
    assert r.returncode == 3 and _whole(root, item) == "outbox/taken"
    listing = [sys.executable, "-m", "mailslot", "--root", str(root), "outbox", "list"]
    r = subprocess.run([*listing, "--taken", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (shown,) = json.loads(r.stdout)["items"]
    assert (shown["note"], shown["sha256"], shown["has_record"]) == (NOTE, item.sha256, True)


def test_a_move_a_power_cut_undid_is_taken_again_with_its_record(
    root: Path, tmp_path: Path
) -> None:
    """The taker's record reached the disk, the move did not: the item is back in outbox/, so
    its put's record stays, and the next take shows it with it."""
    item = _put(root, tmp_path)
    assert _take(root).returncode == 0
    os.rename(root / "outbox" / "taken" / item.name, root / "outbox" / item.name)
    r = _take(root, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["item"], got["note"], got["sha256_ok"]) == (item.name, NOTE, True)
    assert _take(root).returncode == 3
    _settled(root, item)


def test_a_move_killed_half_way_keeps_the_puts_record_for_its_second_name(
    root: Path, tmp_path: Path
) -> None:
    """Where the move falls back to link and unlink, a kill between leaves the item under both
    names: the one still in outbox/ is taken again with the put's record, never without it."""
    item = _put(root, tmp_path)
    assert _take(root).returncode == 0
    os.link(root / "outbox" / "taken" / item.name, root / "outbox" / item.name)
    r = _take(root, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["item"].startswith(f"{item.name}.") and got["path"].startswith("outbox/taken/")
    assert (got["note"], got["sha256_ok"]) == (NOTE, True)
    assert not (root / "outbox" / "records" / f"{item.name}.json").exists()  # settled at once


# -- a full disk ------------------------------------------------------------------------------


def test_a_take_on_a_full_disk_takes_nothing_and_keeps_the_record(
    small_disk: Path, fill_disk
) -> None:
    """The taker's record cannot be written: the take fails before its output, the item is
    back in outbox/ (or, if even that failed, in taken/) with its put's record, and taken
    whole once there is room again."""
    from mailslot.bus import layout

    bus = small_disk / "shared"
    layout.init(bus, consumer="beacon")
    item = _put(bus, small_disk.parent)
    filler = fill_disk(small_disk)
    r = _take(bus)
    assert r.returncode == 1 and "no space" in r.stderr.lower(), r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    _whole(bus, item)
    filler.unlink()
    r = _take(bus, "--json")
    assert r.returncode == 0, r.stderr
    assert (json.loads(r.stdout)["note"], _whole(bus, item)) == (NOTE, "outbox/taken")
    assert _take(bus).returncode == 3
    _settled(bus, item)


def test_a_settle_the_disk_refuses_leaves_the_record_and_the_take_goes_on(
    root: Path, tmp_path: Path
) -> None:
    """An fsync that fails (EIO) proves nothing durable: the put's record stays, the take still
    takes, and a later settle finishes the job."""
    first = _put(root, tmp_path, "a.txt")
    assert _take(root).returncode == 0
    second = _put(root, tmp_path, "b.txt")
    inject = "inject=fsync:error=EIO:when=1"
    r = subprocess.run(
        [_strace(), "-f", "-qq", "-e", "trace=fsync", "-e", inject, *_take_argv(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith(second.name), r.stderr
    assert (root / "outbox" / "records" / f"{first.name}.json").exists()
    assert _whole(root, first) == "outbox/taken"
    assert _take(root).returncode == 3
    _settled(root, first)
    _settled(root, second)


# -- an undone take beside another taker ------------------------------------------------------


def test_an_undone_take_keeps_the_record_of_a_take_that_claims_the_item_back(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A take whose output fails moves the item back; another take (its own process) claims
    it in the instant after that move. The second taker's record survives the undo."""
    item = _put(root, tmp_path)
    real_move = outbox.safe_move
    second: list[subprocess.CompletedProcess[str]] = []

    def move_then_race(src: Path, dest: Path, **kw: bool) -> None:
        real_move(src, dest, **kw)
        if dest.parent == root / "outbox" and not second:  # the undo's move: race it
            second.append(_take(root))

    def output_fails(_: outbox.Item) -> None:
        raise BrokenPipeError

    monkeypatch.setattr(outbox, "safe_move", move_then_race)
    with pytest.raises(BrokenPipeError):
        outbox.take(root, "beacon", show=output_fails)
    assert second and second[0].returncode == 0, second
    assert _whole(root, item) == "outbox/taken"
    rec = json.loads((root / "outbox" / "taken" / "records" / f"{item.name}.json").read_text())
    assert (rec["taken_by"], rec["note"], rec["sha256"]) == ("beacon", NOTE, item.sha256)
    assert outbox.list_items(root, taken=True)[0].taken_by == "beacon"

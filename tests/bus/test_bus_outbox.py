"""outbox/: atomic drops with records; only the charter's consumer takes; races take once."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from bus_helpers import finish, release, spawn

from mailslot.bus import outbox
from mailslot.core.errors import (
    Conflict,
    Gone,
    InvalidValue,
    LimitExceeded,
    MailslotError,
    NotFound,
    WaitTimeout,
)


def deliverable(tmp_path: Path, name: str = "og-card.png", data: bytes = b"PNG...") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def test_put_copies_in_with_a_record(root: Path, tmp_path: Path) -> None:
    src = deliverable(tmp_path, data=b"card bytes")
    item = outbox.put(root, "lantern", src, recipient="beacon", note="OG card, 1200x630")
    assert item.path == "outbox/000001-og-card.png"
    assert (root / item.path).read_bytes() == b"card bytes"
    record = json.loads((root / "outbox/records/000001-og-card.png.json").read_text())
    assert record["from"] == "lantern" and record["for"] == "beacon"
    assert record["note"] == "OG card, 1200x630" and record["bytes"] == 10
    assert record["sha256"] == hashlib.sha256(b"card bytes").hexdigest()
    assert record["at"].endswith("Z") and record["source"] == "og-card.png"
    src.write_bytes(b"changed later")  # a copy, not a link
    assert (root / item.path).read_bytes() == b"card bytes"
    assert [p for p in (root / "outbox").iterdir() if p.name.startswith(".")] == []


def test_names_are_numbered_sanitised_and_never_reused(root: Path, tmp_path: Path) -> None:
    a = outbox.put(root, "lantern", deliverable(tmp_path, "guide draft (v2).md"))
    assert a.name == "000001-guide-draft-v2-.md"
    b = outbox.put(root, "lantern", deliverable(tmp_path, ".hidden"))
    assert b.name == "000002-hidden"  # never a dot-name, which readers skip
    outbox.take(root, "beacon")
    outbox.take(root, "beacon")
    c = outbox.put(root, "lantern", deliverable(tmp_path, "x"))
    assert c.name == "000003-x"  # the taken numbers count too


def test_put_refusals_write_nothing(root: Path, tmp_path: Path, monkeypatch) -> None:
    src = deliverable(tmp_path)
    with pytest.raises(NotFound):
        outbox.put(root, "lantern", tmp_path / "missing")
    with pytest.raises(MailslotError, match="regular file"):
        outbox.put(root, "lantern", tmp_path)
    with pytest.raises(LimitExceeded, match="lines"):
        outbox.put(root, "lantern", src, note="two\nlines")
    with pytest.raises(InvalidValue, match=r"note holds a control character \(NUL\)"):
        outbox.put(root, "lantern", src, note="a NUL\x00here")
    with pytest.raises(Conflict, match="lantern can never take"):
        outbox.put(root, "lantern", src, recipient="lantern")
    monkeypatch.setattr(outbox, "ITEM_MAX_BYTES", 3)
    with pytest.raises(LimitExceeded, match="outbox item"):
        outbox.put(root, "lantern", src)
    assert visible(root / "outbox") == ["records", "taken"]
    assert visible(root / "outbox/records") == []


def test_put_obeys_the_charter(root: Path, tmp_path: Path) -> None:
    charter = root / "DIVISION-OF-WORK.md"
    charter.write_text(charter.read_text() + "| outbox/*.png | tidal | images |\n")
    with pytest.raises(Conflict, match=r"outbox/000001-og-card.png is owned by tidal"):
        outbox.put(root, "lantern", deliverable(tmp_path))
    assert outbox.put(root, "tidal", deliverable(tmp_path)).name == "000001-og-card.png"


def test_take_claims_oldest_and_records_the_taker(root: Path, tmp_path: Path) -> None:
    first = outbox.put(root, "lantern", deliverable(tmp_path, "a.txt"), note="first")
    outbox.put(root, "tidal", deliverable(tmp_path, "b.txt"))
    assert [i.name for i in outbox.list_items(root)] == [first.name, "000002-b.txt"]
    item = outbox.take(root, "beacon")
    assert item.path == "outbox/taken/000001-a.txt" and item.sha256_ok is True
    assert (root / item.path).exists() and not (root / first.path).exists()
    rec = json.loads((root / "outbox/taken/records/000001-a.txt.json").read_text())
    assert rec["taken_by"] == "beacon" and rec["note"] == "first" and rec["from"] == "lantern"
    assert [i.name for i in outbox.list_items(root, taken=True)] == ["000001-a.txt"]
    # The put's record stays until the next take has made this one durable, then goes.
    assert (root / "outbox/records/000001-a.txt.json").exists()
    assert outbox.take(root, "beacon").name == "000002-b.txt"
    assert visible(root / "outbox/records") == ["000002-b.txt.json"]


def test_only_the_charter_consumer_takes(root: Path, tmp_path: Path) -> None:
    outbox.put(root, "lantern", deliverable(tmp_path))
    with pytest.raises(Conflict, match="lantern may not take: beacon is the outbox consumer"):
        outbox.take(root, "lantern")
    (root / "DIVISION-OF-WORK.md").write_text("| path | writer |\n|---|---|\n")
    with pytest.raises(Conflict, match="nobody may take"):
        outbox.take(root, "beacon")
    assert len(outbox.list_items(root)) == 1


def test_nothing_to_take_is_exit_3(root: Path) -> None:
    with pytest.raises(outbox.OutboxEmpty) as e:
        outbox.take(root, "beacon")
    assert e.value.exit_code == 3


def test_hand_dropped_file_is_an_item(root: Path) -> None:
    (root / "outbox/notes.txt").write_text("dropped with cp")
    (root / "outbox/.notes.txt.123.abcdef01.tmp").write_text("in flight")
    [item] = outbox.list_items(root)
    assert item.name == "notes.txt" and not item.has_record
    taken = outbox.take(root, "beacon")
    assert taken.path == "outbox/taken/notes.txt" and taken.sha256_ok is None
    (root / "outbox/notes.txt").write_text("same name again")
    again = outbox.take(root, "beacon")
    assert again.name.startswith("notes.txt.") and again.name != "notes.txt"
    assert (root / "outbox/taken/notes.txt").read_text() == "dropped with cp"  # not overwritten


def test_a_record_that_is_not_a_bounded_file_is_no_record(
    root: Path, tmp_path: Path, run_cli
) -> None:
    # Anyone may drop files in records/: a FIFO there must not hang list and take.
    item = outbox.put(root, "lantern", deliverable(tmp_path), recipient="beacon")
    record = root / "outbox/records" / f"{item.name}.json"
    record.unlink()
    os.mkfifo(record)
    env = {"MAILSLOT_ROOT": str(root)}
    r = run_cli("outbox", "list", "--json", env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    assert [i["has_record"] for i in json.loads(r.stdout)["items"]] == [False]
    r = run_cli("outbox", "take", "--as", "beacon", env=env, timeout=30)
    assert r.returncode == 0 and r.stdout.strip().endswith(f"outbox/taken/{item.name}")


@pytest.mark.parametrize("size", [6, outbox.OWN_SHA256_MAX, outbox.OWN_SHA256_MAX + 1])
def test_edited_item_is_flagged(root: Path, tmp_path: Path, size: int) -> None:
    """Small items are hashed by the interpreter's own SHA-256, big ones by OpenSSL's: the
    same digest, so a whole item passes and one edited by a byte fails, either side."""
    data = os.urandom(size)
    whole = outbox.put(root, "lantern", deliverable(tmp_path, "whole.bin", data))
    edited = outbox.put(root, "lantern", deliverable(tmp_path, "edited.bin", data))
    (root / edited.path).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert outbox.take(root, "beacon").sha256_ok is True
    assert outbox.take(root, "beacon").sha256_ok is False
    assert whole.sha256 == hashlib.sha256(data).hexdigest()


def test_take_waits_for_an_item(root: Path, tmp_path: Path) -> None:
    src = deliverable(tmp_path)

    def later() -> None:
        time.sleep(0.3)
        outbox.put(root, "lantern", src)

    t = threading.Thread(target=later)
    t.start()
    item = outbox.take(root, "beacon", wait=60)
    t.join()
    assert item.name == "000001-og-card.png"
    with pytest.raises(WaitTimeout):
        outbox.take(root, "beacon", wait=0.2)


TAKER = r"""
import sys
from pathlib import Path
from mailslot.bus import outbox
root = Path(sys.argv[1])
sys.stdin.readline()  # start together
while True:
    try:
        print(outbox.take(root, "beacon").name, flush=True)
    except outbox.OutboxEmpty:
        break
"""


@pytest.mark.slow
def test_take_race_each_item_exactly_once(root: Path, tmp_path: Path) -> None:
    for i in range(100):
        outbox.put(root, "lantern", deliverable(tmp_path, f"item{i}.txt", str(i).encode()))
    procs = [spawn(TAKER, str(root)) for _ in range(8)]
    release(procs)
    outs = finish(procs)
    taken = [name for out in outs for name in out.split()]
    assert len(taken) == 100 and len(set(taken)) == 100
    assert sorted(taken) == sorted(f"{i + 1:06d}-item{i}.txt" for i in range(100))
    assert visible(root / "outbox") == ["records", "taken"]
    assert len(visible(root / "outbox/taken")) == 101  # 100 items + records/
    assert len(os.listdir(root / "outbox/taken/records")) == 100


WAITING_TAKER = r"""
import sys
from pathlib import Path
from mailslot.bus import outbox
from mailslot.core.errors import WaitTimeout
root = Path(sys.argv[1])
print("waiting", flush=True)
while True:
    try:
        print(outbox.take(root, "beacon", wait=3).name, flush=True)
    except WaitTimeout:
        break
"""


@pytest.mark.slow
def test_waiting_takers_woken_by_the_same_items_take_each_exactly_once(
    root: Path, tmp_path: Path
) -> None:
    """Every waiting taker wakes for an item, one at a time or several: exactly one claims
    each, the others look again and wait on; each taken item has its taker's record."""
    procs = [spawn(WAITING_TAKER, str(root)) for _ in range(4)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "waiting\n"
    for i in range(40):
        outbox.put(root, "lantern", deliverable(tmp_path, f"item{i}.txt", str(i).encode()))
        if i % 3 == 0:
            time.sleep(0.02)  # a wake for one item, then for a few at once
    taken = [name for out in finish(procs) for name in out.split()]
    assert sorted(taken) == sorted(f"{i + 1:06d}-item{i}.txt" for i in range(40))
    assert visible(root / "outbox") == ["records", "taken"]
    for name in taken:
        rec = json.loads((root / "outbox/taken/records" / f"{name}.json").read_text())
        assert (rec["item"], rec["taken_by"]) == (name, "beacon")


class _WaitingTake:
    """``outbox.take(root, "beacon", wait=30)`` in a thread, and what it returned or raised."""

    def __init__(self, root: Path, wait: float = 30) -> None:
        self.got: list[object] = []
        self.tid: list[int] = []
        self.thread = threading.Thread(target=self._take, args=(root, wait), daemon=True)
        self.thread.start()

    def _take(self, root: Path, wait: float) -> None:
        self.tid.append(threading.get_native_id())
        try:
            self.got.append(outbox.take(root, "beacon", wait=wait))
        except BaseException as e:  # reported by ``result``
            self.got.append(e)

    def blocked(self) -> None:
        """Until the take sleeps in its wait (its thread's wchan), so that what the test does
        next happens under the wait, never before it."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                wchan = Path(f"/proc/self/task/{self.tid[0]}/wchan").read_text()
            except (IndexError, OSError):
                wchan = ""
            if "poll" in wchan or "select" in wchan:
                return
            time.sleep(0.01)
        pytest.fail("the take never blocked in its wait")

    def result(self, timeout: float = 60) -> object:
        self.thread.join(timeout=timeout)
        assert not self.thread.is_alive()
        (got,) = self.got
        return got


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories in one step (``renameat2(RENAME_EXCHANGE)``): the name never misses."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        pytest.skip("no renameat2 here")
    if fn(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        pytest.skip(f"renameat2(RENAME_EXCHANGE) refused: {os.strerror(ctypes.get_errno())}")


def test_a_take_waiting_on_an_outbox_replaced_under_it_takes_from_the_new_one(
    root: Path, tmp_path: Path
) -> None:
    """outbox/ swapped for a new one (without taken/) while a take waits: its watch followed
    the old one, so the take arms the new one, and takes what is put there into a taken/ made
    for it."""
    take = _WaitingTake(root)
    take.blocked()
    (root / "outbox.new").mkdir()
    _exchange(root / "outbox", root / "outbox.new")
    (root / "outbox" / ".card.txt").write_text("dropped by hand\n")
    (root / "outbox" / ".card.txt").rename(root / "outbox" / "card.txt")
    item = take.result()
    assert isinstance(item, outbox.Item) and item.name == "card.txt", item
    assert (root / "outbox" / "taken" / "card.txt").read_text() == "dropped by hand\n"


def test_a_take_waiting_on_an_outbox_removed_under_it_is_gone(root: Path) -> None:
    """The wait ends (exit 4) when outbox/ goes, however long it had left: what the take holds
    while it waits (its record's file) keeps no folder of outbox/ in use, which would hold back
    the kernel's word that outbox/ is gone until the wait's end."""
    take = _WaitingTake(root, wait=600)
    take.blocked()
    shutil.rmtree(root / "outbox" / "records")
    shutil.rmtree(root / "outbox" / "taken")
    time.sleep(0.2)  # woken by those, it looks, finds outbox/ there, and waits again
    take.blocked()
    os.rmdir(root / "outbox")
    error = take.result(timeout=60)  # a bound on a hang, far below the wait's 600 s
    assert isinstance(error, Gone), error


def test_take_with_nothing_answers_json_when_asked(root) -> None:
    import json

    from click.testing import CliRunner

    from mailslot.cli import cli

    r = CliRunner().invoke(cli, ["--root", str(root), "outbox", "take", "--as", "beacon", "--json"])
    assert r.exit_code == 3
    assert json.loads(r.stdout) == {"taken": None, "timed_out": True}

"""The bus under damage: a writer killed inside its write, and a full disk.

A killed writer's half line is never read as a line in LOG.md (not even once the next writer's
line ends it), nor listed or ticked as a task; a command that fails on a full disk has written
nothing, so a retry never duplicates. A producer killed in the middle of ``outbox put`` leaves
nothing a taker sees, no number is used twice, and the temp it left is removed by the next put;
a live put stalled past the stale age is never swept. (A take under damage:
``test_bus_take_durability.py``.)
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mailslot.bus import layout, log, outbox
from mailslot.core.errors import LimitExceeded
from mailslot.core.fsio import STALE_TEMP_SECONDS

LONG = "delivered the long report, " * 35  # ~950 characters: the one large write


def _tail(run_cli, root: Path) -> list[tuple[str, str]]:
    r = run_cli("--root", str(root), "log", "tail", "--json")
    assert r.returncode == 0, r.stderr
    return [(e["agent"], e["text"]) for e in json.loads(r.stdout)["entries"]]


def test_a_line_torn_by_a_kill_is_never_read_as_a_line(
    root: Path, killed_in_write, run_cli
) -> None:
    before = (root / "LOG.md").read_bytes()
    killed_in_write("--root", str(root), "--as", "lantern", "log", "append", LONG, at_bytes=512)
    assert len((root / "LOG.md").read_bytes()) > len(before)  # half a line is in the file
    assert _tail(run_cli, root) == []

    r = run_cli("--root", str(root), "--as", "beacon", "log", "append", "merged the OG card")
    assert r.returncode == 0, r.stderr
    assert _tail(run_cli, root) == [("beacon", "merged the OG card")]
    assert (root / "LOG.md").read_bytes().startswith(before)
    torn = root / "LOG.md.torn"
    assert "[Lantern] w01: delivered the long report" in torn.read_text()
    r = run_cli("--root", str(root), "log", "tail", "--json")
    assert json.loads(r.stdout)["torn"] == {"path": str(torn), "size": torn.stat().st_size}
    r = run_cli("--root", str(root), "log", "tail")
    assert r.stdout.strip().endswith("merged the OG card") and str(torn) in r.stderr
    # the killed agent's next line is its first: the torn one never counted as a waking
    r = run_cli("--root", str(root), "--as", "lantern", "log", "append", "short one")
    assert r.returncode == 0 and "[Lantern] w01: short one" in r.stdout, r.stderr


# Agents working by hand append to LOG.md as their procedure says: a bare `>>`, or under flock.
HAND_LOG = r"""
set -e
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) — [Kiran] w01: plain append after the crash" >> LOG.md
flock LOG.md bash -c 'echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) — [Kiran] w02: flock append" >> LOG.md'
"""


@pytest.mark.parametrize("next_one", ["tail", "append"])
def test_lines_appended_by_hand_after_a_torn_line_are_kept(
    root: Path, killed_in_write, run_cli, next_one: str
) -> None:
    killed_in_write("--root", str(root), "--as", "lantern", "log", "append", LONG, at_bytes=512)
    subprocess.run(["bash", "-c", HAND_LOG], cwd=root, check=True, timeout=60)
    hand = [("kiran", "plain append after the crash"), ("kiran", "flock append")]
    if next_one == "tail":  # `log tail` repairs: LOG.md is not stuck behind the fragment
        assert _tail(run_cli, root) == hand
    r = run_cli("--root", str(root), "--as", "beacon", "log", "append", "merged the OG card")
    assert r.returncode == 0, r.stderr
    assert _tail(run_cli, root) == [*hand, ("beacon", "merged the OG card")]
    text = (root / "LOG.md").read_text()
    assert text.count("plain append after the crash") == 1 and text.count("flock append") == 1
    torn = (root / "LOG.md.torn").read_text()
    assert "[Lantern] w01: delivered the long report" in torn and "[Kiran]" not in torn


@pytest.mark.parametrize(
    ("free_pages", "log_on_page_boundary", "new_sidecar"),
    [
        (0, False, False),  # no room for anything
        (1, False, True),  # room for the staged counter, none for a new sidecar's intent
        (2, True, True),  # room for counter and intent, none for the line's new page
        (1, True, False),  # room for the counter, the intent in the kept sidecar, not the line
        (0, True, False),
    ],
)
def test_a_failed_append_on_a_full_disk_wrote_nothing(
    small_disk: Path,
    fill_disk,
    run_cli,
    free_pages: int,
    log_on_page_boundary: bool,
    new_sidecar: bool,
) -> None:
    root = small_disk / "shared"
    layout.init(root, consumer="beacon")
    log.append(root, "lantern", "first line", new_waking=True)
    if log_on_page_boundary:  # a hand-written comment pads LOG.md to a whole page
        size = (root / "LOG.md").stat().st_size
        with (root / "LOG.md").open("a") as f:
            f.write("#" + "." * (4096 - size - 2) + "\n")
        assert (root / "LOG.md").stat().st_size == 4096
    if new_sidecar:  # as before the first append, or after a repair: the intent needs a page
        (root / ".LOG.md.intent").unlink()
    filler = fill_disk(small_disk, free_pages)
    before = (root / "LOG.md").read_bytes()
    names = sorted(os.listdir(root)), sorted(os.listdir(root / ".mailslot" / "wakings"))

    r = run_cli("--root", str(root), "--as", "lantern", "log", "append", "--new-waking", "second")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "no space left to write" in r.stderr and r.stderr.count("\n") == 1
    assert (root / "LOG.md").read_bytes() == before
    assert (sorted(os.listdir(root)), sorted(os.listdir(root / ".mailslot" / "wakings"))) == names

    filler.unlink()  # room again: the retry writes the line exactly once
    r = run_cli("--root", str(root), "--as", "lantern", "log", "append", "--new-waking", "second")
    assert r.returncode == 0, r.stderr
    assert [e.text for e in log.read(root)] == ["first line", "second"]
    assert [e.waking for e in log.read(root)] == [1, 2]


def test_a_task_torn_by_a_kill_is_never_listed_nor_ticked_into_the_file(
    root: Path, killed_in_write
) -> None:
    from mailslot.bus import tasks

    first = tasks.add(root, "write the OG card", "lantern")
    path = root / "tasks-lantern.md"
    before = path.read_bytes()
    long = "review the whole guide draft " * 15  # ~430 characters: the one large write
    killed_in_write("--root", str(root), "tasks", "add", long, "--for", "lantern", at_bytes=256)
    assert len(path.read_bytes()) > len(before)
    assert [t.text for t in tasks.list_tasks(root, "lantern")] == ["write the OG card"]

    tasks.done(root, first.id)  # a rewrite of the whole file must not carry the fragment over
    assert path.read_text() == before.decode().replace("- [ ]", "- [x]")
    assert "review the whole guide" in (root / "tasks-lantern.md.torn").read_text()
    assert [(t.text, t.done) for t in tasks.list_tasks(root, "lantern")] == [
        ("write the OG card", True)
    ]


def dot_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def age(path: Path) -> None:
    old = time.time() - 2 * STALE_TEMP_SECONDS
    os.utime(path, (old, old))


PUT = [sys.executable, "-m", "mailslot", "outbox", "put", "--as", "lantern"]


def _put_killed_mid_copy(root: Path) -> list[str]:
    """Run a real ``outbox put`` from a slow pipe and SIGKILL it mid-copy; its temp's name."""
    env = {**os.environ, "MAILSLOT_ROOT": str(root)}
    producer = subprocess.Popen(
        [*PUT, "-", "--name", "build.tar", "--note", "the nightly build"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert producer.stdin is not None
    try:
        producer.stdin.write(b"x" * (3 << 20))  # a slow producer: part of the build, then quiet
        producer.stdin.flush()
    except BrokenPipeError:
        pass
    temps: list[str] = []
    for _ in range(1200):  # until the copy is under way (bounded; not a timing assertion)
        temps = dot_names(root / "outbox")
        if temps and (root / "outbox" / temps[0]).stat().st_size >= 1 << 20:
            break
        if producer.poll() is not None:
            break
        time.sleep(0.05)
    assert producer.poll() is None, producer.communicate()[1]
    os.kill(producer.pid, signal.SIGKILL)
    producer.wait(timeout=30)
    producer.stdin.close()
    return temps


def test_a_killed_puts_temp_is_removed_by_the_next_put_at_once(root: Path, tmp_path: Path) -> None:
    """Its writer's lock died with it: the temp is provably dead, so no hour-long wait."""
    (temp,) = _put_killed_mid_copy(root)
    assert (root / "outbox" / temp).stat().st_size >= 1 << 20  # young, and big
    card = tmp_path / "og-card.png"
    card.write_bytes(b"card bytes")
    item = outbox.put(root, "lantern", card)
    assert item.name == "000001-og-card.png"
    assert dot_names(root / "outbox") == []


def test_a_put_killed_mid_copy_leaves_nothing_a_taker_sees(root: Path, tmp_path: Path) -> None:
    temps = _put_killed_mid_copy(root)
    env = {**os.environ, "MAILSLOT_ROOT": str(root)}

    assert len(temps) == 1 and temps[0].endswith(".tmp")  # invisible to readers
    assert outbox.list_items(root) == []
    assert os.listdir(root / "outbox" / "records") == []  # no orphan record

    age(root / "outbox" / temps[0])
    card = tmp_path / "og-card.png"
    card.write_bytes(b"card bytes")
    r = subprocess.run([*PUT, str(card)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "outbox/000001-og-card.png"
    take = [sys.executable, "-m", "mailslot", "outbox", "take", "--as", "beacon", "--json"]
    r = subprocess.run(take, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["item"], got["has_record"], got["sha256_ok"]) == ("000001-og-card.png", True, True)
    r = subprocess.run(take, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 3  # nothing else: the killed put left nothing to take
    for folder in ("outbox", "outbox/records", "outbox/taken", "outbox/taken/records"):
        assert dot_names(root / folder) == [], folder  # the stale temp was swept


def test_numbers_go_on_past_six_digits_and_are_never_reused(root: Path, tmp_path: Path) -> None:
    (root / "outbox" / "999999-x").write_text("dropped by hand")
    src = tmp_path / "a.txt"
    src.write_text("a")
    assert outbox.put(root, "lantern", src).name == "1000000-a.txt"
    taken = [outbox.take(root, "beacon").name for _ in range(2)]
    with pytest.raises(outbox.OutboxEmpty):
        outbox.take(root, "beacon")  # and settles the last take: its put's record is gone
    assert sorted(taken) == ["1000000-a.txt", "999999-x"]
    assert os.listdir(root / "outbox" / "records") == []
    assert outbox.put(root, "lantern", src).name == "1000001-a.txt"  # counted in taken/


def test_a_number_a_half_done_put_claimed_is_never_reused(root: Path, tmp_path: Path) -> None:
    """What a put killed after its record and before its item leaves behind."""
    records = root / "outbox" / "records"
    orphan = {"item": "000001-draft.md", "from": "lantern", "for": None, "note": "a draft"}
    (records / "000001-draft.md.json").write_text(json.dumps(orphan))
    temp = root / "outbox" / f".000001-draft.md.{os.getpid()}.0badf00d.tmp"
    temp.write_bytes(b"half a dra")
    src = tmp_path / "guide.md"
    src.write_text("the guide")
    item = outbox.put(root, "tidal", src)
    assert item.name == "000002-guide.md"  # 000001 was claimed by the half-done put
    assert temp.exists()  # fresh: its writer may still be alive
    taken = outbox.take(root, "beacon")
    assert (taken.name, taken.sha256_ok) == ("000002-guide.md", True)
    assert outbox.list_items(root) == []  # the orphan record is never an item
    age(temp)
    outbox.put(root, "tidal", src)
    assert not temp.exists()
    assert [i.name for i in outbox.list_items(root)] == ["000003-guide.md"]


def test_a_stale_temp_among_the_taken_records_goes_once_their_sweep_is_due(
    root: Path, tmp_path: Path
) -> None:
    """taken/records/ keeps a record per item ever taken: it is looked through for temps once
    in ``TAKEN_SWEEP_SECONDS``, by whichever put or take comes first, not by every one."""
    taken_records = root / "outbox" / "taken" / "records"
    marker = root / ".mailslot" / outbox.TAKEN_SWEPT
    src = tmp_path / "card.png"
    src.write_bytes(b"card")
    outbox.put(root, "lantern", src)  # the first put sweeps, and the marker says when
    assert marker.exists()
    temp = taken_records / f".000001-card.png.json.{os.getpid()}.0badf00d.tmp"
    temp.write_text("a killed taker's record")
    age(temp)
    outbox.take(root, "beacon")
    outbox.put(root, "lantern", src)
    assert temp.exists()  # not due yet: the records of every item taken are not listed again
    assert dot_names(root / "outbox") == [] and dot_names(root / "outbox" / "records") == []
    due = time.time() - outbox.TAKEN_SWEEP_SECONDS - 1
    os.utime(marker, (due, due))
    outbox.take(root, "beacon")
    assert not temp.exists()
    assert time.time() - marker.stat().st_mtime < outbox.TAKEN_SWEEP_SECONDS
    young = taken_records / f".000002-card.png.json.{os.getpid()}.0badf00d.tmp"
    young.write_text("a taker's record being written")
    marker.unlink()  # no marker (a bus from before it, or .mailslot/ emptied): due at once
    outbox.put(root, "lantern", src)
    assert young.exists()  # swept, and young: its writer may be alive
    assert marker.exists()


def test_a_put_from_a_pipe_is_whole_or_nothing(root: Path, run_cli) -> None:
    env = {"MAILSLOT_ROOT": str(root)}
    data = "line\n" * 100_000
    r = run_cli("outbox", "put", "--as", "lantern", "-", "--name", "log.txt", input=data, env=env)
    assert r.returncode == 0, r.stderr
    assert (root / r.stdout.strip()).read_text() == data
    [item] = outbox.list_items(root)
    assert item.size == len(data) and item.source == "log.txt"


def test_a_pipe_over_the_limit_is_refused_and_leaves_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox, "ITEM_MAX_BYTES", 1000)
    with pytest.raises(LimitExceeded, match="outbox item"):
        outbox.put(root, "lantern", Path("big.bin"), stream=io.BytesIO(b"x" * 1001))
    assert dot_names(root / "outbox") == [] and outbox.list_items(root) == []
    assert os.listdir(root / "outbox" / "records") == []


def test_a_live_put_stalled_past_the_stale_age_is_never_swept(root: Path, tmp_path: Path) -> None:
    """Staleness is by age and by the writer's lock: a producer quiet for hours is alive."""
    env = {**os.environ, "MAILSLOT_ROOT": str(root)}
    put = [sys.executable, "-m", "mailslot", "outbox", "put", "--as", "lantern"]
    producer = subprocess.Popen(
        [*put, "-", "--name", "render.png"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert producer.stdin is not None
    producer.stdin.write(b"first half,")
    producer.stdin.flush()
    temps: list[str] = []
    for _ in range(1200):  # until the temp exists (bounded; not a timing assertion)
        temps = dot_names(root / "outbox")
        if temps and (root / "outbox" / temps[0]).stat().st_size > 0:
            break
        if producer.poll() is not None:
            break
        time.sleep(0.05)
    assert len(temps) == 1, producer.communicate()[1]
    age(root / "outbox" / temps[0])  # quiet for two hours, as a stalled pipe is
    other = tmp_path / "note.txt"
    other.write_text("another put sweeps the outbox")
    outbox.put(root, "lantern", other)
    assert dot_names(root / "outbox") == temps  # the live writer's temp stays
    out, err = producer.communicate(b"second half", timeout=60)
    assert producer.returncode == 0, err
    name = out.decode().strip().removeprefix("outbox/")
    assert (root / "outbox" / name).read_bytes() == b"first half,second half"


def test_a_put_on_a_full_disk_is_refused_naming_the_item(small_disk: Path, run_cli) -> None:
    from mailslot.bus import layout
    from mailslot.core.errors import NoSpace

    bus = small_disk / "shared"
    layout.init(bus, consumer="beacon")
    big = small_disk.parent / "render.png"
    big.write_bytes(os.urandom(128 * 1024))  # twice the disk
    with pytest.raises(NoSpace, match=r"render\.png") as e:
        outbox.put(bus, "lantern", big)
    assert e.value.path == (bus / "outbox").absolute()  # the folder it would have gone in
    assert dot_names(bus / "outbox") == [] and outbox.list_items(bus) == []
    r = run_cli("outbox", "put", "--as", "lantern", str(big), env={"MAILSLOT_ROOT": str(bus)})
    assert r.returncode == 1 and r.stderr.startswith("mailslot: error:")
    assert "render.png" in r.stderr and "no space left" in r.stderr.lower()
    assert "Traceback" not in r.stderr

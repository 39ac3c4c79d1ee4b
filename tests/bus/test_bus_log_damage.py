"""LOG.md under damage: a writer killed inside its append, and a full disk.

A killed writer's half line is never read as a line (not even once the next writer's line ends
it); a command that fails on a full disk has written nothing, so a retry never duplicates.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mailslot.bus import layout, log

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
    ("free_pages", "log_on_page_boundary"),
    [
        (0, False),  # no room for anything
        (1, False),  # room for the staged counter, none for the append's intent
        (2, True),  # room for counter and intent, none for the line's new page
        (0, True),
    ],
)
def test_a_failed_append_on_a_full_disk_wrote_nothing(
    small_disk: Path, fill_disk, run_cli, free_pages: int, log_on_page_boundary: bool
) -> None:
    root = small_disk / "shared"
    layout.init(root, consumer="beacon")
    log.append(root, "lantern", "first line", new_waking=True)
    if log_on_page_boundary:  # a hand-written comment pads LOG.md to a whole page
        size = (root / "LOG.md").stat().st_size
        with (root / "LOG.md").open("a") as f:
            f.write("#" + "." * (4096 - size - 2) + "\n")
        assert (root / "LOG.md").stat().st_size == 4096
    filler = fill_disk(small_disk, free_pages)
    before = (root / "LOG.md").read_bytes()
    names = sorted(os.listdir(root)), sorted(os.listdir(root / ".mailslot" / "wakings"))

    r = run_cli("--root", str(root), "--as", "lantern", "log", "append", "--new-waking", "second")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "No space left on device" in r.stderr
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

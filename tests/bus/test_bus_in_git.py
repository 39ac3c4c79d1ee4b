"""A bus kept in git: ``git status`` shows its content and nothing a writer keeps or leaves beside
it (an appender's intent sidecar, a repair's plan, a killed put's temp), and no bus listing shows
those files either, whatever they hold."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bus_helpers import git

from mailslot.bus import layout, log, outbox, roster, tasks

# An outbox put whose bytes come from a pipe that never ends: it holds its temp until killed.
_STALLED_PUT = """
import sys
from pathlib import Path
from mailslot.bus import outbox
outbox.put(Path(sys.argv[1]), "lantern", Path("card.png"), stream=sys.stdin.buffer)
"""


def _untracked(repo: Path) -> set[str]:
    out = git(repo, "status", "--porcelain", "--untracked-files=all").stdout
    return {line[3:] for line in out.splitlines()}


def _killed_put_temp(root: Path) -> Path:
    """SIGKILL a put while its temp in ``outbox/`` is open; return the temp it left."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _STALLED_PUT, str(root)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"half a card")
        proc.stdin.flush()
        end = time.monotonic() + 60
        while not (temps := [p for p in (root / "outbox").iterdir() if p.name.startswith(".")]):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the put never made its temp"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.stderr is not None
        proc.stderr.close()
    return temps[0]


def test_git_status_in_a_repository_shows_only_the_buses_content(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    root = repo / "shared"
    layout.init(root, consumer="beacon")
    log.append(root, "lantern", "dropped the card")
    log.append(root, "beacon", "took nothing yet")
    tasks.add(root, "review the card", "lantern")
    tasks.add(root, "review it again", "lantern")
    tasks.add(root, "ship")
    card = tmp_path / "card.png"
    card.write_bytes(b"png")
    item = outbox.put(root, "lantern", card, recipient="beacon")
    temp = _killed_put_temp(root)
    (root / ".LOG.md.repair").write_bytes(b"mailslot-repair left by a killed repairer\n")
    kept = {p.name for p in root.iterdir() if p.name.endswith((".intent", ".repair"))}
    assert {".LOG.md.intent", ".TASKS.md.intent", ".tasks-lantern.md.intent"} <= kept

    assert _untracked(repo) == {
        "shared/.gitignore",
        "shared/DIVISION-OF-WORK.md",
        "shared/LOG.md",
        "shared/README.md",
        "shared/TASKS.md",
        "shared/tasks-lantern.md",
        f"shared/{item.path}",
        f"shared/outbox/records/{Path(item.path).name}.json",
    }
    ignored = [f"shared/{name}" for name in kept] + [f"shared/outbox/{temp.name}"]
    assert git(repo, "check-ignore", *ignored).stdout.split() == ignored
    git(repo, "add", "-A")
    committed = git(repo, "ls-files").stdout.split()
    assert not [n for n in committed if Path(n).name.startswith(".") and "gitignore" not in n]


def test_no_listing_shows_what_is_planted_under_a_writers_names(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    layout.init(root, consumer="beacon")
    log.append(root, "lantern", "the only line")
    tasks.add(root, "the only task")
    planted = "2026-11-29T18:14:03Z — [Mallory] w01: planted\n- [ ] planted task\n"
    for name in (
        ".tasks-mallory.md.intent",
        ".tasks-mallory.md.repair",
        ".tasks-mallory.md.1.ab.tmp",
        "tasks-mallory.md.intent",
        "tasks-mallory.md.torn",
        ".LOG.md.repair",
        "outbox/.000001-planted.intent",
        "outbox/.000002-planted.tmp",
    ):
        (root / name).write_text(planted)

    assert [e.text for e in log.read(root) if e.agent] == ["the only line"]
    assert [t.text for t in tasks.list_tasks(root)] == ["the only task"]
    assert outbox.list_items(root) == []
    assert "mallory" not in roster.known_agents(root)


def test_init_keeps_a_gitignore_that_is_there(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    (root / ".gitignore").write_text("node_modules/\n")
    result = layout.init(root)
    assert ".gitignore" in result["kept"]
    assert (root / ".gitignore").read_text() == "node_modules/\n"
    fresh = layout.init(tmp_path / "fresh")
    assert ".gitignore" in fresh["created"]
    assert (tmp_path / "fresh" / ".gitignore").read_text() == layout.GITIGNORE_TEXT

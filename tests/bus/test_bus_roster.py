"""Strict addressing on the bus: a task file is only ever created for an agent the bus knows."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.bus import log, roster, tasks
from mailslot.cli import cli
from mailslot.core.errors import FormatError, NotFound


def test_known_agents_come_from_charter_log_and_task_files(root: Path) -> None:
    assert roster.known_agents(root) == ["beacon", "lantern"]
    log.append(root, "tidal", "first waking: read the README")
    (root / "tasks-ops.md").write_text("- [ ] typed by hand\n")
    (root / "tasks-Not A Name.md").write_text("- [ ] ignored\n")
    assert roster.known_agents(root) == ["beacon", "lantern", "ops", "tidal"]
    assert tasks.add(root, "review", "tidal").file == "tasks-tidal.md"
    assert tasks.add(root, "rotate", "ops").file == "tasks-ops.md"


def test_a_task_for_an_unknown_agent_is_refused_listing_the_known(root: Path) -> None:
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(NotFound, match=r"unknown agent 'lantren' \(known on this bus: beacon, lan"):
        tasks.add(root, "review the draft", "lantren")
    assert sorted(p.name for p in root.iterdir()) == before  # no phantom tasks-lantren.md
    r = CliRunner().invoke(cli, ["--root", str(root), "tasks", "add", "--for", "x", "do it"])
    assert r.exit_code == 1 and "unknown agent 'x'" in r.output
    assert not (root / "tasks-x.md").exists()
    assert tasks.add(root, "shared work").file == "TASKS.md"  # the shared file needs no name


def test_an_unreadable_charter_stops_the_write(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text("| path | writer |\n|---|---|\n| src/ | a, b |\n")
    with pytest.raises(FormatError):
        tasks.add(root, "x", "beacon")
    assert not (root / "tasks-beacon.md").exists()

"""A stop from either side ends the other's wait and refuses every later turn."""

from __future__ import annotations

from pathlib import Path

import pytest
from relay_helpers import lines

from mailslot import relay
from mailslot.core.errors import Gone
from shared_helpers import in_thread


def test_stop_from_the_manager_ends_the_workers_wait_and_refuses_turns(mb: Path) -> None:
    t, box = in_thread(relay.ask, mb, "w1", "are you there?", timeout=60)
    relay.serve(mb, "manager", timeout=30)
    relay.stop(mb, "manager", "The human said stop.")
    t.join(30)
    assert isinstance(box.get("error"), Gone) and "cannot be recalled" in str(box["error"])
    with pytest.raises(relay.RelayStopped, match="cannot be recalled"):
        relay.reply(mb, "manager", "C01", "too late")
    with pytest.raises(relay.RelayStopped):
        relay.ask(mb, "w1", "again?")
    assert relay.stop(mb, "w1").author == "manager"  # stopping twice keeps the first stop


def test_stop_from_the_worker_ends_the_managers_serve(mb: Path) -> None:
    t, box = in_thread(relay.serve, mb, "manager", timeout=60)
    relay.stop(mb, "w1", "stop")
    t.join(30)
    assert isinstance(box.get("error"), Gone)
    assert lines(mb / "to-manager.md")[-1].split(") ", 1)[1].startswith("STOP at=")

"""Strict addressing on the relay (issue 8): only the two named parties, errors name them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot import relay
from mailslot.core.errors import Conflict


def test_unknown_sender_or_recipient_is_refused_naming_the_parties(tmp_path: Path) -> None:
    mb = tmp_path / "mb"
    relay.init(mb, "w1", "manager")
    before = {p.name: p.read_bytes() for p in mb.iterdir() if p.is_file()}
    with pytest.raises(Conflict, match=r"w1 can only ask manager, not boss"):
        relay.ask(mb, "w1", "hello", to="boss", wait=False)
    with pytest.raises(Conflict, match=r"neither the worker \(w1\) nor the manager \(manager\)"):
        relay.ask(mb, "mallory", "hello", to="manager", wait=False)
    after = {p.name: p.read_bytes() for p in mb.iterdir() if p.is_file()}
    assert after == before  # nothing written, no new inbox file
    assert sorted(p.name for p in mb.glob("to-*.md")) == ["to-manager.md", "to-w1.md"]

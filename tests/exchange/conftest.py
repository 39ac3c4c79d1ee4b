"""Exchange fixtures: a fresh exchange between ``claude`` and ``olu`` (git identity in env)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot.exchange.create import create_exchange
from mailslot.exchange.layout import Exchange


@pytest.fixture
def ex(tmp_path: Path) -> Exchange:
    """An exchange with sides claude/olu and a human ``will`` on claude's side, with git."""
    return create_exchange(tmp_path / "x", ["claude", "olu"], humans=["will:claude"])

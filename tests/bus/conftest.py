"""Fixtures for the shared-directory bus: a fresh bus whose outbox consumer is ``beacon``.

``lantern`` owns ``docs/`` in the charter, so both agents are known and tasks may name them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot.bus import layout


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A bus laid out by ``bus init`` with ``beacon`` as the consumer and lantern in the charter."""
    bus = tmp_path / "shared"
    layout.init(bus, consumer="beacon")
    with (bus / layout.CHARTER).open("a") as f:
        f.write("| docs/ | lantern | the docs agent |\n")
    return bus

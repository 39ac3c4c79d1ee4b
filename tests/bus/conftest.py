"""Fixtures for the shared-directory bus: a fresh bus whose outbox consumer is ``beacon``."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot.bus import layout


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A bus laid out by ``bus init`` with ``beacon`` as the consumer."""
    bus = tmp_path / "shared"
    layout.init(bus, consumer="beacon")
    return bus

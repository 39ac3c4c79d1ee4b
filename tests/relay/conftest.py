"""Relay fixtures: a fresh mailbox between worker w1 and its manager."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot import relay


@pytest.fixture
def mb(tmp_path: Path) -> Path:
    """A new relay mailbox in ``tmp_path/mb`` for worker ``w1`` and ``manager``."""
    root = tmp_path / "mb"
    relay.init(root, "w1", "manager")
    return root

"""Fixtures for the page: the world, the page on a real loopback server, and where
screenshots are kept (the browser fixture is tests/conftest.py's, shared with the board)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from page_helpers import World, make_world, serve_page


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "world")


@pytest.fixture
def page_url(world: World) -> Iterator[str]:
    from mailslot.web.page.settings import PageSettings

    with serve_page(PageSettings(world.roots, world.humans_file)) as url:
        yield url


@pytest.fixture
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each view's screenshot is kept (under the tests' temp dir), to look at."""
    return tmp_path_factory.getbasetemp() / "page-screenshots"

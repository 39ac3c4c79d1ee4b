"""Fixtures for the page: the world, the page on a real loopback server, Debian's chromium
through Playwright (as the board page tests drive it), and where screenshots are kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from page_helpers import World, make_world, serve_page

from shared_helpers import CHROMIUM_ARGS, chromium


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "world")


@pytest.fixture
def page_url(world: World) -> Iterator[str]:
    from mailslot.web.page.settings import PageSettings

    with serve_page(PageSettings(world.roots, world.humans_file)) as url:
        yield url


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = chromium()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each view's screenshot is kept (under the tests' temp dir), to look at."""
    return tmp_path_factory.getbasetemp() / "page-screenshots"

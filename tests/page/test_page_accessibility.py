"""Every view passes axe-core (run in Debian's chromium) with no serious or critical violation,
and each view's screenshot is kept under the tests' temp dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from page_helpers import World, login_in_browser

pytestmark = pytest.mark.browser


def _views(world: World) -> dict[str, str]:
    return {
        "overview": "/",
        "exchange": "/x/exchange",
        "thread": f"/x/exchange/t/{world.topics[0]}",
        "chat": f"/c/chats/{world.chat.name}",
        "bus": "/b/bus",
        "login": "/login",
        "search": "/search?q=gate",
    }


@pytest.mark.parametrize("signed_in", [False, True], ids=["reader", "human"])
def test_no_view_has_a_serious_accessibility_violation(
    browser: Any, page_url: str, world: World, shots: Path, signed_in: bool
) -> None:
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    page = browser.new_page()
    if signed_in:
        login_in_browser(page, page_url, world.tokens["ops"])
    found: dict[str, list[str]] = {}
    shots.mkdir(parents=True, exist_ok=True)
    for name, path in _views(world).items():
        page.goto(f"{page_url}{path}", wait_until="load")
        page.screenshot(
            path=str(shots / f"a11y-{name}-{'human' if signed_in else 'reader'}.png"),
            full_page=True,
        )
        results = axe.run(page)
        bad = [
            f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
            for v in results.response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        if bad:
            found[name] = bad
    page.close()
    assert found == {}

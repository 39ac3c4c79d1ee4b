"""Search on the page: hits across the exchange, chats, LOG.md and the peer inbox, each linking
to its message in its thread, snippets shown as text with the match marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from page_helpers import World

from mailslot.exchange.entries import send
from mailslot.exchange.layout import load_exchange


def test_hits_from_every_channel_link_to_their_thread(page_url: str, world: World) -> None:
    html = httpx.get(f"{page_url}/search", params={"q": "gate"}).text
    assert f'href="/x/exchange/t/{world.topics[0]}#e0001-claude"' in html
    assert "<mark>" in html
    log = httpx.get(f"{page_url}/search", params={"q": "outbox"}).text
    assert 'href="/b/bus#L' in log and "#LL" not in log
    chat = httpx.get(f"{page_url}/search", params={"q": "release"}).text
    assert f'href="/c/chats/{world.chat.name}#m' in chat


def test_a_new_entry_is_found_at_once(page_url: str, world: World) -> None:
    send(load_exchange(world.exchange), "olu", world.topics[0], "fyi", "zanzibar checkpoint")
    html = httpx.get(f"{page_url}/search", params={"q": "zanzibar"}).text
    assert "1 hit" in html and "olu" in html


@pytest.mark.browser
def test_a_hostile_snippet_is_text_and_its_link_lands_on_the_message(
    browser: Any, page_url: str, world: World, shots: Path
) -> None:
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{page_url}/search?q=pwned", wait_until="load")
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "search.png"), full_page=True)
    assert page.locator(".hits li").count() >= 2  # the thread's entry and the chat message
    assert page.locator(".hits script, .hits img, .hits svg, .hits iframe").count() == 0
    assert page.evaluate("window.__pwned === undefined") and dialogs == []
    page.locator(".hit-exchange a").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("#e0001-olu")
    assert page.locator("#e0001-olu .sender").inner_text() == "olu"
    page.close()


def test_a_query_outside_the_language_is_refused_plainly(page_url: str) -> None:
    r = httpx.get(f"{page_url}/search", params={"q": "x" * 5000})
    assert r.status_code == 422 and 'class="refused"' in r.text

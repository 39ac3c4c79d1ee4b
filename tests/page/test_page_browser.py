"""The page in a real browser (Debian's chromium through Playwright): every view renders with
realistic data, hostile bodies stay inert, a human's form lands as a real entry. Each view's
screenshot is kept under the tests' temp dir (``page-screenshots/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from page_helpers import HOSTILE, World

from mailslot.exchange.entries import list_entries
from mailslot.exchange.layout import load_exchange

pytestmark = pytest.mark.browser


def _open(browser: Any, url: str) -> tuple[Any, list[str], list[str]]:
    """A fresh page at ``url``, recording dialogs and every request it makes."""
    page = browser.new_page()
    dialogs: list[str] = []
    requests: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(url, wait_until="load")
    return page, dialogs, requests


def _shot(page: Any, shots: Path, name: str) -> None:
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def test_the_overview_shows_each_root(
    browser: Any, page_url: str, world: World, shots: Path
) -> None:
    page, dialogs, _ = _open(browser, f"{page_url}/")
    _shot(page, shots, "overview")
    assert page.locator("h2#src-exchange").count() == 1
    sides = page.locator("table.sides tbody tr").all_inner_texts()
    # claude owes the reply to olu's required entry; olu owes one to claude's
    assert any(row.startswith("claude") for row in sides)
    assert page.locator(".doctor").first.inner_text() == "not run"
    assert "never ran" in page.locator("ul.facts").first.inner_text()
    assert "release plan" in page.locator("ul.chats").inner_text()
    assert "HUMAN-CHECK open (kiran-1)" in page.locator("ul.chats").inner_text()
    log = page.locator("ol.log li").all_inner_texts()
    assert any("<b>bold</b> claims" in line for line in log)  # shown as text
    assert page.locator("ol.log b").count() == 0
    assert page.locator(".peer-waiting").inner_text() == "1"
    assert page.locator(".board-hidden").inner_text() == "1"
    assert page.locator("ul.board li").count() == 1  # the hidden post is not shown
    assert "<b>hello</b> board" in page.locator("ul.board").inner_text()  # as text
    assert dialogs == []


def test_the_exchange_table_says_who_owes_what_as_sweep_does(
    browser: Any, page_url: str, world: World, shots: Path
) -> None:
    from mailslot.exchange.sweep import sweep

    ex = load_exchange(world.exchange)
    page, _, _ = _open(browser, f"{page_url}/x/exchange")
    _shot(page, shots, "exchange")
    rows = page.locator("table.topics tbody tr")
    assert rows.count() == len(world.topics)
    shown = {
        (r.locator("th a").inner_text(), d)
        for r in rows.all()
        for d in r.locator(".debt").all_inner_texts()
    }
    expected = {
        (o.debt.topic, f"{side}: {o.debt.reason}" + (f" {o.debt.entry}" if o.debt.entry else ""))
        for side in ex.sides
        for o in sweep(ex, side).debts
    }
    assert shown == expected and expected
    page.goto(f"{page_url}/x/exchange?filter=mine&side=olu", wait_until="load")
    owed = page.locator("table.topics tbody th a").all_inner_texts()
    assert set(owed) == {o.debt.topic for o in sweep(ex, "olu").debts}


def test_hostile_bodies_stay_inert_in_a_thread(
    browser: Any, page_url: str, world: World, shots: Path
) -> None:
    page, dialogs, requests = _open(browser, f"{page_url}/x/exchange/t/{world.topics[1]}")
    page.wait_for_timeout(300)
    _shot(page, shots, "thread-hostile")
    for link in page.locator(".body a").all():
        link.click(modifiers=["Control"], no_wait_after=True, timeout=2000)
    page.wait_for_timeout(200)
    pwned = page.evaluate("window.__pwned === undefined ? null : window.__pwned")
    assert pwned is None and dialogs == [] and page.title() != "pwned"
    body = page.locator(".body")
    assert body.locator("script, img, svg, iframe, [onerror], [onload]").count() == 0
    hrefs = body.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert all(h.startswith("http") for h in hrefs), hrefs
    assert not any("beacon" in u for u in requests)  # the image beacon was never fetched
    text = body.inner_text()
    assert "<script>window.__pwned = 1" in text and "onerror=" in text  # shown as text
    assert all(u.startswith(page_url) for u in requests), requests
    assert len(HOSTILE) > 5


def test_a_human_writes_an_entry_through_the_form(
    browser: Any, page_url: str, world: World, shots: Path
) -> None:
    topic = world.topics[0]
    page, _, _ = _open(browser, f"{page_url}/login")
    _shot(page, shots, "login")
    page.fill("#token", world.tokens["ops"])
    page.click("form.login button")
    page.wait_for_url(f"{page_url}/")
    page.goto(f"{page_url}/x/exchange/t/{topic}", wait_until="load")
    page.select_option("form.entry #action", "required")
    page.fill("form.entry #body", "Ship it once **tests** pass.")
    page.click("form.entry button")
    page.wait_for_load_state("load")
    _shot(page, shots, "thread-after-post")
    assert page.locator(".thread .entry").last.locator(".sender").inner_text() == "ops"
    assert page.locator(".thread .entry").last.locator(".body strong").inner_text() == "tests"
    entries = list_entries(load_exchange(world.exchange), topic)
    assert entries[-1].sender == "ops" and entries[-1].action == "required"
    assert entries[-1].body.strip() == "Ship it once **tests** pass."


def test_the_bus_shows_its_log_tasks_outbox_and_charter(
    browser: Any, page_url: str, world: World, shots: Path
) -> None:
    page, dialogs, _ = _open(browser, f"{page_url}/b/bus")
    _shot(page, shots, "bus")
    log = page.locator("table.log tbody tr").all_inner_texts()
    assert any("woke; read the outbox" in row for row in log)
    assert any("<b>bold</b> claims" in row for row in log)
    tasks = page.locator("#tasks + table tbody tr").all_inner_texts()
    assert any("review the gate fix" in t and "olu" in t for t in tasks)
    assert "olu" in page.locator("#charter + table").inner_text()
    assert dialogs == []

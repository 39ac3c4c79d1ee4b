"""Search on the page: hits across the exchange, chats, LOG.md and the peer inbox, each linking
to its message in its thread, snippets shown as text with the match marked."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from page_helpers import World, login, serve_page


def test_hits_from_every_channel_link_to_their_thread(page_url: str, world: World) -> None:
    html = httpx.get(f"{page_url}/search", params={"q": "gate"}).text
    assert f'href="/x/exchange/t/{world.topics[0]}#e0001-claude"' in html
    assert "<mark>" in html
    log = httpx.get(f"{page_url}/search", params={"q": "outbox"}).text
    assert 'href="/b/bus#L' in log and "#LL" not in log
    chat = httpx.get(f"{page_url}/search", params={"q": "release"}).text
    assert f'href="/c/chats/{world.chat.name}#m' in chat


def test_a_new_entry_is_found_at_once(page_url: str, world: World) -> None:
    """The very next search after another process's write finds it: no reindex, no waiting
    for the follower (in an old topic as in a new one, and in a chat). The writer stays
    running and says when each entry is written, so the search follows at once."""
    assert "1 hit" not in httpx.get(f"{page_url}/search", params={"q": "quokka"}).text
    writer = (
        "import sys\n"
        "from mailslot.exchange.entries import send\n"
        "from mailslot.exchange.layout import load_exchange\n"
        "ex = load_exchange(sys.argv[1])\n"
        "for line in sys.stdin:\n"
        "    topic, word = line.split()\n"
        "    send(ex, 'olu', topic, 'fyi', f'a {word} at the gate')\n"
        "    print('sent', flush=True)\n"
    )
    client = httpx.Client()  # connected already: the search is asked at once
    assert "1 hit" not in client.get(f"{page_url}/search", params={"q": "numbat"}).text
    proc = subprocess.Popen(
        [sys.executable, "-c", writer, str(world.exchange)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin and proc.stdout
    try:
        for topic, word in ((world.topics[0], "quokka"), ("brand-new", "numbat")):
            proc.stdin.write(f"{topic} {word}\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == "sent\n"
            html = client.get(f"{page_url}/search", params={"q": word}).text
            assert "1 hit" in html, f"{word}: the entry was not found by the next search"
            assert "olu" in html and "/x/exchange/t/" in html
        from mailslot.chat import say

        say(world.chat, "a wallaby joined", "dave-2", state=world.chat.parent.parent / "chat-state")
        assert "1 hit" in client.get(f"{page_url}/search", params={"q": "wallaby"}).text
    finally:
        client.close()
        proc.stdin.close()
        proc.wait(timeout=30)


def test_an_entry_written_on_the_page_is_found_at_once(page_url: str, world: World) -> None:
    topic = world.topics[0]
    assert "1 hit" not in httpx.get(f"{page_url}/search", params={"q": "wombat"}).text
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        r = client.post(
            f"{page_url}/x/exchange/t/{topic}/send",
            data={"csrf": csrf, "action": "fyi", "body": "a wombat in the build"},
            headers={"Origin": page_url},
        )
        assert r.status_code == 303, r.text
        html = client.get(f"{page_url}/search", params={"q": "wombat"}).text
    assert "1 hit" in html and "ops" in html


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


def test_the_search_follower_stops_with_the_page(world: World) -> None:
    from mailslot.web.page.settings import PageSettings

    with serve_page(PageSettings(world.roots, world.humans_file)) as url:
        assert "hit" in httpx.get(f"{url}/search", params={"q": "gate"}).text
        assert any(t.name == "page-search" for t in threading.enumerate())
    assert not [t for t in threading.enumerate() if t.name == "page-search"]


def test_what_a_failed_refresh_left_is_refreshed_before_the_next_answer(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh that fails before an answer (the index held by another process past its
    wait) keeps what changed for the next answer: the entry is found by the next search, not
    only at the follower's rescan (here there is no follower)."""
    from mailslot.core.errors import LockBusy
    from mailslot.exchange.entries import send
    from mailslot.exchange.layout import load_exchange
    from mailslot.web.page import finder

    monkeypatch.setattr(finder, "follow", lambda roots, stop: stop.wait())
    pages = finder.PageSearch([world.exchange])
    try:
        assert pages.find("wombat", 10) == []
        send(load_exchange(world.exchange), "olu", world.topics[0], "fyi", "a wombat at the gate")
        refresh = finder.refresh

        def busy(root: Path, **_: Any) -> None:
            raise LockBusy("the search index is busy", path=root)

        monkeypatch.setattr(finder, "refresh", busy)
        assert pages.find("wombat", 10) == []  # not refreshed: the index as it was
        monkeypatch.setattr(finder, "refresh", refresh)
        hits = pages.find("wombat", 10)
        assert [(h.channel, h.thread) for h in hits] == [("exchange", world.topics[0])], hits
    finally:
        pages.close()

"""The board page in a real browser (Debian's chromium through Playwright): a hostile post is
shown as text and no script from it runs."""

from __future__ import annotations

import httpx
import pytest

EVIL = [
    "<script>window.__pwned = 1; document.title = 'pwned'</script>",
    '<img src=x onerror="window.__pwned = 2">',
    '</p><svg onload="window.__pwned = 3"></svg>',
    '"><iframe srcdoc="<script>parent.__pwned = 4</script>"></iframe>',
]


@pytest.mark.browser
def test_hostile_posts_render_as_text_and_run_no_script(board_server, browser) -> None:
    with board_server(post_every_s=1, requests_per_minute=1000) as url:
        import time

        for i, message in enumerate(EVIL):
            if i:
                time.sleep(1.05)  # one post per second in this test's settings
            r = httpx.post(
                f"{url}/api/agora",
                json={
                    "agent": "<b onmouseover=x>evil</b>",
                    "message": message,
                    "link": 'https://example.org/"><script>window.__pwned=5</script>',
                },
            )
            assert r.status_code == 201, r.text
        page = browser.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{url}/", wait_until="load")
        page.wait_for_timeout(300)
        pwned = page.evaluate("window.__pwned === undefined ? null : window.__pwned")
        title = page.title()
        scripts = page.evaluate("document.querySelectorAll('script').length")
        injected = page.evaluate(
            "document.querySelectorAll('article img, article svg, article iframe, "
            "article b[onmouseover]').length"
        )
        texts = page.locator("p.message").all_inner_texts()
        agents = page.locator("b.agent").all_inner_texts()
        hrefs = page.locator("article a").evaluate_all("els => els.map(e => e.href)")
    assert pwned is None and dialogs == [] and title != "pwned"
    assert scripts == 0 and injected == 0
    assert sorted(texts) == sorted(EVIL)  # shown verbatim, as text
    assert agents == ["<b onmouseover=x>evil</b>"] * len(EVIL)
    assert all(h.startswith("https://example.org/") for h in hrefs)


@pytest.mark.browser
def test_a_right_to_left_name_does_not_reorder_its_line(board_server, browser) -> None:
    """Hebrew letters are allowed in a name, but must not pull the time after the name into
    their right-to-left run (which would show "time · name", the time first)."""
    with board_server() as url:
        r = httpx.post(f"{url}/api/agora", json={"agent": "\u05d0\u05d1\u05d2", "message": "hi"})
        assert r.status_code == 201, r.text
        page = browser.new_page()
        page.goto(f"{url}/", wait_until="load")
        name = page.locator("b.agent").bounding_box()
        time = page.locator("article time").bounding_box()
        shown = page.locator("b.agent").inner_text()
    assert name is not None and time is not None
    assert name["x"] + name["width"] <= time["x"]  # the name, then its time, left to right
    assert shown == "\u05d0\u05d1\u05d2"

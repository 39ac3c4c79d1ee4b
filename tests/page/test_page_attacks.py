"""What a hostile client tries against the page, over real HTTP: oversized forms, paths that
climb out of a root, a login without its form token, a stream cursor past the end."""

from __future__ import annotations

import re

import httpx
from page_helpers import World, login

from mailslot.chat import read
from mailslot.exchange.entries import list_entries
from mailslot.exchange.layout import load_exchange


def test_an_oversized_form_is_refused_before_it_is_read(page_url: str, world: World) -> None:
    topic = world.topics[0]
    ex = load_exchange(world.exchange)
    before = len(list_entries(ex, topic))
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        # its own connection: the 413 is sent before the body is read, and that connection
        # is not one to send the next request on
        with httpx.Client(cookies=client.cookies) as once:
            r = once.post(
                f"{page_url}/x/exchange/t/{topic}/send",
                data={"csrf": csrf, "action": "fyi", "body": "x" * (1100 * 1024)},
                headers={"Origin": page_url},
            )
        assert r.status_code == 413
        too_big_entry = client.post(
            f"{page_url}/x/exchange/t/{topic}/send",
            data={"csrf": csrf, "action": "fyi", "body": "y" * (300 * 1024)},
            headers={"Origin": page_url},
        )
        assert too_big_entry.status_code == 422  # the exchange's own bound, refused whole
        assert "at most" in too_big_entry.text
        assert len(list_entries(ex, topic)) == before
        near_cap = client.post(  # 200 KiB of UTF-8, about 600 KiB once percent-encoded
            f"{page_url}/x/exchange/t/{topic}/send",
            data={"csrf": csrf, "action": "fyi", "body": "\u00e9" * (100 * 1024)},
            headers={"Origin": page_url},
        )
        assert near_cap.status_code == 303, near_cap.text[:300]
    assert len(list_entries(ex, topic)) == before + 1


def test_paths_cannot_climb_out_of_a_root(page_url: str, world: World) -> None:
    for path in (
        "/x/exchange/t/..%2F..%2F..%2Fetc%2Fpasswd",
        "/x/exchange/t/%2E%2E",
        "/c/chats/..%2Fexchange%2F.mailslot%2Fconfig",
        "/c/chats/.hidden",
        "/c/chats/%2Fetc%2Fpasswd",
        "/x/nowhere",
        "/b/exchange",
        "/static/..%2F..%2Fapp.py",
        "/static/page.css%00",
    ):
        r = httpx.get(f"{page_url}{path}")
        assert r.status_code in (404, 422), (path, r.status_code)
        assert "root:" not in r.text and "sides:" not in r.text


def test_a_login_without_its_form_token_or_from_elsewhere_is_refused(
    page_url: str, world: World
) -> None:
    with httpx.Client() as client:
        r = client.post(
            f"{page_url}/login", data={"token": world.tokens["ops"]}, headers={"Origin": page_url}
        )
        assert r.status_code == 403
        form = client.get(f"{page_url}/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form)
        assert csrf
        r = client.post(
            f"{page_url}/login",
            data={"csrf": csrf.group(1), "token": world.tokens["ops"]},
            headers={"Origin": "http://127.0.0.1:1"},  # another port is another origin
        )
        assert r.status_code == 403
        assert not [c for c in client.cookies if c.startswith("mailslot_session")]


def test_a_stream_cursor_past_the_end_ends_the_stream(page_url: str, world: World) -> None:
    end = read(world.chat).cursor
    url = f"{page_url}/c/chats/{world.chat.name}/events?since={end + 10_000}"
    with httpx.stream("GET", url, timeout=30) as r:
        lines = list(r.iter_lines())
    assert any(line == "event: gone" for line in lines)
    assert httpx.get(f"{page_url}/c/chats/{world.chat.name}/events?since=abc").status_code == 422

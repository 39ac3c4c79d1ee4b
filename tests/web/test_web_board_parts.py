"""Board pieces without a server: post parsing edges, rate-limit buckets, the page renderer."""

from __future__ import annotations

import pytest

from mailslot.core.errors import FormatError, LimitExceeded
from mailslot.web.board import parse_post, render_page
from mailslot.web.boardapp import _bucket


def test_ipv6_sources_share_their_64_and_ipv4_stays_exact() -> None:
    assert _bucket("2001:db8:1:2::1") == _bucket("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert _bucket("2001:db8:1:3::1") != _bucket("2001:db8:1:2::1")
    assert _bucket("203.0.113.7") == "203.0.113.7"
    assert _bucket("::ffff:203.0.113.7") == "203.0.113.7"


def test_unicode_is_counted_in_characters_and_kept_verbatim() -> None:
    post = parse_post('{"agent": "étoile", "message": "' + "é" * 1200 + '"}')
    assert post.agent == "étoile" and len(post.message) == 1200
    with pytest.raises(LimitExceeded):
        parse_post('{"agent": "ab", "message": "' + "é" * 1201 + '"}')


def test_message_keeps_newlines_and_tabs() -> None:
    assert parse_post('{"agent": "ab", "message": "a\\n\\tb"}').message == "a\n\tb"
    with pytest.raises(FormatError):
        parse_post('{"agent": "ab", "message": "a\\u2028b"}')


def test_renderer_drops_a_stored_non_http_link() -> None:
    # Defence in depth: even a row written around the API never becomes a javascript: link.
    page = render_page(
        [
            {
                "id": 1,
                "agent": "ab",
                "message": "m",
                "link": "javascript:alert(1)",
                "posted_at": "2026-11-29T18:14:00.000Z",
            }
        ]
    )
    assert "href" not in page.split("<article", 1)[1]

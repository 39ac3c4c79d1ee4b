"""Whatever the other side sends, each app answers with a 4xx (or 507 for a full disk) and the
JSON error shape ``{"error": ...}``, never a 500: JSON that parses but is no text (a lone
surrogate), nests past the recursion limit, holds an integer past the digit limit; a path with a
trailing slash. (A disk with no room left: test_web_full_disk.py.)"""

from __future__ import annotations

import httpx
import pytest
from web_helpers import is_json_error

NESTED = '{"body": ' + "[" * 1000 + "]" * 1000 + "}"
HOSTILE_PEER = [
    pytest.param('{"body": "\\ud800"}', id="lone-surrogate-body"),
    pytest.param('{"subject": "\\udfff", "body": "x"}', id="lone-surrogate-subject"),
    pytest.param('{"body": "x", "\\ud800": 1}', id="lone-surrogate-key"),
    pytest.param(NESTED, id="nested-1000"),
    pytest.param('{"body": "x", "n": ' + "9" * 5000 + "}", id="5000-digit-integer"),
]


@pytest.mark.parametrize("content", HOSTILE_PEER)
def test_peer_inbox_refuses_hostile_json_with_422(peer_setup, peer_server, content: str) -> None:
    headers = {"Authorization": f"Bearer {peer_setup.tokens['tidal']}"}
    with peer_server() as url:
        r = httpx.post(f"{url}/inbox", content=content.encode(), headers=headers)
        ok = httpx.post(f"{url}/inbox", json={"body": "still here \U0001f600"}, headers=headers)
    assert r.status_code == 422, r.text
    assert is_json_error(r)
    assert ok.status_code == 201  # a valid surrogate pair is text, and the server lives on
    assert len(peer_setup.stored()) == 1


@pytest.mark.parametrize(
    "content",
    [
        '{"agent": "tidal", "message": "hi", "link": "https://x.example/\\ud800"}',
        '{"agent": "tidal", "message": "hi", "\\ud800": 1}',
        '{"agent": "tidal", "message": ' + "[" * 1000 + "]" * 1000 + "}",
        '{"agent": "tidal", "message": "hi", "n": ' + "9" * 5000 + "}",
    ],
    ids=["surrogate-link", "surrogate-key", "nested-1000", "5000-digit-integer"],
)
def test_board_refuses_hostile_json_with_422(board_server, content: str) -> None:
    with board_server() as url:
        r = httpx.post(
            f"{url}/api/agora",
            content=content.encode(),
            headers={"content-type": "application/json"},
        )
    assert r.status_code == 422, r.text
    assert is_json_error(r)


def test_trailing_slash_is_404_not_a_redirect(peer_setup, peer_server, board_server) -> None:
    headers = {"Authorization": f"Bearer {peer_setup.tokens['tidal']}"}
    with peer_server() as url:
        r = httpx.post(f"{url}/inbox/", json={"body": "hi"}, headers=headers)
    assert r.status_code == 404 and is_json_error(r)
    assert "location" not in r.headers
    assert peer_setup.stored() == []
    with board_server() as url:
        b = httpx.post(f"{url}/api/agora/", json={"agent": "tidal", "message": "hi"})
    assert b.status_code == 404 and is_json_error(b)

"""Whatever the other side sends, each app answers with a 4xx (or 507 for a full disk) and the
JSON error shape ``{"error": ...}``, never a 500: JSON that parses but is no text (a lone
surrogate), nests past the recursion limit, holds an integer past the digit limit; a path with a
trailing slash; a disk with no room left."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from mailslot.web.auth import new_token
from mailslot.web.settings import BoardSettings, PeerSettings

NESTED = '{"body": ' + "[" * 1000 + "]" * 1000 + "}"
HOSTILE_PEER = [
    pytest.param('{"body": "\\ud800"}', id="lone-surrogate-body"),
    pytest.param('{"subject": "\\udfff", "body": "x"}', id="lone-surrogate-subject"),
    pytest.param('{"body": "x", "\\ud800": 1}', id="lone-surrogate-key"),
    pytest.param(NESTED, id="nested-1000"),
    pytest.param('{"body": "x", "n": ' + "9" * 5000 + "}", id="5000-digit-integer"),
]


def _is_json_error(r: httpx.Response) -> bool:
    return isinstance(r.json(), dict) and isinstance(r.json().get("error"), str)


@pytest.mark.parametrize("content", HOSTILE_PEER)
def test_peer_inbox_refuses_hostile_json_with_422(peer_setup, peer_server, content: str) -> None:
    headers = {"Authorization": f"Bearer {peer_setup.tokens['tidal']}"}
    with peer_server() as url:
        r = httpx.post(f"{url}/inbox", content=content.encode(), headers=headers)
        ok = httpx.post(f"{url}/inbox", json={"body": "still here \U0001f600"}, headers=headers)
    assert r.status_code == 422, r.text
    assert _is_json_error(r)
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
    assert _is_json_error(r)


def test_trailing_slash_is_404_not_a_redirect(peer_setup, peer_server, board_server) -> None:
    headers = {"Authorization": f"Bearer {peer_setup.tokens['tidal']}"}
    with peer_server() as url:
        r = httpx.post(f"{url}/inbox/", json={"body": "hi"}, headers=headers)
    assert r.status_code == 404 and _is_json_error(r)
    assert "location" not in r.headers
    assert peer_setup.stored() == []
    with board_server() as url:
        b = httpx.post(f"{url}/api/agora/", json={"agent": "tidal", "message": "hi"})
    assert b.status_code == 404 and _is_json_error(b)


@pytest.fixture
def small_disk_size() -> str:
    """Room for a board database (its -shm and -wal files take 60 KiB) once the filler is gone."""
    return "256k"


def test_full_disk_is_507_for_the_peer_inbox(small_disk: Path, fill_disk, serve) -> None:
    from mailslot.web.peerapp import create_app

    peers = small_disk / "peer" / "peers.json"
    token = new_token(peers, "tidal")
    inbox = small_disk / "peer" / "inbox"
    app = create_app(PeerSettings(peers, inbox))
    headers = {"Authorization": f"Bearer {token}"}
    with serve(app) as url:
        fill_disk(small_disk)
        r = httpx.post(f"{url}/inbox", json={"body": "x" * 20000}, headers=headers)
        (small_disk / "filler").unlink()
        after = httpx.post(f"{url}/inbox", json={"body": "room again"}, headers=headers)
    assert r.status_code == 507, r.text
    assert _is_json_error(r) and "space" in r.json()["error"]
    assert str(small_disk) not in r.text  # the server's paths stay in its log
    assert after.status_code == 201
    left = sorted(p.name for p in inbox.iterdir() if not p.is_dir())
    assert left == [f"{after.json()['id']}.json"]  # nothing half-written from the refused one


def test_full_disk_is_507_for_the_board(small_disk: Path, fill_disk, serve) -> None:
    from mailslot.web.boardapp import create_app

    app = create_app(BoardSettings(small_disk / "agora.db", post_every_s=1))
    with serve(app) as url:
        fill_disk(small_disk)
        answers = [
            httpx.post(f"{url}/api/agora", json={"agent": f"a{i}", "message": "m" * 1200})
            for i in range(8)
        ]
        (small_disk / "filler").unlink()
    statuses = {a.status_code for a in answers}
    assert 500 not in statuses, [a.text for a in answers]
    assert 507 in statuses
    assert all(_is_json_error(a) for a in answers if a.status_code == 507)
    assert not any(str(small_disk) in a.text for a in answers)


def test_a_full_disk_spends_none_of_the_peers_hourly_quota(
    small_disk: Path, fill_disk, serve
) -> None:
    from mailslot.web.peerapp import create_app

    peers = small_disk / "peer" / "peers.json"
    token = new_token(peers, "tidal")
    inbox = small_disk / "peer" / "inbox"
    app = create_app(PeerSettings(peers, inbox, override_per_hour=1))
    headers = {"Authorization": f"Bearer {token}"}
    retried = {**headers, "Idempotency-Key": "k1"}  # how `peer send` posts: one key per message
    with serve(app) as url:
        fill_disk(small_disk)
        refused = [
            httpx.post(f"{url}/inbox", json={"body": "x" * 20000}, headers=headers),
            httpx.post(f"{url}/inbox", json={"body": "y" * 20000}, headers=retried),
            httpx.post(f"{url}/inbox", json={"body": "y" * 20000}, headers=retried),
        ]
        (small_disk / "filler").unlink()
        after = httpx.post(f"{url}/inbox", json={"body": "y" * 20000}, headers=retried)
        over = httpx.post(f"{url}/inbox", json={"body": "one too many"}, headers=headers)
    assert [r.status_code for r in refused] == [507, 507, 507], [r.text for r in refused]
    assert after.status_code == 201, after.text  # the 507s spent nothing of the 1 per hour
    assert over.status_code == 429  # the stored one did
    assert [p.name for p in inbox.iterdir() if p.is_file()] == [f"{after.json()['id']}.json"]


def test_a_full_disk_spends_none_of_a_sources_post_limit(
    small_disk: Path, fill_disk, serve
) -> None:
    from mailslot.web.boardapp import create_app

    app = create_app(BoardSettings(small_disk / "agora.db"))  # one post per 20 s
    with serve(app) as url:
        fill_disk(small_disk)
        refused = httpx.post(f"{url}/api/agora", json={"agent": "tidal", "message": "m" * 1200})
        (small_disk / "filler").unlink()
        after = httpx.post(f"{url}/api/agora", json={"agent": "tidal", "message": "room again"})
        over = httpx.post(f"{url}/api/agora", json={"agent": "tidal", "message": "too soon"})
        listed = httpx.get(f"{url}/api/agora").json()
    assert refused.status_code == 507, refused.text
    assert after.status_code == 201, after.text  # the 507 spent nothing of the post limit
    assert over.status_code == 429  # the stored post did
    assert [p["message"] for p in listed] == ["room again"]

"""A full disk is a 507 with the JSON error shape, never a 500, and spends no rate-limit quota.

Nothing half-written is left from the refused request, the server's paths stay in its log, and
once there is room again the next request is stored.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from web_helpers import is_json_error

from mailslot.web.auth import new_token
from mailslot.web.settings import BoardSettings, PeerSettings


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
    assert is_json_error(r) and "space" in r.json()["error"]
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
    assert all(is_json_error(a) for a in answers if a.status_code == 507)
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

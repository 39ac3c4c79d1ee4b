"""The peer inbox over real HTTP: identity from the token, every refusal path, nothing stored."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from mailslot.web.auth import revoke_token


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_token_decides_identity_and_forged_from_is_ignored(peer_setup, peer_server) -> None:
    with peer_server() as url:
        r = httpx.post(
            f"{url}/inbox",
            json={"from": "reef", "subject": "review", "body": "draft in outbox/"},
            headers=_auth(peer_setup.tokens["tidal"]),
        )
    assert r.status_code == 201, r.text
    receipt = r.json()
    assert receipt["from"] == "tidal"
    [path] = peer_setup.stored()
    assert path.name == f"{receipt['id']}.json"
    assert path.name.split("-")[1] == "tidal"
    record = json.loads(path.read_text())
    assert record == {
        "from": "tidal",
        "subject": "review",
        "body": "draft in outbox/",
        "received_at": receipt["received_at"],
    }
    assert not [p for p in peer_setup.inbox.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing"),
        ({"Authorization": "Bearer mst_not-a-token"}, "invalid"),
        ({"Authorization": "Basic dGlkYWw6eA=="}, "missing"),
        ({"Authorization": "Bearer"}, "missing"),
    ],
)
def test_401_without_a_valid_token(peer_setup, peer_server, headers, reason) -> None:
    with peer_server() as url:
        r = httpx.post(f"{url}/inbox", json={"body": "hello"}, headers=headers)
    assert r.status_code == 401
    assert reason in r.json()["error"]
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert peer_setup.stored() == []


def test_a_middleware_added_to_the_inbox_app_is_never_skipped(peer_setup) -> None:
    """``POST /inbox`` is answered below the middleware only while the app's middleware is
    what that handler does itself (``SHORTCUT_COVERS``, pinned here): any other middleware
    sees every ``POST /inbox`` as it sees every other request."""
    from mailslot.web.http import BodyCap
    from mailslot.web.peerapp import SHORTCUT_COVERS, create_app
    from shared_helpers import loopback_server

    settings = peer_setup.settings()
    plain = create_app(settings)
    assert tuple(m.cls for m in plain.user_middleware) == SHORTCUT_COVERS == (BodyCap,)
    seen: list[tuple[str, str]] = []

    class Seen:  # a plain ASGI middleware, as a future one might be
        def __init__(self, app) -> None:
            self.app = app

        async def __call__(self, scope, receive, send) -> None:
            if scope["type"] == "http":
                seen.append((scope["method"], scope["path"]))
            await self.app(scope, receive, send)

    for app, added in ((plain, False), (create_app(settings), True)):
        if added:
            app.add_middleware(Seen)
        with loopback_server(lambda _port, app=app: app, settings.server) as url:
            r = httpx.post(
                f"{url}/inbox", json={"body": "hello"}, headers=_auth(peer_setup.tokens["tidal"])
            )
            assert r.status_code == 201, r.text
            assert httpx.get(f"{url}/inbox").status_code == 405
        assert app._take_shortcut() is (None if added else app.post_inbox)
    assert seen == [("POST", "/inbox"), ("GET", "/inbox")]
    assert len(peer_setup.stored()) == 2


def test_404_405_and_json_errors(peer_setup, peer_server) -> None:
    auth = _auth(peer_setup.tokens["tidal"])
    with peer_server() as url:
        cases = [
            httpx.get(f"{url}/inbox", headers=auth),
            httpx.put(f"{url}/inbox", json={"body": "x"}, headers=auth),
            httpx.delete(f"{url}/inbox", headers=auth),
            httpx.post(f"{url}/other", json={"body": "x"}, headers=auth),
            httpx.get(f"{url}/"),
            httpx.get(f"{url}/openapi.json"),
            httpx.get(f"{url}/docs"),
        ]
    assert [r.status_code for r in cases] == [405, 405, 405, 404, 404, 404, 404]
    for r in cases:
        assert r.headers["content-type"] == "application/json"
        assert set(r.json()) == {"error"}
    assert peer_setup.stored() == []


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[]",
        b'"body"',
        b"{}",
        b'{"body": ""}',
        b'{"body": 5}',
        b'{"body": "x", "subject": 7}',
        b'{"body": "x", "subject": "two\\nlines"}',
        json.dumps({"body": "x", "subject": "s" * 201}).encode(),
        b"\xff\xfe not utf-8",
    ],
)
def test_422_bad_json_or_shape_stores_nothing(peer_setup, peer_server, content) -> None:
    with peer_server() as url:
        r = httpx.post(f"{url}/inbox", content=content, headers=_auth(peer_setup.tokens["tidal"]))
    assert r.status_code == 422, r.text
    assert "Traceback" not in r.text and set(r.json()) == {"error"}
    assert peer_setup.stored() == []


def test_413_by_content_length_and_by_streamed_body(peer_setup, peer_server) -> None:
    auth = _auth(peer_setup.tokens["tidal"])
    big = json.dumps({"body": "x" * (32 * 1024)}).encode()  # just over 32 KB with the JSON

    def chunks() -> Iterator[bytes]:
        for _ in range(64):  # 4 MB if the server read it all; it must stop at the cap
            yield b"x" * 65536

    with peer_server() as url:
        r1 = httpx.post(f"{url}/inbox", content=big, headers=auth)
        r2 = httpx.post(f"{url}/inbox", content=chunks(), headers=auth)
        # Exactly at the cap is accepted: a bound, not an off-by-one.
        body = "y" * (32 * 1024 - len(json.dumps({"body": ""})))
        r3 = httpx.post(f"{url}/inbox", content=json.dumps({"body": body}), headers=auth)
    assert r1.status_code == 413 and "limit" in r1.json()["error"]
    assert r2.status_code == 413 and "limit" in r2.json()["error"]
    assert r3.status_code == 201
    assert len(peer_setup.stored()) == 1


def test_429_per_peer_others_unaffected_and_refusals_do_not_count(peer_setup, peer_server) -> None:
    tidal, reef = _auth(peer_setup.tokens["tidal"]), _auth(peer_setup.tokens["reef"])
    with peer_server(override_per_hour=3) as url, httpx.Client(base_url=url) as c:
        # Refused requests spend none of the quota.
        for _ in range(5):
            assert c.post("/inbox", content=b"{}", headers=tidal).status_code == 422
        codes = [
            c.post("/inbox", json={"body": f"m{i}"}, headers=tidal).status_code for i in range(5)
        ]
        other = c.post("/inbox", json={"body": "from reef"}, headers=reef)
        limited = c.post("/inbox", json={"body": "again"}, headers=tidal)
    assert codes == [201, 201, 201, 429, 429]
    assert other.status_code == 201
    assert limited.status_code == 429 and "per hour" in limited.json()["error"]
    assert int(limited.headers["retry-after"]) >= 1
    senders = sorted(json.loads(p.read_text())["from"] for p in peer_setup.stored())
    assert senders == ["reef", "tidal", "tidal", "tidal"]


def test_concurrent_posts_never_store_past_the_hourly_limit(peer_setup, peer_server) -> None:
    from concurrent.futures import ThreadPoolExecutor

    tidal = _auth(peer_setup.tokens["tidal"])
    with peer_server(override_per_hour=3) as url, ThreadPoolExecutor(12) as pool:
        codes = list(
            pool.map(
                lambda i: httpx.post(f"{url}/inbox", json={"body": f"m{i}"}, headers=tidal),
                range(12),
            )
        )
    statuses = sorted(r.status_code for r in codes)
    assert statuses == [201] * 3 + [429] * 9  # slots held by writes in flight count
    assert len(peer_setup.stored()) == 3


def test_per_peer_limit_from_peers_file(peer_setup, peer_server) -> None:
    from mailslot.web.auth import new_token

    token = new_token(peer_setup.peers_file, "slow", per_hour=1)
    with peer_server() as url:
        a = httpx.post(f"{url}/inbox", json={"body": "1"}, headers=_auth(token))
        b = httpx.post(f"{url}/inbox", json={"body": "2"}, headers=_auth(token))
    assert (a.status_code, b.status_code) == (201, 429)


def test_revoked_token_stops_working_on_a_running_server(peer_setup, peer_server) -> None:
    auth = _auth(peer_setup.tokens["tidal"])
    with peer_server() as url:
        assert httpx.post(f"{url}/inbox", json={"body": "1"}, headers=auth).status_code == 201
        revoke_token(peer_setup.peers_file, "tidal")
        r = httpx.post(f"{url}/inbox", json={"body": "2"}, headers=auth)
    assert r.status_code == 401
    assert len(peer_setup.stored()) == 1


def test_stale_temp_files_are_swept_at_start_and_never_listed(peer_setup, peer_server) -> None:
    import os

    from mailslot.web.peer import inbox_messages

    peer_setup.inbox.mkdir(parents=True, exist_ok=True)
    stale = peer_setup.inbox / ".20261129T000000.000Z-tidal-0000.json.123.deadbeef.tmp"
    fresh = peer_setup.inbox / ".20261129T000000.000Z-tidal-0001.json.124.deadbeef.tmp"
    for p in (stale, fresh):
        p.write_text('{"from": "tidal", "body": "half')
    os.utime(stale, (1, 1))  # a writer that died long ago
    assert inbox_messages(peer_setup.inbox) == []
    with peer_server():
        pass
    assert not stale.exists() and fresh.exists()  # a write may still be in flight


def test_broken_peers_file_admits_nobody_with_503(peer_setup, peer_server) -> None:
    auth = _auth(peer_setup.tokens["tidal"])
    with peer_server() as url:
        peer_setup.peers_file.write_text("{ not json")
        broken = httpx.post(f"{url}/inbox", json={"body": "x"}, headers=auth)
        peer_setup.peers_file.unlink()
        missing = httpx.post(f"{url}/inbox", json={"body": "x"}, headers=auth)
    assert broken.status_code == missing.status_code == 503
    assert broken.json() == {"error": "inbox unavailable"}
    assert peer_setup.stored() == []


def test_a_repeated_idempotency_key_gets_the_first_answer_per_peer(peer_setup, peer_server) -> None:
    def post(peer: str, body: str, key: str, url: str) -> httpx.Response:
        return httpx.post(
            f"{url}/inbox",
            json={"body": body},
            headers={"Authorization": f"Bearer {peer_setup.tokens[peer]}", "Idempotency-Key": key},
        )

    with peer_server() as url:
        first = post("tidal", "once", "k-1", url)
        again = post("tidal", "once", "k-1", url)
        other_peer = post("reef", "once", "k-1", url)  # a key is never trusted across peers
        changed = post("tidal", "something else", "k-1", url)
    with peer_server() as url:  # a restarted server still remembers
        after_restart = post("tidal", "once", "k-1", url)
    assert first.status_code == again.status_code == after_restart.status_code == 201
    assert again.json() == first.json() == after_restart.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert other_peer.status_code == 201 and other_peer.json()["id"] != first.json()["id"]
    assert changed.status_code == 422 and "different message" in changed.json()["error"]
    assert len(peer_setup.stored()) == 2  # tidal's once, reef's once


# ``peer serve`` in a process that SIGKILLs itself around its first message write: "after", once
# the message is stored (before the answer leaves); "before", before a byte of it is written.
_DIES_IN_STORE = """
import os, signal, sys
import mailslot.web.peerapp as peerapp
_store = peerapp.store
def _store_and_die(*args, **kwargs):
    if os.environ["DIE"] == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    _store(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
peerapp.store = _store_and_die
sys.argv[0] = "mailslot"
from mailslot.cli import main
main()
"""


@pytest.mark.parametrize("die", ["after", "before"])
def test_a_retry_after_the_server_was_killed_mid_request_is_stored_once(
    peer_setup, peer_server, die: str
) -> None:
    import os
    import subprocess
    import sys

    args = ["peer", "serve", "--bind", "127.0.0.1:0", "--peers", str(peer_setup.peers_file)]
    server = subprocess.Popen(
        [sys.executable, "-c", _DIES_IN_STORE, *args, "--inbox", str(peer_setup.inbox)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DIE": die},
    )
    headers = {**_auth(peer_setup.tokens["tidal"]), "Idempotency-Key": "k-killed"}
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "listening on" in line, line
        with pytest.raises(httpx.TransportError):  # the server died before it answered
            httpx.post(
                line.split("listening on ", 1)[1].strip(), json={"body": "x"}, headers=headers
            )
        assert server.wait(30) == -9
    finally:
        server.kill()
        server.wait(30)
    with peer_server() as url:  # the sender retries against the restarted server
        retry = httpx.post(f"{url}/inbox", json={"body": "x"}, headers=headers)
        again = httpx.post(f"{url}/inbox", json={"body": "x"}, headers=headers)
    assert retry.status_code == again.status_code == 201, retry.text
    assert again.json() == retry.json()
    stored = peer_setup.stored()
    assert [p.stem for p in stored] == [retry.json()["id"]]  # once, under the id it was given
    assert json.loads(stored[0].read_text())["body"] == "x"


def test_every_message_answered_201_is_whole_on_disk_after_a_kill_under_load(
    peer_setup, peer_server
) -> None:
    """32 senders post as fast as they can; the server is SIGKILLed mid-load. Every message it
    answered 201 is in the inbox, whole, under the id it answered (and a restart lists it)."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    from mailslot.web.peer import inbox_messages

    args = ["peer", "serve", "--bind", "127.0.0.1:0", "--per-hour", "1000000"]
    args += ["--peers", str(peer_setup.peers_file), "--inbox", str(peer_setup.inbox)]
    server = subprocess.Popen(
        [sys.executable, "-m", "mailslot", *args],
        stderr=subprocess.PIPE,
        text=True,
    )
    answered: dict[str, str] = {}
    lock = threading.Lock()
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def sender(n: int) -> None:
        with httpx.Client(headers=_auth(peer_setup.tokens["tidal"]), timeout=30) as c:
            for i in range(100_000):
                if stop.is_set():
                    return
                body = f"sender {n} message {i} " + "x" * (n * 37 % 500)
                try:
                    r = c.post(url, json={"body": body})
                except httpx.TransportError:
                    return  # the server is gone: this one was never answered
                if r.status_code == 201:
                    with lock:
                        answered[r.json()["id"]] = body

    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "listening on" in line, line
        url = line.split("listening on ", 1)[1].strip()
        threads += [threading.Thread(target=sender, args=(n,)) for n in range(32)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(answered) < 300 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(server.pid, signal.SIGKILL)  # mid-load: writes in flight on every worker
        assert server.wait(30) == -signal.SIGKILL
    finally:
        stop.set()
        server.kill()
        server.wait(30)
        for t in threads:
            t.join(60)
    assert len(answered) >= 300
    for msg_id, body in answered.items():
        record = json.loads((peer_setup.inbox / f"{msg_id}.json").read_text())
        assert (record["from"], record["body"]) == ("tidal", body)
    with peer_server():  # a restart sweeps what was cut short; listed whole
        pass
    listed = {m.id: m for m in inbox_messages(peer_setup.inbox)}
    assert all(m.error is None for m in listed.values())
    assert set(answered) <= set(listed)

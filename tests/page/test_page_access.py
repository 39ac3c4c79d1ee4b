"""Who may read and write the page, over real HTTP: Host checks, logins, CSRF, origins, the CSP,
and where the server may listen."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from page_helpers import World, login, serve_page

from mailslot.exchange.entries import list_entries
from mailslot.exchange.layout import load_exchange
from mailslot.web.page.settings import PageSettings


def test_a_foreign_host_is_misdirected_before_any_data(page_url: str) -> None:
    for host in ("evil.example", "evil.example:80", f"attacker.test:{page_url.rsplit(':', 1)[1]}"):
        r = httpx.get(f"{page_url}/", headers={"Host": host})
        assert r.status_code == 421
        assert "exchange" not in r.text
    assert httpx.get(f"{page_url}/").status_code == 200
    port = page_url.rsplit(":", 1)[1]
    assert httpx.get(f"{page_url}/", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_every_page_carries_a_strict_csp_with_no_inline_script(page_url: str, world: World) -> None:
    for path in ("/", "/x/exchange", f"/x/exchange/t/{world.topics[0]}", "/login", "/nowhere"):
        r = httpx.get(f"{page_url}{path}")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp
        assert "unsafe-inline" not in csp and "http" not in csp
        assert r.headers["x-frame-options"] == "DENY"
        assert not re.search(r"<script(?![^>]*\bsrc=\"/static/)", r.text), path


def _form(client: httpx.Client, url: str, path: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(f"{url}{path}").text)
    assert found
    return found.group(1)


def test_reading_is_open_on_loopback_but_every_write_needs_a_login(
    page_url: str, world: World
) -> None:
    topic = world.topics[0]
    assert httpx.get(f"{page_url}/x/exchange/t/{topic}").status_code == 200
    r = httpx.post(
        f"{page_url}/x/exchange/t/{topic}/send",
        data={"action": "fyi", "body": "from a local agent"},
        headers={"Origin": page_url},
    )
    assert r.status_code == 401
    ex = load_exchange(world.exchange)
    assert all("local agent" not in e.body for e in list_entries(ex, topic))


def test_a_humans_form_post_lands_as_a_real_entry(page_url: str, world: World) -> None:
    topic = world.topics[0]
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        r = client.post(
            f"{page_url}/x/exchange/t/{topic}/send",
            data={"csrf": csrf, "action": "fyi", "body": "Approved by *ops*."},
            headers={"Origin": page_url},
        )
        assert r.status_code == 303, r.text
        shown = client.get(f"{page_url}/x/exchange/t/{topic}").text
    entries = list_entries(load_exchange(world.exchange), topic)
    mine = [e for e in entries if e.sender == "ops"]
    assert len(mine) == 1 and mine[0].body.strip() == "Approved by *ops*."
    assert mine[0].side == "claude" and mine[0].verified and mine[0].action == "fyi"
    assert "Approved by <em>ops</em>." in shown


def test_a_human_sets_their_sides_state_and_starts_a_topic(page_url: str, world: World) -> None:
    from mailslot.exchange.state import read_state

    ex = load_exchange(world.exchange)
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        assert "-budget" not in client.get(f"{page_url}/x/exchange").text  # the view is built
        r = client.post(
            f"{page_url}/x/exchange/t/{world.topics[1]}/state",
            data={"csrf": csrf, "status": "blocked"},
            headers={"Origin": page_url},
        )
        assert r.status_code == 303, r.text
        r = client.post(
            f"{page_url}/x/exchange/send",
            data={"csrf": csrf, "topic": "budget", "action": "required", "body": "Budget?"},
            headers={"Origin": page_url},
        )
        assert r.status_code == 303, r.text
        # the table a human goes back to already shows their write (no waiting on an event)
        assert "-budget" in client.get(f"{page_url}/x/exchange").text
    state = read_state(ex, world.topics[1], "claude")
    assert state.status == "blocked" and state.updated_by == "ops"
    new = r.headers["location"].rsplit("/", 1)[1]
    assert new.endswith("-budget")
    [entry] = list_entries(ex, new)
    assert entry.sender == "ops" and entry.action == "required"


def test_a_write_without_the_csrf_token_or_from_elsewhere_is_refused(
    page_url: str, world: World
) -> None:
    topic = world.topics[0]
    ex = load_exchange(world.exchange)
    before = len(list_entries(ex, topic))
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        attempts = [
            ({"action": "fyi", "body": "no token"}, {"Origin": page_url}),
            ({"csrf": "forged", "action": "fyi", "body": "bad token"}, {"Origin": page_url}),
            ({"csrf": csrf, "action": "fyi", "body": "cross-site"}, {"Origin": "http://evil"}),
            ({"csrf": csrf, "action": "fyi", "body": "no origin"}, {}),
        ]
        for data, headers in attempts:
            r = client.post(f"{page_url}/x/exchange/t/{topic}/send", data=data, headers=headers)
            assert r.status_code == 403, (data, r.status_code)
    assert len(list_entries(ex, topic)) == before


def test_a_human_not_named_in_the_exchange_may_not_write_there(page_url: str, world: World) -> None:
    topic = world.topics[0]
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["mallory"])
        r = client.post(
            f"{page_url}/x/exchange/t/{topic}/send",
            data={"csrf": csrf, "action": "fyi", "body": "I am not a member"},
            headers={"Origin": page_url},
        )
    assert r.status_code == 409
    assert "not a member" in r.text
    assert all(e.sender != "mallory" for e in list_entries(load_exchange(world.exchange), topic))


def test_a_wrong_credential_logs_nobody_in(page_url: str) -> None:
    with httpx.Client() as client:
        form = client.get(f"{page_url}/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form)
        assert csrf
        r = client.post(
            f"{page_url}/login",
            data={"csrf": csrf.group(1), "token": "msh_guess"},
            headers={"Origin": page_url},
        )
        assert r.status_code == 401
        assert not [c for c in client.cookies if c.startswith("mailslot_session")]


def test_a_revoked_credential_ends_its_session(page_url: str, world: World) -> None:
    from mailslot.web.page.humans import revoke

    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        revoke(world.humans_file, "ops")
        r = client.post(
            f"{page_url}/x/exchange/t/{world.topics[0]}/send",
            data={"csrf": csrf, "action": "fyi", "body": "after revoke"},
            headers={"Origin": page_url},
        )
    assert r.status_code == 401


def test_off_loopback_reading_needs_a_login_too(world: World) -> None:
    settings = PageSettings(world.roots, world.humans_file, bind_host="10.11.12.13")
    with serve_page(settings) as url:
        port = url.rsplit(":", 1)[1]
        host = {"Host": f"10.11.12.13:{port}"}
        r = httpx.get(f"{url}/x/exchange", headers=host)
        assert r.status_code == 303 and r.headers["location"] == "/login"
        assert httpx.get(f"{url}/", headers={"Host": f"127.0.0.1:{port}"}).status_code == 421
        with httpx.Client(headers=host) as client:
            form = client.get(f"{url}/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form)
            assert csrf
            origin = f"http://10.11.12.13:{port}"
            r = client.post(
                f"{url}/login",
                data={"csrf": csrf.group(1), "token": world.tokens["mallory"]},
                headers={"Origin": origin},
            )
            assert r.status_code == 303
            page = client.get(f"{url}/x/exchange")
            assert page.status_code == 200 and world.topics[0] in page.text


@pytest.mark.parametrize("bind", ["8.8.8.8:0", "0.0.0.0:0", "[::]:0", "example.com:80"])
def test_a_public_or_wildcard_bind_is_refused(run_cli, world: World, bind: str) -> None:
    r = run_cli("web", "--bind", bind, "--root", str(world.exchange))
    assert r.returncode == 1
    assert r.stderr.startswith("mailslot: error:")
    assert "listening" not in r.stderr


def test_web_token_prints_a_credential_once_and_revoke_removes_it(run_cli, tmp_path: Path) -> None:
    from mailslot.web.page.humans import load_humans, match

    humans = tmp_path / "humans.json"
    r = run_cli("web", "token", "ops", "--humans", str(humans))
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip().splitlines()[-1]
    assert token.startswith("msh_") and token not in humans.read_text()
    assert oct(humans.stat().st_mode & 0o777) == "0o600"
    found = match(load_humans(humans), token)
    assert found is not None and found.name == "ops"
    again = run_cli("web", "token", "ops", "--humans", str(humans))
    assert again.returncode == 1 and "--replace" in again.stderr
    assert run_cli("web", "revoke", "ops", "--humans", str(humans)).returncode == 0
    assert match(load_humans(humans), token) is None
    assert run_cli("web", "revoke", "ops", "--humans", str(humans)).returncode == 1


def test_two_pages_on_one_host_keep_their_own_sessions(world: World) -> None:
    first = PageSettings(world.roots, world.humans_file)
    with serve_page(first) as a, serve_page(first) as b, httpx.Client() as client:
        login(client, a, world.tokens["ops"])
        login(client, b, world.tokens["mallory"])  # the browser's jar holds both
        assert 'signed in as <b class="human">ops</b>' in client.get(f"{a}/").text
        assert 'signed in as <b class="human">mallory</b>' in client.get(f"{b}/").text

"""The board over real HTTP: bounds refused whole, rate limits, bans, moderation, proxy trust,
the escaped page and the discovery card."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from mailslot.cli import cli


def _post(url: str, doc: object, **kw) -> httpx.Response:
    return httpx.post(f"{url}/api/agora", json=doc, **kw)


def test_post_then_list_newest_first(board_server) -> None:
    with board_server(post_every_s=1, requests_per_minute=1000) as url:
        first = _post(
            url,
            {
                "agent": "tidal",
                "message": "hello",
                "link": "https://example.org/x",
                "id": 999,
                "posted_at": "1999-01-01T00:00:00Z",
            },
        )
        assert first.status_code == 201, first.text
        listed = httpx.get(f"{url}/api/agora").json()
    post = first.json()
    assert set(post) == {"id", "agent", "message", "link", "posted_at"}
    assert (
        post["id"] == 1
        and post["posted_at"].startswith("20")
        and post["posted_at"] != ("1999-01-01T00:00:00Z")
    )
    assert listed == [post]


def test_only_the_50_newest(board_server, tmp_path: Path) -> None:
    from mailslot.web.board import Board, NewPost

    board = Board(tmp_path / "board" / "agora.db")
    for i in range(60):
        board.add(NewPost("ab", f"m{i}", None), "127.0.0.1")
    board.close()
    with board_server() as url:
        posts = httpx.get(f"{url}/api/agora").json()
    assert len(posts) == 50 and posts[0]["message"] == "m59" and posts[-1]["message"] == "m10"


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"agent": "a", "message": "m"}, "agent"),
        ({"agent": "a" * 41, "message": "m"}, "agent"),
        ({"agent": " ab", "message": "m"}, "agent"),
        ({"agent": "ab\u202e", "message": "m"}, "agent"),
        ({"agent": "ab\n", "message": "m"}, "agent"),
        ({"agent": "ab", "message": ""}, "message"),
        ({"agent": "ab", "message": "m" * 1201}, "message"),
        ({"agent": "ab", "message": "a\x00b"}, "message"),
        ({"agent": "ab", "message": "a\u061cb"}, "message"),
        ({"agent": "ab", "message": "m", "link": "javascript:alert(1)"}, "link"),
        ({"agent": "ab", "message": "m", "link": "JavaScript:alert(1)"}, "link"),
        ({"agent": "ab", "message": "m", "link": " javascript:alert(1)"}, "link"),
        ({"agent": "ab", "message": "m", "link": "data:text/html,<script>1</script>"}, "link"),
        ({"agent": "ab", "message": "m", "link": "//evil.example/"}, "link"),
        ({"agent": "ab", "message": "m", "link": "https://user:pw@evil.example/"}, "link"),
        ({"agent": "ab", "message": "m", "link": "https://"}, "link"),
        ({"agent": "ab", "message": "m", "link": 5}, "link"),
        ({"agent": 5, "message": "m"}, "agent"),
        ({"message": "m"}, "agent"),
        ({"agent": "ab"}, "message"),
        ([], "object"),
    ],
)
def test_bounds_rejected_not_truncated(board_server, doc, field: str) -> None:
    with board_server(requests_per_minute=1000) as url:
        r = _post(url, doc)
        listed = httpx.get(f"{url}/api/agora").json()
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]
    assert listed == []


@pytest.mark.parametrize(
    "agent",
    [
        "a\u200bb",  # zero-width space: shows as "ab"
        "ti\u200ddal",  # zero-width joiner
        "tid\u00adal",  # soft hyphen
        "tidal\u2060",  # word joiner
        "\ufefftidal",  # zero-width no-break space (BOM)
        "tidal\U000e0041",  # tag character
        "ti\u034fdal",  # combining grapheme joiner (Mn, invisible)
        "tidal\ufe0f",  # variation selector
        "ti\u3164dal",  # Hangul filler (Lo, blank)
        "tidal\u061c",  # Arabic letter mark (a bidi control)
    ],
)
def test_an_agent_name_with_invisible_characters_is_refused(board_server, agent: str) -> None:
    """On a public board a name that displays as another name is an impersonation."""
    with board_server() as url:
        r = _post(url, {"agent": agent, "message": "hello"})
        ok = _post(url, {"agent": "tidal", "message": "family \U0001f468\u200d\U0001f467 ok"})
        listed = httpx.get(f"{url}/api/agora").json()
    assert r.status_code == 422, r.text
    assert "agent" in r.json()["error"] and "invisible" in r.json()["error"]
    assert ok.status_code == 201  # a zero-width joiner inside a message's emoji is kept
    assert [p["agent"] for p in listed] == ["tidal"]
    assert listed[0]["message"] == "family \U0001f468\u200d\U0001f467 ok"


def test_edges_accepted_exactly(board_server) -> None:
    with board_server(post_every_s=1, requests_per_minute=1000) as url, httpx.Client() as c:
        r = c.post(
            f"{url}/api/agora",
            json={"agent": "ab", "message": "m" * 1200, "link": "http://example.org"},
        )
        assert r.status_code == 201
    assert len(r.json()["message"]) == 1200


def test_body_cap_413_and_bad_json_422(board_server) -> None:
    with board_server(requests_per_minute=1000) as url:
        big = httpx.post(
            f"{url}/api/agora",
            content=b"x" * (8 * 1024 + 1),
            headers={"content-type": "application/json"},
        )
        bad = httpx.post(f"{url}/api/agora", content=b"{nope")
        listed = httpx.get(f"{url}/api/agora").json()
    assert big.status_code == 413 and "error" in big.json()
    assert bad.status_code == 422 and "error" in bad.json()
    assert listed == []


def test_post_limit_counts_accepted_posts_and_bounds_come_first(board_server) -> None:
    with board_server(requests_per_minute=1000) as url, httpx.Client(base_url=url) as c:
        refused = [
            c.post("/api/agora", json={"agent": "a", "message": "m"}).status_code for _ in range(3)
        ]
        ok = c.post("/api/agora", json={"agent": "ab", "message": "first"})
        second = c.post("/api/agora", json={"agent": "ab", "message": "second"})
        still_bounds = c.post("/api/agora", json={"agent": "ab", "message": ""})
        listed = c.get("/api/agora").json()
    assert refused == [422, 422, 422]  # refused posts did not spend the one-per-20-s slot
    assert ok.status_code == 201
    assert second.status_code == 429 and int(second.headers["retry-after"]) >= 1
    assert still_bounds.status_code == 422  # bounds are checked before the rate limit
    assert [p["message"] for p in listed] == ["first"]


def test_daily_limit(board_server) -> None:
    with board_server(post_every_s=1, posts_per_day=2, requests_per_minute=1000) as url:
        import time

        codes = []
        for i in range(3):
            codes.append(_post(url, {"agent": "ab", "message": f"m{i}"}).status_code)
            time.sleep(1.05)  # past the per-post window, well inside the day
    assert codes == [201, 201, 429]


def test_request_flood_limit_counts_refused_requests(board_server) -> None:
    with board_server(requests_per_minute=5) as url, httpx.Client(base_url=url) as c:
        codes = [c.post("/api/agora", json={"agent": "x"}).status_code for _ in range(7)]
        valid = c.post("/api/agora", json={"agent": "ab", "message": "legit"})
        reads = c.get("/api/agora")
    assert codes == [422] * 5 + [429, 429]
    assert valid.status_code == 429 and "too many requests" in valid.json()["error"]
    assert reads.status_code == 200  # reads stay open


def test_ban_refuses_with_403_and_moderation_works_on_a_running_server(
    board_server, tmp_path: Path
) -> None:
    db = str(tmp_path / "board" / "agora.db")
    run = CliRunner().invoke
    with board_server(post_every_s=1, requests_per_minute=1000) as url:
        post = _post(url, {"agent": "spammer", "message": "buy now"}).json()
        listed = json.loads(run(cli, ["board", "moderate", "list", "--db", db, "--json"]).stdout)
        assert listed["posts"][0]["source"] == "127.0.0.1"
        assert run(cli, ["board", "moderate", "hide", str(post["id"]), "--db", db]).exit_code == 0
        after_hide = httpx.get(f"{url}/api/agora").json()
        page = httpx.get(f"{url}/").text
        r = run(cli, ["board", "moderate", "ban", "127.0.0.0/8", "--db", db, "--reason", "spam"])
        assert r.exit_code == 0, r.output
        banned = _post(url, {"agent": "spammer", "message": "again"})
        run(cli, ["board", "moderate", "ban", "127.0.0.0/8", "--db", db, "--undo"])
        import time

        time.sleep(1.05)
        unbanned = _post(url, {"agent": "spammer", "message": "sorry"})
    assert after_hide == [] and "buy now" not in page
    assert banned.status_code == 403 and "banned" in banned.json()["error"]
    assert unbanned.status_code == 201
    shown = run(cli, ["board", "moderate", "list", "--db", db]).stdout
    assert "HIDDEN spammer: buy now" in shown
    missing = run(cli, ["board", "moderate", "hide", "999", "--db", db])
    assert missing.exit_code == 1 and "no post 999" in missing.stderr


def test_forwarded_for_believed_only_from_a_trusted_proxy(board_server, tmp_path: Path) -> None:
    db = str(tmp_path / "board" / "agora.db")
    spoof = {"X-Forwarded-For": "203.0.113.9"}
    with board_server(post_every_s=1, requests_per_minute=1000) as url:
        _post(url, {"agent": "ab", "message": "untrusted"}, headers=spoof)
    with board_server(post_every_s=1, requests_per_minute=1000, trust_proxy=("127.0.0.1",)) as url:
        a = _post(
            url,
            {"agent": "ab", "message": "via proxy a"},
            headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.9"},
        )
        b = _post(
            url,
            {"agent": "ab", "message": "via proxy b"},
            headers={"X-Forwarded-For": "203.0.113.10"},
        )
        same = _post(
            url, {"agent": "ab", "message": "again a"}, headers={"X-Forwarded-For": "203.0.113.9"}
        )
    assert (a.status_code, b.status_code, same.status_code) == (201, 201, 429)
    out = json.loads(
        CliRunner().invoke(cli, ["board", "moderate", "list", "--db", db, "--json"]).stdout
    )
    sources = {p["message"]: p["source"] for p in out["posts"]}
    assert sources == {
        "untrusted": "127.0.0.1",
        "via proxy a": "203.0.113.9",
        "via proxy b": "203.0.113.10",
    }


def test_page_escapes_every_field_and_sends_a_strict_csp(board_server) -> None:
    evil = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'
    with board_server(post_every_s=1, requests_per_minute=1000) as url:
        _post(
            url,
            {
                "agent": "<b>ag</b>",
                "message": evil,
                "link": 'https://example.org/"><script>alert(1)</script>',
            },
        )
        r = httpx.get(f"{url}/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "<script" not in r.text and "<img" not in r.text and "<b>ag" not in r.text
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in r.text
    assert 'href="https://example.org/&quot;&gt;&lt;script&gt;' in r.text
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "unsafe" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"


def test_card_and_alias_are_identical_and_carry_the_policy(board_server, tmp_path: Path) -> None:
    from mailslot.web.auth import new_token

    peers = tmp_path / "peers.json"
    new_token(peers, "tidal", address="https://tidal.example/.well-known/agent-card.json")
    card_yaml = tmp_path / "card.yaml"
    card_yaml.write_text(
        "name: beacon\nfleet: [beacon, lantern, tidal]\n"
        "peers:\n  - {name: reef, url: https://reef.example/.well-known/agent.json}\n"
        "peer_inbox: http://100.64.0.7:8790/inbox\n"
    )
    with board_server(
        card_file=card_yaml, peers_file=peers, public_url="https://board.example"
    ) as url:
        a = httpx.get(f"{url}/.well-known/agent-card.json")
        b = httpx.get(f"{url}/.well-known/agent.json")
    assert a.status_code == b.status_code == 200 and a.content == b.content
    card = a.json()
    for key in (
        "name",
        "description",
        "supportedInterfaces",
        "version",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
    ):
        assert key in card
    assert card["name"] == "beacon"
    urls = [i["url"] for i in card["supportedInterfaces"]]
    assert urls == ["https://board.example/api/agora", "http://100.64.0.7:8790/inbox"]
    params = card["capabilities"]["extensions"][0]["params"]
    assert params["fleet"] == ["beacon", "lantern", "tidal"]
    assert {p["name"] for p in params["peers"]} == {"reef", "tidal"}
    assert "never executed" in params["policy"] and "never executed" in card["description"]
    assert "token_sha256" not in a.text and "sha256" not in json.dumps(params)
    assert {s["id"] for s in card["skills"]} == {"agora-read", "agora-post", "peer-inbox"}


def test_board_errors_are_json(board_server) -> None:
    with board_server() as url:
        nf = httpx.get(f"{url}/nope")
        na = httpx.delete(f"{url}/api/agora")
        spec = httpx.get(f"{url}/openapi.json")
    assert nf.status_code == 404 and nf.json() == {"error": "not found"}
    assert na.status_code == 405 and na.json() == {"error": "method not allowed"}
    assert spec.status_code == 200 and "/api/agora" in spec.json()["paths"]


def test_empty_link_means_no_link(board_server) -> None:
    with board_server(post_every_s=1) as url:
        r = _post(url, {"agent": "tidal", "message": "no link here", "link": ""})
        listed = httpx.get(f"{url}/api/agora").json()
        page = httpx.get(f"{url}/").text
    assert r.status_code == 201, r.text
    assert r.json()["link"] is None
    assert listed[0]["link"] is None
    assert 'rel="nofollow' not in page  # no link rendered for the post


def test_manifest_keys_sit_at_the_top_level_for_jq(board_server, tmp_path: Path) -> None:
    import shutil
    import subprocess

    card_yaml = tmp_path / "card.yaml"
    card_yaml.write_text(
        "name: beacon\nfleet: [beacon, lantern]\n"
        "peers:\n  - {name: reef, url: https://reef.example/.well-known/agent.json}\n"
        "peer_inbox: http://100.64.0.7:8790/inbox\n"
    )
    with board_server(card_file=card_yaml, public_url="https://board.example") as url:
        manifest = f"{url}/.well-known/agent.json"
        card = httpx.get(manifest).json()
        if shutil.which("jq") and shutil.which("curl"):  # what a bash agent runs
            out = subprocess.run(
                [
                    "bash",
                    "-c",
                    'curl -sf "$1" | jq -c ".fleet, .endpoints.agora, .policy"',
                    "-",
                    manifest,
                ],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.splitlines()
            assert json.loads(out[0]) == ["beacon", "lantern"]
            assert json.loads(out[1]) == "https://board.example/api/agora"
            assert "never executed" in json.loads(out[2])
    params = card["capabilities"]["extensions"][0]["params"]
    for key in ("fleet", "peers", "endpoints", "protocols", "policy"):
        assert card[key] == params[key]  # the same manifest in both places
    assert card["peers"] == [
        {"name": "reef", "manifest": "https://reef.example/.well-known/agent.json"}
    ]
    assert card["endpoints"]["peer_inbox"] == "http://100.64.0.7:8790/inbox"
    assert card["name"] == "beacon" and card["supportedInterfaces"]  # the A2A fields stay

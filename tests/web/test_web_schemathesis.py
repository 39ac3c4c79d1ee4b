"""Property tests from each app's OpenAPI spec (schemathesis) against a live server: whatever
a client sends, the answer is never a 5xx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

EXAMPLES = 40  # per operation: bounded, so the suite stays quick on a loaded 2-core machine


def _fuzz(spec: dict[str, Any], url: str, headers: dict[str, str] | None = None) -> int:
    schema = schemathesis.openapi.from_dict(spec)
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            case.call_and_validate(base_url=url, headers=headers, checks=[not_a_server_error])

        run()
    return operations


def _board_without_limits(tmp_path: Path) -> Any:
    """The board app with its rate limits out of the generated requests' way."""
    from mailslot.web.boardapp import create_app
    from mailslot.web.settings import BoardSettings

    return create_app(
        BoardSettings(
            tmp_path / "agora.db",
            requests_per_minute=100_000,
            post_every_s=1,
            posts_per_day=100_000,
        )
    )


@pytest.mark.slow
def test_peer_inbox_spec_never_5xx(peer_setup, serve) -> None:
    from mailslot.web.peerapp import create_app

    app = create_app(peer_setup.settings(override_per_hour=100_000))
    with serve(app) as url:
        # With a valid token, so the fuzzing reaches the payload checks and the write.
        n = _fuzz(app.openapi(), url, {"Authorization": f"Bearer {peer_setup.tokens['tidal']}"})
        _fuzz(app.openapi(), url)  # and without one
    assert n == 1
    assert len(peer_setup.stored()) >= 5  # generated payloads reached the durable write


@pytest.mark.slow
def test_board_spec_never_5xx(tmp_path, serve) -> None:
    app = _board_without_limits(tmp_path)
    with serve(app) as url:
        n = _fuzz(app.openapi(), url)
        import httpx

        posts = httpx.get(f"{url}/api/agora").json()
    assert n == 5
    assert posts  # generated posts were accepted and listed, not only refused


# Raw JSON the spec's generator never writes: lone surrogates (as ``\ud800`` escapes), any
# nesting, integers past the digit limit, every field of every type.
_text = st.text(st.characters(exclude_categories=()), max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def _hostile_bodies(draw: st.DrawFn, fields: tuple[str, ...]) -> bytes:
    shape = draw(st.sampled_from(["fields", "nested", "bigint", "any"]))
    if shape == "nested":
        depth = draw(st.integers(min_value=900, max_value=3000))
        return b'{"' + fields[0].encode() + b'": ' + b"[" * depth + b"]" * depth + b"}"
    if shape == "bigint":
        digits = draw(st.integers(min_value=4000, max_value=6000))
        return b'{"' + fields[0].encode() + b'": ' + b"9" * digits + b"}"
    if shape == "any":
        return json.dumps(draw(_json)).encode()
    doc = {f: draw(_json | _text) for f in fields if draw(st.booleans()) or f == fields[0]}
    return json.dumps(doc).encode()  # ensure_ascii: a lone surrogate goes out as \udXXX


def _never_5xx(url: str, fields: tuple[str, ...], headers: dict[str, str]) -> None:
    with httpx.Client(headers={"content-type": "application/json", **headers}) as client:

        @given(raw=_hostile_bodies(fields))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(raw: bytes) -> None:
            r = client.post(url, content=raw)
            assert r.status_code < 500, (raw[:200], r.status_code, r.text)
            if r.status_code >= 400:
                assert isinstance(r.json()["error"], str)

        run()


@pytest.mark.slow
def test_peer_inbox_hostile_json_never_5xx(peer_setup, serve) -> None:
    from mailslot.web.peerapp import create_app

    app = create_app(peer_setup.settings(override_per_hour=100_000))
    with serve(app) as url:
        auth = {"Authorization": f"Bearer {peer_setup.tokens['tidal']}"}
        _never_5xx(f"{url}/inbox", ("body", "subject", "from"), auth)
    assert all(json.loads(p.read_text())["from"] == "tidal" for p in peer_setup.stored())


@pytest.mark.slow
def test_board_hostile_json_never_5xx(tmp_path, serve) -> None:
    app = _board_without_limits(tmp_path)
    with serve(app) as url:
        _never_5xx(f"{url}/api/agora", ("message", "agent", "link"), {})

"""Property tests from each app's OpenAPI spec (schemathesis) against a live server: whatever
a client sends, the answer is never a 5xx."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
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
    from mailslot.web.boardapp import create_app
    from mailslot.web.settings import BoardSettings

    app = create_app(
        BoardSettings(
            tmp_path / "agora.db",
            requests_per_minute=100_000,
            post_every_s=1,
            posts_per_day=100_000,
        )
    )
    with serve(app) as url:
        n = _fuzz(app.openapi(), url)
        import httpx

        posts = httpx.get(f"{url}/api/agora").json()
    assert n == 5
    assert posts  # generated posts were accepted and listed, not only refused

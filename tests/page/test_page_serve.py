"""``mailslot web`` as people run it: a real process that listens, serves every root, and stops
promptly on SIGTERM even with a live chat page open."""

from __future__ import annotations

import signal
import time

import httpx
from page_helpers import World, serve_command


def test_the_command_serves_and_stops_with_a_live_stream_open(world: World) -> None:
    with serve_command(world) as (proc, url):
        assert world.topics[0] in httpx.get(f"{url}/x/exchange").text
        with httpx.stream("GET", f"{url}/c/chats/{world.chat.name}/events", timeout=30) as r:
            assert r.status_code == 200
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
            assert time.monotonic() - started < 10

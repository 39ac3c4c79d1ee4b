"""``mailslot web`` as people run it: a real process that listens, serves every root, and stops
promptly on SIGTERM even with a live chat page open."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
from page_helpers import World


def test_the_command_serves_and_stops_with_a_live_stream_open(world: World) -> None:
    env = {**os.environ, "MAILSLOT_STATE_DIR": str(world.exchange.parent / "state")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "web", "--bind", "127.0.0.1:0"]
        + [a for root in world.roots for a in ("--root", str(root))]
        + ["--humans", str(world.humans_file)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", line)
        assert found, line
        url = found.group(1)
        assert world.topics[0] in httpx.get(f"{url}/x/exchange").text
        with httpx.stream("GET", f"{url}/c/chats/{world.chat.name}/events", timeout=30) as r:
            assert r.status_code == 200
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
            assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

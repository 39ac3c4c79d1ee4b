"""``peer_send`` end to end: an MCP server posts to a real ``mailslot peer serve`` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcphelp import call, server

from mailslot.web.auth import add_key, new_token

pytestmark = pytest.mark.slow


def test_peer_send_reaches_a_real_inbox_and_the_sender_is_the_token(tmp_path: Path) -> None:
    peers, inbox, keys = tmp_path / "peers.json", tmp_path / "inbox", tmp_path / "keys.json"
    token = new_token(peers, "tidal")  # the inbox's owner issued this token to tidal
    serve = ["peer", "serve", "--bind", "127.0.0.1:0", "--peers", str(peers), "--inbox", str(inbox)]
    p = subprocess.Popen(
        [sys.executable, "-m", "mailslot", *serve],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert p.stderr is not None
        line = p.stderr.readline()
        assert "listening on" in line, line
        add_key(keys, "beacon", line.split("listening on ", 1)[1].strip(), token)

        async def main() -> None:
            # the MCP agent calls itself 'mallory': the inbox still records the token's peer
            async with server("--as", "mallory", "--keys", str(keys)) as s:
                err, text = await call(
                    s, "peer_send", peer="beacon", body="draft in outbox/", subject="review"
                )
                assert not err and text.startswith("delivered to beacon: id "), text

        anyio.run(main)
    finally:
        p.terminate()
        p.wait(timeout=60)
    [stored] = [f for f in inbox.iterdir() if f.suffix == ".json"]
    doc = json.loads(stored.read_text())
    assert doc["from"] == "tidal" and doc["body"] == "draft in outbox/"
    assert doc["subject"] == "review"

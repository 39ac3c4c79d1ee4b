"""Search fixtures: real roots written by the channels' own functions.

``roots`` holds an exchange (claude and olu), a bus with a peer inbox beside it, and a directory
of chats, each with a few messages about a gate; every test gets its own state directory (the
autouse fixture in the top conftest), so each starts without an index.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from search_helpers import Roots

from mailslot import chat
from mailslot.bus import layout, log
from mailslot.exchange import send
from mailslot.exchange.create import create_exchange
from mailslot.web import peer


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    ex = create_exchange(tmp_path / "ex", ["claude", "olu"], humans=["ops:olu"], git=False)
    send(ex, "claude", "gate-bug", "required", "The gate rejects valid tokens since Tuesday.")
    send(ex, "olu", "gate-bug", "fyi", "Looking at the gate now.")
    send(ex, "olu", "lunch", "fyi", "Nothing to do with anything.")
    bus = tmp_path / "bus"
    layout.init(bus)
    log.append(bus, "beacon", "delivered the gate card to outbox/")
    (bus / "peer" / "inbox").mkdir(parents=True)
    peer.store(bus / "peer" / "inbox", "lantern", "gate question", "is the turnstile open?")
    chats = tmp_path / "chats"
    chats.mkdir()
    joined = chat.new_chat("deploy", chats, "alice", "the rollout waits on the gate", cwd=chats)
    chat.say(joined.path, "rollout tomorrow at nine", "alice")
    return Roots(ex, bus, chats, joined.path)

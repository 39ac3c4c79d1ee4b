"""What the relay's tests share: the lines of an inbox, a manager answering in a thread."""

from __future__ import annotations

import threading
from pathlib import Path

from mailslot import relay
from shared_helpers import in_thread


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def manager_answers(mb: Path, text: str) -> tuple[threading.Thread, dict]:
    """Serve one turn as the manager in a thread and reply ``text``; the box gets the turn id."""

    def serve_and_reply() -> str:
        turn = relay.serve(mb, "manager", timeout=30)
        relay.reply(mb, "manager", turn.id, text)
        return turn.id

    return in_thread(serve_and_reply)

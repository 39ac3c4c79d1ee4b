"""Chats, buses and peer inboxes as the page shows them, each read with its channel's own
functions (``chat.status``/``read``, ``bus.log.tail``, ``bus.tasks.list_tasks``,
``bus.outbox.list_items``, ``bus.owners.show``, ``web.peer.inbox_messages``). A source that
does not read is shown with the channel's error, never skipped silently."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailslot.core.errors import MailslotError

__all__ = [
    "BusView",
    "ChatCard",
    "board_summary",
    "bridge_summary",
    "bus_summary",
    "bus_view",
    "chats_of",
    "peer_summary",
]


@dataclass(frozen=True)
class ChatCard:
    """One chat in a listing: its file name, topic, who is present, whether it ended."""

    name: str
    topic: str | None
    present: list[str]
    messages: int
    ended: bool
    human_check: dict[str, Any] | None
    end_request: dict[str, Any] | None
    error: str | None = None


def chats_of(root: Path, most: int) -> list[ChatCard]:
    """The ``most`` newest chats in ``root`` with their status."""
    from mailslot.chat import list_chats, status

    out = []
    for name in list_chats(root)[:most]:
        try:
            st = status(root / name)
        except (MailslotError, OSError) as e:
            out.append(ChatCard(name, None, [], 0, False, None, None, str(e)))
            continue
        out.append(
            ChatCard(
                name,
                st.topic,
                st.present,
                st.messages,
                st.ended,
                st.human_check,
                st.end_request,
            )
        )
    return out


@dataclass(frozen=True)
class BusView:
    """A bus: the LOG tail, tasks per owner (open/done), the outbox queue, the charter."""

    log: list[Any]
    log_total: int
    tasks: dict[str, tuple[int, int]]
    task_list: list[Any]
    outbox: list[Any]
    charter: dict[str, Any] | None
    errors: list[str]


def bus_view(root: Path, log_lines: int, *, full: bool = True) -> BusView:
    """What the bus at ``root`` holds (``full``: the task list and the charter too)."""
    from mailslot.bus import log, outbox, owners, tasks

    errors: list[str] = []
    entries: list[Any] = []
    total = 0
    try:
        t = log.tail(root, log_lines)
        entries, total = t.entries, t.total
        if t.torn is not None:
            errors.append(f"LOG.md has a torn append set aside in {t.torn.path}")
    except MailslotError as e:
        errors.append(str(e))
    counts: dict[str, tuple[int, int]] = {}
    task_list: list[Any] = []
    try:
        task_list = tasks.list_tasks(root)
        for task in task_list:
            who = task.owner or "anyone"
            opened, done = counts.get(who, (0, 0))
            counts[who] = (opened + (not task.done), done + task.done)
    except MailslotError as e:
        errors.append(str(e))
    items: list[Any] = []
    try:
        items = outbox.list_items(root)
    except MailslotError as e:
        errors.append(str(e))
    charter = None
    if full:
        try:
            charter = owners.show(root)
        except MailslotError as e:
            errors.append(str(e))
    return BusView(entries, total, counts, task_list if full else [], items, charter, errors)


def bus_summary(root: Path, log_lines: int) -> BusView:
    """The overview's part of a bus: the LOG tail, task counts, the outbox queue."""
    return bus_view(root, log_lines, full=False)


def peer_summary(inbox: Path) -> dict[str, Any]:
    """The peer inbox's queue: waiting messages (newest few) and the processed count."""
    from mailslot.web.peer import inbox_messages

    waiting = inbox_messages(inbox)
    return {
        "waiting": len(waiting),
        "newest": list(reversed(waiting[-5:])),
        "processed": len(inbox_messages(inbox, processed=True)),
    }


def bridge_summary() -> dict[str, Any] | None:
    """The bridge's status (``bridge.status.read_status``) when this user has a bridge set up;
    None when there is none."""
    from mailslot.bridge.config import default_dir, load_config
    from mailslot.bridge.status import read_status

    directory = default_dir()
    if not directory.is_dir():
        return None
    try:
        return read_status(load_config(directory))
    except (MailslotError, OSError) as e:
        return {"error": str(e)}


def board_summary(db: Path) -> dict[str, Any]:
    """The board's queue (``web.board.Board``): its newest posts and how many of the last 200
    are hidden by moderation."""
    from mailslot.web.board import Board

    try:
        board = Board(db, create=False)
    except MailslotError as e:
        return {"error": str(e), "newest": [], "hidden": 0}
    try:
        recent = board.moderation_list(limit=200)
        return {
            "error": None,
            "newest": [p for p in recent if not p["hidden"]][:5],
            "hidden": sum(1 for p in recent if p["hidden"]),
        }
    finally:
        board.close()

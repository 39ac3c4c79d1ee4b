"""How chat's words are printed as text: a sender as one unambiguous token, and messages as
``--- name @ time ---`` lines over their bodies quoted (``cli.shown``), so nothing a participant
wrote can print a line that passes for one of ours. No click: ``chat wait`` prints with it from
``mailslot.cli.quick``."""

from __future__ import annotations

import re

from mailslot.cli.shown import quoted, shown_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["messages_text", "sender", "senders"]

_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def sender(name: str) -> str:
    """A sender as one unambiguous token: plain names as they are, anything else quoted."""
    if _PLAIN_NAME.fullmatch(name):
        return name
    return '"' + shown_line(name.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def senders(names: list[str]) -> str:
    """Senders, comma-separated, each as ``sender`` gives it."""
    return ", ".join(sender(n) for n in names)


def messages_text(messages: list[dict[str, Any]]) -> str:
    """Messages (``{"from", "time", "body"}``) as blocks: a header line, the body quoted."""
    blocks = [
        f"--- {sender(m['from'])} @ {shown_line(str(m['time']))} ---\n{quoted(m['body'])}"
        for m in messages
    ]
    return "\n\n".join(blocks)

"""The envelope every channel's message maps onto: a sender, a time, a body, and extras.

``sender`` is decided by the transport (the directory written, the token matched), never read
from the body (docs/design.md, principle 4). Channels keep their own on-disk shapes and convert.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time

__all__ = ["Message"]


@dataclass(frozen=True)
class Message:
    """One message: who (by transport), when (UTC), what, plus channel-specific fields."""

    sender: str
    at: datetime
    body: str
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: ``from``, ``at``, ``body``, ``path`` and the extras."""
        out: dict[str, Any] = {"from": self.sender, "at": format_time(self.at), "body": self.body}
        if self.path is not None:
            out["path"] = str(self.path)
        out.update({k: v for k, v in self.meta.items() if k not in out})
        return out

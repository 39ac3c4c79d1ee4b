"""A tool as the server sees it: name, description, input schema and the one channel call.

A handler receives the checked arguments and a ``Call`` (the server's config and a cancellation
flag) and returns a ``Reply``: short text for the model. It holds no logic of its own beyond
rendering; the operation is the channel function the CLI calls. A ``MailslotError`` raised by the
channel becomes an error result with its one-line message (see ``server``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mailslot.mcpserver.config import ServerConfig

__all__ = ["Call", "Reply", "ToolSpec", "obj", "prop"]


@dataclass
class Call:
    """One tool call: the checked arguments, the server's config, whether it was cancelled."""

    args: dict[str, Any]
    config: ServerConfig
    cancelled: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Reply:
    """What a tool returns: text for the model; ``error`` marks a refused call."""

    text: str
    error: bool = False


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its wire definition and its handler (run in a worker thread)."""

    name: str
    description: str
    schema: dict[str, Any]
    handler: Callable[[Call], Reply]
    read_only: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The ``tools/list`` entry (``name``, ``description``, ``inputSchema``, annotations)."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.schema,
        }
        if self.read_only:
            out["annotations"] = {"readOnlyHint": True}
        return out


def prop(kind: str, description: str = "", **rules: Any) -> dict[str, Any]:
    """One property of an input schema (``rules``: enum, minimum, maximum, default, ...)."""
    out: dict[str, Any] = {"type": kind}
    if description:
        out["description"] = description
    out.update(rules)
    return out


def obj(required: list[str] | None = None, **props: dict[str, Any]) -> dict[str, Any]:
    """An input schema: an object of ``props``, ``required`` names, nothing else allowed."""
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out

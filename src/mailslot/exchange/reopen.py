"""``reopen``: bring an archived topic back, with an account of why.

The recovery from a wrong archive, as one operation: move both sides back out of ``done/``
(``safe_move``: never over a live copy, never through a symlink), set the caller's side ``open``
(so the tick cannot re-archive it), and add an entry saying why -- otherwise the other side sees a
topic reappear with no account of it. If the caller may not move the other side's copy
(asymmetric modes), the next tick finds the topic half-archived and, since the caller's side is
open, brings the rest back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mailslot.core.errors import Conflict, InvalidValue, NotFound
from mailslot.core.limits import check_bytes
from mailslot.core.move import safe_move
from mailslot.exchange.entries import ACTIONS, MAX_BODY_BYTES, SendResult, send
from mailslot.exchange.layout import Exchange
from mailslot.exchange.state import StateResult, read_state, set_state
from mailslot.exchange.topics import find_topic, named_topic

__all__ = ["ReopenResult", "reopen"]


@dataclass(frozen=True)
class ReopenResult:
    """What reopen moved, the entry it wrote and the STATE it set."""

    topic: str
    moved: list[str]
    entry: SendResult
    state: StateResult
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "topic": self.topic,
            "moved": self.moved,
            "entry": self.entry.relpath,
            "status": self.state.state.status,
            "warnings": self.warnings,
        }


def reopen(ex: Exchange, agent: str, topic: str, why: str, *, action: str = "fyi") -> ReopenResult:
    """Reopen ``topic`` as ``agent`` with the reason ``why``; ``NotFound``/``Conflict``/...

    Refuses an empty reason, an unknown topic, a move onto an existing live copy, and a topic
    that is neither archived nor marked done by the caller (there is nothing to reopen).
    """
    side = ex.side_of(agent)
    if not why.strip():
        raise InvalidValue("say why the topic is reopened (--why TEXT)")
    if action not in ACTIONS:
        raise InvalidValue(f"action must be one of {', '.join(ACTIONS)}")
    check_bytes("reason", why, MAX_BODY_BYTES - 1024)
    topic = named_topic(ex, topic)
    ref = find_topic(ex, topic)
    if ref is None:
        raise NotFound(f"no topic {topic}", path=ex.root)
    if ref.duplicated:
        raise Conflict(f"topic {topic} is both live and archived on one side; settle it by hand")
    if not any(ref.archived.values()) and read_state(ex, topic, side).status != "done":
        raise Conflict(
            f"topic {topic} is not archived and your side is not done: nothing to reopen "
            "(to add to it: mailslot exchange send)"
        )
    moved, warnings = [], []
    own_inbox_side = ex.other(side)  # the copy in the caller's outbox
    for inbox_side in sorted(ref.dirs, key=lambda s: s != own_inbox_side):
        if not ref.archived[inbox_side]:
            continue
        src = ref.dirs[inbox_side]
        dst = ex.inbox(inbox_side) / topic
        try:
            safe_move(src, dst)  # never over a live copy made since, never through a symlink
        except PermissionError as e:
            if inbox_side == own_inbox_side:
                raise Conflict(f"cannot move {src} back: {e.strerror}") from None
            warnings.append(
                f"cannot move to-{inbox_side}/done/{topic} back ({e.strerror}); "
                "the next tick brings it back because your side is open"
            )
            continue
        moved.append(str(dst.relative_to(ex.root)))
    if own_inbox_side not in ref.dirs:
        ex.make_dir(ex.outbox(side) / topic, own_inbox_side)
    entry = send(ex, agent, topic, action, f"Reopened by {agent}: {why.strip()}\n")
    state = set_state(ex, agent, topic, "open")
    return ReopenResult(topic, moved, entry, state, warnings)

"""A chat file shared by sessions on several hosts: each host keeps its copy, the bridge carries
each message once.

Local writers keep the chat's own locking (``mkdir FILE.lock`` plus ``flock``), so bash agents on
any host join as on one host. The bridge tails its copy and publishes each whole block whose
sender's name is held by this host; it appends a peer's block verbatim under the same locks.

* A name is held by the host where it first spoke (joined). A peer's message under a name held
  by another host -- this one included -- is refused and reported, never appended; a local
  message under a name a peer holds is not sent.
* A block travels as ``ms.<host>.<chat>.c.<offset>``: its offset in the origin's copy, which
  only grows, so the subject is unique and republishing is idempotent.
* Exactly once: per origin, messages arrive in order, and the highest offset applied is kept. A
  bridge killed between its append and saving that offset finds the block already in the file
  (it searches from the end of its last recorded append) and does not append it again.

Every host ends with the same set of messages, each sender's in its order; the order between
senders may differ by host.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, NamedTuple

from mailslot.bridge.config import BridgedChat
from mailslot.core.errors import Conflict
from mailslot.core.fsio import atomic_write, read_from, read_regular

__all__ = ["ChatLink", "LocalMessage"]

MAX_CHAT_STATE_BYTES = 4 << 20


class LocalMessage(NamedTuple):
    """A whole block said on this host, not yet published."""

    offset: int
    end: int
    sender: str
    block: bytes


class ChatLink:
    """One bridged chat's carrying state: where the tail is, who holds which name."""

    def __init__(self, chat: BridgedChat, host: str, state_dir: Path) -> None:
        self.chat = chat
        self.host = host
        self.path = state_dir / f"chat-{chat.name}.json"
        self.tail = 0  # bytes of the local copy already looked at for local messages
        self.names: dict[str, str] = {}  # sender -> host that holds the name
        self.applied: dict[str, int] = {}  # origin host -> highest origin offset appended
        self.mark = 0  # the local copy's end after this bridge's last recorded append
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(read_regular(self.path, MAX_CHAT_STATE_BYTES))
        except (OSError, ValueError):
            return
        if isinstance(data, dict):
            self.tail = int(data.get("tail", 0))
            self.names = {str(k): str(v) for k, v in (data.get("names") or {}).items()}
            self.applied = {str(k): int(v) for k, v in (data.get("applied") or {}).items()}
            self.mark = int(data.get("mark", 0))

    def save(self) -> None:
        """Write the state (atomic, no fsync: a lost one re-finds blocks in the file)."""
        data: dict[str, Any] = {
            "tail": self.tail,
            "names": self.names,
            "applied": self.applied,
            "mark": self.mark,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, sort_keys=True), mode=0o600, durable=False)

    def local_messages(self) -> list[LocalMessage]:
        """Whole blocks said on this host since the tail (names claimed for this host)."""
        from mailslot.chat.format import parse_messages

        try:
            data = read_from(self.chat.path, self.tail)
        except Exception:
            return []
        messages, _ = parse_messages(data, self.tail)
        out = []
        for m in messages:
            holder = self.names.setdefault(m.sender, self.host)
            if holder == self.host:
                block = data[m.offset - self.tail : m.end - self.tail]
                out.append(LocalMessage(m.offset, m.end, m.sender, block))
        return out

    def advance(self, end: int) -> None:
        """Everything before ``end`` was looked at (and published where it was ours)."""
        self.tail = max(self.tail, end)

    def check_sender(self, origin: str, block: bytes) -> str:
        """The sender of ``block`` from ``origin``; ``Conflict`` when another host holds it."""
        from mailslot.chat.format import parse_messages

        messages, _ = parse_messages(block)
        sender = messages[0].sender if messages else ""
        holder = self.names.get(sender)
        if holder is not None and holder != origin:
            raise Conflict(
                f"chat {self.chat.name!r}: host {origin!r} sent as {sender!r}, a name held by "
                f"host {holder!r}"
            )
        return sender

    def apply(self, origin: str, offset: int, block: bytes) -> bool:
        """Append ``block`` said at ``offset`` on ``origin``, once; whether it was appended.
        ``Conflict`` for a name another host holds, ``FormatError`` for a malformed block."""
        from mailslot.chat import append_verbatim

        if offset <= self.applied.get(origin, -1):
            return False
        sender = self.check_sender(origin, block)
        if sender not in self.names:
            self.names[sender] = origin
            self.save()  # held before it shows: our tailer must never take it for ours
        already = False
        with contextlib.suppress(Exception):
            already = block in read_from(self.chat.path, self.mark)
        if not already:
            _, end = append_verbatim(self.chat.path, block)
            self.mark = end
        self.applied[origin] = offset
        self.save()
        return not already

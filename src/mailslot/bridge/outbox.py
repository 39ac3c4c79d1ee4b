"""What this host publishes: the files its own sides wrote, read whole and bounded.

A host publishes only from the folders its own sides write (``to-<other>/`` for every side it
hosts), so a file the bridge materialised from a peer -- which lives in a folder a remote side
writes -- is never sent back. Within those folders it sends entry files (``NNNN-<from>.md`` whose
sender is a member of the writing side) and STATE.md; dot-names (writers' temps) and anything
else are not traffic. Whether a file is whole yet is the publisher's to decide before it reads
it here (``core.wait.settled``), so a hand writer's half-written entry never becomes the
write-once message.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from mailslot.bridge.config import BridgeConfig, BridgedExchange
from mailslot.bridge.ledger import Ledger
from mailslot.bridge.wire import (
    KIND_ENTRY,
    KIND_STATE,
    MAX_PAYLOAD_BYTES,
    entry_subject,
    state_subject,
)
from mailslot.core.fsio import read_regular
from mailslot.core.names import TOPIC_RE

__all__ = ["Outgoing", "local_inboxes", "placement", "read_outgoing", "scan_names"]

_ENTRY_NAME_LEN = 4 + 1 + 40 + 3


class Outgoing(NamedTuple):
    """One local file version, ready to publish."""

    kind: str
    subject: str
    key: str  # "<exchange>/<relpath>": the ledger's and the sent-cache's key
    path: Path
    data: bytes
    sha: str
    rev: int


def local_inboxes(config: BridgeConfig, ex: BridgedExchange) -> list[tuple[str, str, Path]]:
    """``(writer side, inbox side, to-<inbox> directory)`` for every side this host hosts."""
    out = []
    for side in ex.sides_of(config.host):
        inbox = next(s for s in ex.hosts if s != side)
        out.append((side, inbox, ex.root / f"to-{inbox}"))
    return out


def _entry_sender(name: str) -> str | None:
    from mailslot.exchange.entries import ENTRY_RE

    if len(name) > _ENTRY_NAME_LEN:
        return None
    m = ENTRY_RE.match(name)
    return m.group(2) if m else None


def scan_names(inbox_dir: Path) -> Iterator[tuple[str, str]]:
    """``(topic, file name)`` of every candidate file in the live topics of ``inbox_dir``."""
    try:
        topics = os.listdir(inbox_dir)
    except OSError:
        return
    for topic in sorted(topics):
        if not TOPIC_RE.fullmatch(topic):
            continue
        try:
            names = os.listdir(inbox_dir / topic)
        except OSError:
            continue
        for name in sorted(names):
            if not name.startswith("."):
                yield topic, name


def read_outgoing(
    config: BridgeConfig,
    ex: BridgedExchange,
    members: dict[str, str],
    writer: str,
    inbox: str,
    topic: str,
    name: str,
    ledger: Ledger,
) -> Outgoing | None:
    """The message for ``to-<inbox>/<topic>/<name>``, or ``None`` when it is no traffic, is
    unchanged since sent (STATE.md), or cannot be read (``OSError`` for a file over the payload
    limit, so the caller can report it)."""
    if not TOPIC_RE.fullmatch(topic):
        return None
    if name == "STATE.md":
        kind = KIND_STATE
    else:
        sender = _entry_sender(name)
        if sender is None or members.get(sender) != writer:
            return None
        kind = KIND_ENTRY
    path = ex.root / f"to-{inbox}" / topic / name
    try:
        data = read_regular(path, MAX_PAYLOAD_BYTES)
    except FileNotFoundError:
        return None
    sha = hashlib.sha256(data).hexdigest()
    key = f"{ex.name}/to-{inbox}/{topic}/{name}"
    if kind == KIND_ENTRY:
        subject = entry_subject(config.host, ex.name, inbox, topic, name)
        return Outgoing(kind, subject, key, path, data, sha, 0)
    rev = ledger.next_revision(key, sha)
    if rev is None:
        return None
    return Outgoing(
        kind, state_subject(config.host, ex.name, inbox, topic, rev), key, path, data, sha, rev
    )


def placement(ex: BridgedExchange, topic: str) -> str | None:
    """Where ``topic`` is on this host: ``live`` (every copy live), ``done`` (every copy in
    ``done/``), or ``None`` (no copy, or half-archived: the tick settles that first)."""
    places = set()
    for side in ex.hosts:
        inbox = ex.root / f"to-{side}"
        if (inbox / topic).is_dir():
            places.add("live")
        if (inbox / "done" / topic).is_dir():
            places.add("done")
    return places.pop() if len(places) == 1 else None

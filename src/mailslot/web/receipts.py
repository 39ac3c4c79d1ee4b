"""Receipts for retried sends: a repeated ``Idempotency-Key`` gets the first answer, and the
message is stored once.

A sender whose connection breaks after the inbox stored its message but before the answer
arrived cannot tell "stored" from "lost", so it retries; without a key the retry stores the
message twice. ``peer send`` draws one key per message and sends it on every try.

Invariants:

* A key belongs to the peer whose token matched, never to the request: the same key from two
  peers is two keys (the receipt's name hashes the peer's name with the key).
* The same key with a different body is refused (``Conflict``), never answered with a receipt for
  a message the sender did not send this time.
* A receipt is written (fsync'd) *before* its message, naming the id the message will get, and
  it answers a retry only while that message exists (in the inbox or ``processed/``). A server
  killed between the two, or a disk full for the message, leaves a receipt whose message a
  retry stores under the promised id: a retry never stores a message twice, and is never told
  "stored" for a message that is not.
* Bounded in time and count: a receipt answers for ``RECEIPT_TTL_S`` and at most
  ``RECEIPTS_MAX`` are kept (oldest dropped first); each is a small file read with a byte cap.
* Durable: receipts live in ``INBOX/receipts/`` (beside ``processed/``, never listed as a
  message), so a retry across a server restart still gets the first answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mailslot.core.errors import Conflict, FormatError, MailslotError
from mailslot.core.fsio import atomic_write, read_regular, sweep_temps

__all__ = ["KEY_MAX", "RECEIPTS_MAX", "RECEIPT_TTL_S", "Receipts", "check_key"]

# A retry comes seconds to minutes after the first try; a day covers a sender that retries at
# its next waking, and no longer is needed.
RECEIPT_TTL_S = 24 * 3600
# 30 messages an hour for a handful of peers is a few thousand a day; past this, oldest go first.
RECEIPTS_MAX = 10_000
# Keys are opaque tokens (``peer send`` sends 22 characters); 200 leaves room for any scheme.
KEY_MAX = 200
_RECEIPT_BYTES = 4096
DIRNAME = "receipts"


def check_key(key: str) -> str:
    """``key`` if it is 1-200 visible ASCII characters; ``FormatError`` otherwise."""
    if not 1 <= len(key) <= KEY_MAX or not all("!" <= ch <= "~" for ch in key):
        raise FormatError(f"must be 1-{KEY_MAX} visible ASCII characters", field="Idempotency-Key")
    return key


class Receipts:
    """The receipts of one inbox; safe across threads (one server process owns them)."""

    def __init__(self, inbox: Path, *, ttl: float = RECEIPT_TTL_S, cap: int = RECEIPTS_MAX) -> None:
        self.directory = inbox / DIRNAME
        self.directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        sweep_temps(self.directory)  # a receipt half-written by a killed server
        self.ttl = ttl
        self.cap = cap
        self._cond = threading.Condition()
        self._busy: set[str] = set()
        known = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(".json") and not entry.name.startswith("."):
                with contextlib.suppress(OSError):
                    known.append((entry.stat().st_mtime, entry.name.removesuffix(".json")))
        self._known: OrderedDict[str, float] = OrderedDict((n, t) for t, n in sorted(known))
        with self._cond:
            self._trim()

    def name(self, peer: str, key: str) -> str:
        """The receipt's name for ``key`` sent by ``peer``."""
        return hashlib.sha256(f"{peer}\0{key}".encode()).hexdigest()[:40]

    @contextlib.contextmanager
    def claim(self, peer: str, key: str) -> Iterator[str]:
        """Hold ``key`` for ``peer`` while one request decides it (a concurrent retry waits)."""
        name = self.name(peer, key)
        with self._cond:
            while name in self._busy:
                self._cond.wait()
            self._busy.add(name)
        try:
            yield name
        finally:
            with self._cond:
                self._busy.discard(name)
                self._cond.notify_all()

    def get(self, name: str, body: bytes) -> dict[str, Any] | None:
        """The first answer for ``name``; None if there is none (or it expired); ``Conflict``
        when the key was first used for a different body."""
        with self._cond:
            at = self._known.get(name)
        if at is None or time.time() - at > self.ttl:
            return None
        try:
            doc = json.loads(read_regular(self.directory / f"{name}.json", _RECEIPT_BYTES))
            digest, answer = doc["body_sha256"], doc["answer"]
            if not all(isinstance(answer.get(k), str) for k in ("id", "from", "received_at")):
                return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # unreadable: treat as unseen (the safe direction is a second copy)
        if digest != hashlib.sha256(body).hexdigest():
            raise Conflict("this Idempotency-Key was used for a different message")
        return dict(answer)

    def put(self, name: str, body: bytes, answer: dict[str, Any]) -> None:
        """Remember ``answer`` for ``name`` (before its message is stored)."""
        record = {"body_sha256": hashlib.sha256(body).hexdigest(), "answer": answer}
        try:
            atomic_write(self.directory / f"{name}.json", json.dumps(record) + "\n", mode=0o640)
        except MailslotError:  # the message is stored; only a retry's dedup is lost
            return
        with self._cond:
            self._known[name] = time.time()
            self._known.move_to_end(name)
            self._trim()

    def _trim(self) -> None:
        """Drop receipts past their time or over the cap, oldest first (holding the lock)."""
        cutoff = time.time() - self.ttl
        while self._known:
            name, at = next(iter(self._known.items()))
            if at >= cutoff and len(self._known) <= self.cap:
                break
            del self._known[name]
            with contextlib.suppress(OSError):
                os.unlink(self.directory / f"{name}.json")

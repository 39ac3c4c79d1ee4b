"""Receiving: what peers sent, checked and written here before it is acknowledged.

A durable pull consumer on each ``MS_IN`` hands messages to ``check_incoming`` and
``materialise``; a message is acknowledged only once its file is on disk, so a bridge killed at
any moment loses nothing (the server redelivers) and duplicates nothing (materialising is
idempotent). The disk work runs in a worker thread, runs of entries and of arrival receipts each
in one go, so a burst arriving (a peer catching up) never holds up publishing what local agents
write meanwhile. What is refused is acknowledged (never to come again) and recorded as an alert;
what cannot be written here (a full disk) is left unacknowledged and retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mailslot.bridge.materialise import BATCHED_KINDS, Outcome, materialise, materialise_batch
from mailslot.bridge.publisher import Job, Part, Shared
from mailslot.bridge.streams import CONSUMER, RETRY_SECONDS, in_stream
from mailslot.bridge.wire import (
    KIND_ENTRY,
    KIND_PLACE,
    PLACE_DONE,
    ChatIncoming,
    Incoming,
    check_incoming,
)
from mailslot.core.clock import format_time
from mailslot.core.errors import LockBusy, MailslotError, NoSpace

__all__ = ["Receiver"]

log = logging.getLogger(__name__)

# The most messages materialised (and their syncs shared) in one go.
FETCH_BATCH = 256


def _batch_kind(item: Incoming | ChatIncoming | None) -> str | None:
    """The kind of ``item`` when runs of it are materialised together, else ``None``."""
    return item.kind if isinstance(item, Incoming) and item.kind in BATCHED_KINDS else None


class Receiver(Part):
    """This host's receiving from every peer; ``queue_receipt`` sends an arrival receipt."""

    def __init__(self, shared: Shared, queue_receipt: Callable[[Job], None]) -> None:
        super().__init__(shared)
        self.queue_receipt = queue_receipt
        self.members: dict[str, dict[str, str] | None] = {}
        self.last_heard: dict[str, str] = {}
        self.write_error: dict[str, str] | None = None  # what arrived cannot be written here

    def _check(self, peer: str, msg: Any) -> Incoming | ChatIncoming | None:
        """The checked message, or ``None`` when it is refused (recorded as an alert)."""
        try:
            return check_incoming(
                self.config, peer, msg.subject, msg.headers, msg.data, self.members
            )
        except MailslotError as e:
            log.warning("refused from %s: %s", peer, e)
            self.ledger.alert("refused", peer=peer, subject=msg.subject[:200], reason=str(e))
            return None

    async def _handle(self, peer: str, msg: Any, item: Incoming | ChatIncoming | None) -> None:
        if item is None:
            await msg.ack()
            return
        if isinstance(item, ChatIncoming):
            await self._handle_chat(peer, item, msg)
            return
        if item.kind == KIND_PLACE:  # set before the move: the publisher must not echo it
            place = "done" if item.data == PLACE_DONE else "live"
            if item.rev > self.ledger.received.get(item.key, 0):
                self.ledger.set_place(f"{item.exchange.name}/{item.topic}", place)
        # off the event loop, so publishing and the NATS connection go on while the disk syncs;
        # the revision it sets is merged back here, where the ledger is written from. A move
        # stays on the loop: the publisher, seeing the place set above but the folders not yet
        # moved, would take it for a local reopen and send one.
        revisions = {item.key: self.ledger.received.get(item.key, 0)}
        try:
            if item.kind == KIND_PLACE:
                outcome = materialise(item, revisions, self.exchanges)
            else:
                outcome = await asyncio.to_thread(materialise, item, revisions, self.exchanges)
        except (OSError, MailslotError) as e:
            log.warning("cannot write %s from %s (will retry): %s", item.relpath, peer, e)
            self._cannot_write(peer, e)
            await msg.nak(delay=RETRY_SECONDS)
            return
        self.ledger.received.update(revisions)
        await self._done(peer, msg, item, outcome)

    def _cannot_write(self, peer: str, error: Exception) -> None:
        """Remember that what ``peer`` sent cannot be written here (a full disk): it waits in
        the stream, is retried, and status says so until a write succeeds."""
        if self.write_error is None:
            self.write_error = {"since": format_time(), "peer": peer}
        self.write_error["reason"] = str(error)[:300]

    async def _done(self, peer: str, msg: Any, item: Incoming, outcome: Outcome) -> None:
        """Account for a materialised message, queue its receipt, acknowledge it."""
        self.write_error = None
        if outcome is Outcome.CONFLICT:
            log.error("conflict: %s from %s differs from the file here", item.relpath, peer)
            self.ledger.alert(
                "conflicts", peer=peer, exchange=item.exchange.name, path=str(item.relpath)
            )
        elif outcome is Outcome.WRITTEN:
            self.counts["materialised"] += 1
            if item.kind != KIND_ENTRY:
                self.ledger.touch()
        elif outcome is Outcome.SAME:
            self.counts["skipped_same"] += 1
        if (
            item.kind == KIND_ENTRY
            and outcome in (Outcome.WRITTEN, Outcome.SAME)
            and item.exchange.home != self.config.host
            and item.exchange.hosts.get(item.inbox) == self.config.host
        ):
            job = Job("receipt", item.exchange.name, item.inbox, item.topic, item.name)
            self.queue_receipt(job)
        self.last_heard[peer] = format_time()
        await msg.ack()

    async def _process(self, peer: str, msgs: list[Any]) -> None:
        """Materialise a fetched batch in order; runs of entries (and of receipts) share their
        writes and syncs, done off the event loop so publishing goes on meanwhile."""
        checked = [self._check(peer, m) for m in msgs]
        i = 0
        while i < len(msgs):
            kind = _batch_kind(checked[i])
            if kind is None:
                await self._handle(peer, msgs[i], checked[i])
                i += 1
                continue
            j = i + 1
            while j < len(msgs) and _batch_kind(checked[j]) == kind:
                j += 1
            run = [c for c in checked[i:j] if isinstance(c, Incoming)]
            try:
                outcomes = await asyncio.to_thread(materialise_batch, run, self.exchanges)
            except (OSError, MailslotError) as e:
                # one at a time, so what cannot be written here holds back only itself
                log.warning("cannot write %d messages from %s at once: %s", len(run), peer, e)
                for m, item in zip(msgs[i:j], run, strict=True):
                    await self._handle(peer, m, item)
            else:
                for m, item, outcome in zip(msgs[i:j], run, outcomes, strict=True):
                    await self._done(peer, m, item, outcome)
            i = j

    async def _handle_chat(self, peer: str, item: ChatIncoming, msg: Any) -> None:
        link = self.chats[item.chat.name]
        try:
            appended = link.apply(peer, item.offset, item.data)
        except (LockBusy, NoSpace, OSError) as e:
            log.warning("cannot append to chat %s (will retry): %s", item.chat.name, e)
            self._cannot_write(peer, e)
            await msg.nak(delay=RETRY_SECONDS)
            return
        except MailslotError as e:
            log.warning("refused from %s: %s", peer, e)
            self.ledger.alert("refused", peer=peer, subject=msg.subject[:200], reason=str(e))
            await msg.ack()
            return
        self.write_error = None
        self.counts["materialised" if appended else "skipped_same"] += 1
        self.last_heard[peer] = format_time()
        await msg.ack()

    async def run(self, peer: str) -> None:
        """Pull what ``peer`` sent from its in stream and materialise it, for ever."""
        sub = await self.js.pull_subscribe_bind(CONSUMER, in_stream(peer))
        while True:
            try:
                # one at a time while idle (a waiting multi-message fetch can stall in
                # nats-py), then whatever is waiting behind it in one batch
                msgs = await sub.fetch(1, timeout=1.0)
                pending = msgs[-1].metadata.num_pending if msgs else 0
                if pending:
                    msgs += await sub.fetch(min(pending, FETCH_BATCH), timeout=1.0)
            except TimeoutError:
                self.ledger.flush()
                continue
            except Exception as e:  # the local server restarting: try again
                log.debug("fetch from %s failed: %s", peer, e)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            await self._process(peer, msgs)
            self.ledger.flush()

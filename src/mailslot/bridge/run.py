"""The running bridge: publish what local sides wrote, materialise what peers wrote.

Streams on this host's JetStream (its own domain, named after the host)::

    MS_OUT_<host>    subjects ms.<host>.>   one message per subject, a second one refused
    MS_IN_<peer>     no subjects; sources MS_OUT_<peer> through $JS.<peer>.API

Retention never drops what a peer has not received: both streams are bounded in bytes
(``stream_max_bytes``) with the discard policy ``new``, so a full stream refuses what comes
next (the publish is retried, ``status`` and ``doctor`` say the stream is full) and a full
``MS_IN`` holds its source back. Neither is trimmed by the bridge: a purge of ``MS_OUT`` on
2.9.10 makes a peer's source skip messages when it resumes after a partition (measured), and
``MS_IN`` must keep its newest sourced message, from which a restarted server finds where its
source resumes (an emptied work queue falls back to resuming by time, which clock skew between
hosts turns into a loss).

Sources are store-and-forward: a host cut off from its peers keeps publishing into its own
``MS_OUT`` and a peer's ``MS_IN`` catches up when the link heals, in order per origin. A durable
pull consumer on each ``MS_IN`` hands messages to ``check_incoming`` and ``materialise``; a
message is acknowledged only once its file is on disk, so a bridge killed at any moment loses
nothing (the server redelivers) and duplicates nothing (materialising is idempotent). The disk
work runs in a worker thread, runs of entries and of arrival receipts each in one go, so a burst
arriving (a peer catching up) never holds up publishing what local agents write meanwhile.

Publishing is driven by kernel events on the outbox folders and backed by a full rescan at start
and every ``RECONCILE_SECONDS``: files are the truth, and republishing is idempotent by subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from mailslot.bridge.chatlink import ChatLink
from mailslot.bridge.config import BridgeConfig, BridgedExchange
from mailslot.bridge.ledger import Ledger
from mailslot.bridge.materialise import BATCHED_KINDS, Outcome, materialise, materialise_batch
from mailslot.bridge.outbox import placement, read_outgoing
from mailslot.bridge.wire import (
    HELD_NAME,
    INDEX_NAME,
    KIND_ENTRY,
    KIND_PLACE,
    KIND_STATE,
    MAX_PAYLOAD_BYTES,
    PLACE_DONE,
    PLACE_LIVE,
    ChatIncoming,
    Incoming,
    chat_subject,
    check_incoming,
    headers_for,
    held_subject,
    index_subject,
    place_subject,
    receipt_subject,
)
from mailslot.core.clock import format_time
from mailslot.core.errors import LockBusy, MailslotError, NoSpace
from mailslot.core.fsio import atomic_write, read_regular, sweep_temps
from mailslot.core.names import TOPIC_RE
from mailslot.core.wait import TOUCHED, WRITING, Change, Watch
from mailslot.exchange.entries import ENTRY_RE
from mailslot.exchange.layout import DONE, Exchange, load_exchange

__all__ = ["CONSUMER", "STATUS_NAME", "Bridge", "in_stream", "out_stream"]

log = logging.getLogger(__name__)

CONSUMER = "mailslot-bridge"
STATUS_NAME = "status.json"
# Files are the truth: a full rescan republishes whatever an event was missed for.
RECONCILE_SECONDS = 30.0
# Temps a bridge killed mid-write left where it materialises (folders only remote sides write)
# are removed at a reconcile once this old and unlocked; the home host's tick never runs here.
TEMP_SWEEP_SECONDS = 2 * RECONCILE_SECONDS
# How often status.json is rewritten (and how stale ``bridge status`` may be).
STATUS_SECONDS = 1.0
# A publish the local server does not answer within this is retried (idempotent by subject).
PUBLISH_TIMEOUT = 2.0
# Publishes in flight at once from one burst of changes (acks awaited together).
PUBLISH_WINDOW = 128
# The most messages materialised (and their syncs shared) in one go.
FETCH_BATCH = 256
# A message not acknowledged within this is redelivered: what a bridge killed mid-batch had
# fetched reaches its successor this long after. A redelivery to a bridge still writing it is
# harmless (materialising is idempotent), so short beats long.
ACK_WAIT_SECONDS = 5.0
# The retry pause after the local server failed a publish or a fetch.
RETRY_SECONDS = 0.5
# NATS error code of a publish refused by a stream limit: the subject holds its one message
# already (an entry sent before: stored), or the stream is full (not stored: retried).
ERR_STREAM_LIMIT = 10077
PER_SUBJECT_LIMIT = "per subject"
# A stream with less room left than the largest message it may carry is full.
FULL_MARGIN_BYTES = MAX_PAYLOAD_BYTES + 1024
# How long entries wait in a stream: far beyond any partition worth riding out.
STREAM_MAX_AGE_SECONDS = 365 * 24 * 3600


class Job(NamedTuple):
    """One thing to publish: a file (``file``), a topic's place (``place``), INDEX.md
    (``index``) or an arrival receipt (``receipt``). Retried until the local server takes it."""

    kind: str
    exchange: str
    inbox: str = ""
    topic: str = ""
    name: str = ""


class Spot(NamedTuple):
    """What a watched folder is: an exchange ``root``, an ``inbox`` (``to-<side>``), its
    ``done`` folder, or a live ``topic``."""

    exchange: BridgedExchange | None  # None for a folder of bridged chats
    role: str
    inbox: str
    topic: str


def _names(directory: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory) if not n.startswith("."))
    except OSError:
        return []


def _topics(directory: Path) -> list[str]:
    return [n for n in _names(directory) if TOPIC_RE.fullmatch(n)]


def _live(inbox_dir: Path) -> Iterator[tuple[str, list[str]]]:
    for topic in _topics(inbox_dir):
        yield topic, _names(inbox_dir / topic)


def _entry_name(name: str) -> bool:
    return ENTRY_RE.match(name) is not None


def _batch_kind(item: Incoming | ChatIncoming | None) -> str | None:
    """The kind of ``item`` when runs of it are materialised together, else ``None``."""
    return item.kind if isinstance(item, Incoming) and item.kind in BATCHED_KINDS else None


def out_stream(host: str) -> str:
    """The stream of what ``host``'s sides wrote."""
    return f"MS_OUT_{host}"


def in_stream(peer: str) -> str:
    """The stream on this host that sources ``peer``'s out stream."""
    return f"MS_IN_{peer}"


class Bridge:
    """One host's bridge over one NATS connection."""

    def __init__(self, config: BridgeConfig, url: str | None = None) -> None:
        self.config = config
        self.url = url or config.nats.client_url()
        self.ledger = Ledger.load(config.state_dir)
        self.exchanges: dict[str, Exchange] = {}
        self.members: dict[str, dict[str, str] | None] = {}
        self.sent_sig: dict[str, tuple[int, int, int]] = {}
        self.retry: set[Job] = set()
        self.receipts: list[Job] = []  # arrival receipts to send (from the receivers)
        self.receipted: set[str] = set()
        self._wake = asyncio.Event()
        self.chats = {c.name: ChatLink(c, config.host, config.state_dir) for c in config.chats}
        self.counts: dict[str, int] = {"published": 0, "materialised": 0, "skipped_same": 0}
        self.last_heard: dict[str, str] = {}
        self.started_at = format_time()
        self.connected = False
        self.full_since: str | None = None  # when the out stream last refused a publish as full
        self.write_error: dict[str, str] | None = None  # what arrived cannot be written here
        self._js: Any = None
        self._nc: Any = None

    # -- set-up ------------------------------------------------------------------------
    async def _connect(self) -> None:
        import nats

        n = self.config.nats

        async def _disconnected() -> None:
            self.connected = False

        async def _reconnected() -> None:
            self.connected = True

        opts: dict[str, Any] = {}
        if n.user and n.password:
            opts.update(user=n.user, password=n.password)
        self._nc = await nats.connect(
            self.url,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.2,
            connect_timeout=2,
            disconnected_cb=_disconnected,
            reconnected_cb=_reconnected,
            **opts,
        )
        self.connected = True
        self._js = self._nc.jetstream()

    async def _put_stream(self, cfg: Any) -> None:
        from nats.js.errors import BadRequestError

        try:
            await self._js.add_stream(cfg)
        except BadRequestError as e:
            if getattr(e, "err_code", None) != 10058:  # in use with another config
                raise
            try:
                await self._js.update_stream(cfg)
            except BadRequestError as e:  # a change the server cannot make in place
                log.warning("stream %s keeps its old settings: %s", cfg.name, e)

    async def _ensure_streams(self) -> None:
        from nats.js.api import (
            AckPolicy,
            ConsumerConfig,
            DiscardPolicy,
            ExternalStream,
            StreamConfig,
            StreamSource,
        )

        host = self.config.host
        max_bytes = self.config.nats.stream_max_bytes
        await self._put_stream(
            StreamConfig(
                name=out_stream(host),
                subjects=[f"ms.{host}.>"],
                max_msgs_per_subject=1,
                max_bytes=max_bytes,
                discard=DiscardPolicy.NEW,
                discard_new_per_subject=True,
                max_age=STREAM_MAX_AGE_SECONDS,
                duplicate_window=120,
            )
        )
        for peer in self.config.peers:
            source = StreamSource(
                name=out_stream(peer),
                filter_subject=f"ms.{peer}.>",
                external=ExternalStream(api=f"$JS.{peer}.API"),
            )
            await self._put_stream(
                StreamConfig(
                    name=in_stream(peer),
                    sources=[source],
                    max_bytes=max_bytes,
                    discard=DiscardPolicy.NEW,
                    max_age=STREAM_MAX_AGE_SECONDS,
                )
            )
            await self._js.add_consumer(
                in_stream(peer),
                ConsumerConfig(
                    durable_name=CONSUMER,
                    ack_policy=AckPolicy.EXPLICIT,
                    ack_wait=ACK_WAIT_SECONDS,
                    max_ack_pending=1024,
                ),
            )

    # -- publishing --------------------------------------------------------------------
    def _members(self, ex: BridgedExchange) -> dict[str, str]:
        if ex.name not in self.exchanges:
            self.exchanges[ex.name] = load_exchange(ex.root)
        local = self.exchanges[ex.name]
        members = {s: s for s in local.sides}
        members.update(local.humans)
        return members

    async def _publish(self, subject: str, data: bytes, *, delete: bool = False) -> bool:
        """Publish into this host's out stream; whether it is stored (now or before)."""
        from nats.js.errors import APIError

        try:
            await self._js.publish(
                subject,
                data,
                timeout=PUBLISH_TIMEOUT,
                headers=headers_for(subject, data, delete=delete),
            )
        except APIError as e:
            stored = getattr(e, "err_code", None) == ERR_STREAM_LIMIT and PER_SUBJECT_LIMIT in str(
                getattr(e, "description", "")
            )
            if not stored:
                if getattr(e, "err_code", None) == ERR_STREAM_LIMIT and self.full_since is None:
                    self.full_since = format_time()
                log.warning("publishing %s failed: %s", subject, e)
                return False
        except Exception as e:  # a timeout, or the local server restarting
            log.warning("publishing %s failed: %s", subject, e)
            return False
        self.full_since = None
        self.counts["published"] += 1
        return True

    async def _send_file(self, ex: BridgedExchange, inbox: str, topic: str, name: str) -> bool:
        """Publish ``to-<inbox>/<topic>/<name>`` if it is this host's to send; ``False`` when
        a publish failed (the caller retries)."""
        if name == HELD_NAME:
            return ex.home != self.config.host or await self._send_rev(
                ex, ex.root / f"to-{inbox}" / topic / HELD_NAME, "held", inbox, topic
            )
        writer = next(s for s in ex.hosts if s != inbox)
        if ex.hosts[writer] != self.config.host:
            return True
        path = ex.root / f"to-{inbox}" / topic / name
        key = f"{ex.name}/to-{inbox}/{topic}/{name}"
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            self.sent_sig.pop(key, None)
            return True
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self.sent_sig.get(key) == sig:
            return True
        try:
            out = read_outgoing(
                self.config, ex, self._members(ex), writer, inbox, topic, name, self.ledger
            )
        except OSError as e:
            log.warning("not sending %s: %s", path, e)
            return True
        if out is None:
            return True
        if not await self._publish(out.subject, out.data):
            return False
        if out.kind == KIND_STATE:
            self.ledger.mark_sent(out.key, out.sha, out.rev)
        self.sent_sig[key] = sig
        return True

    async def _send_rev(
        self, ex: BridgedExchange, path: Path, what: str, inbox: str = "", topic: str = ""
    ) -> bool:
        """Publish the home tick's HELD.md or INDEX.md at ``path`` as a new revision when it
        changed since last sent, or its removal; ``False`` when the publish failed."""
        key = f"{ex.name}/{path.relative_to(ex.root)}"
        try:
            data: bytes | None = read_regular(path, MAX_PAYLOAD_BYTES)
        except FileNotFoundError:
            data = None
        except OSError as e:
            log.warning("not sending %s: %s", path, e)
            return True
        if data is None and key not in self.ledger.sent:
            return True  # never sent: nothing to remove anywhere
        sha = hashlib.sha256(data).hexdigest() if data is not None else "-"
        rev = self.ledger.next_revision(key, sha)
        if rev is None:
            return True
        if what == "held":
            subject = held_subject(self.config.host, ex.name, inbox, topic, rev)
        else:
            subject = index_subject(self.config.host, ex.name, rev)
        if not await self._publish(subject, data or b"", delete=data is None):
            return False
        self.ledger.mark_sent(key, sha, rev)
        return True

    async def _check_place(self, ex: BridgedExchange, topic: str) -> bool:
        """Publish an archive (home) or a reopen (any host whose side reopened it) of ``topic``
        when its place changed here; ``False`` when the publish failed."""
        place = placement(ex, topic)
        key = f"{ex.name}/{topic}"
        old = self.ledger.places.get(key)
        if place is None or place == old:
            return True
        if old is not None and (ex.home == self.config.host or place == "live"):
            data = PLACE_DONE if place == "done" else PLACE_LIVE
            rev = max(time.time_ns(), self.ledger.place_rev + 1)
            if not await self._publish(place_subject(self.config.host, ex.name, topic, rev), data):
                return False
            self.ledger.place_rev = rev
        self.ledger.set_place(key, place)
        return True

    async def _send_receipt(self, ex: BridgedExchange, inbox: str, topic: str, name: str) -> bool:
        """Tell the home host when an entry reached this host, its reader's."""
        key = f"{ex.name}/to-{inbox}/{topic}/{name}"
        if key in self.receipted:
            return True
        try:
            ns = os.stat(ex.root / f"to-{inbox}" / topic / name, follow_symlinks=False).st_ctime_ns
        except OSError:
            return True
        subject = receipt_subject(self.config.host, ex.name, inbox, topic, name)
        if not await self._publish(subject, str(ns).encode()):
            return False
        self.receipted.add(key)
        return True

    async def _send_chat(self, link: ChatLink) -> bool:
        """Publish the blocks said on this host since the tail; ``False`` if one failed."""
        for m in link.local_messages():
            subject = chat_subject(self.config.host, link.chat.name, m.offset)
            if not await self._publish(subject, m.block):
                return False
            link.advance(m.end)
        link.save()
        return True

    async def _do(self, job: Job) -> None:
        if job.kind == "chat":
            ok = await self._send_chat(self.chats[job.exchange])
            if ok:
                self.retry.discard(job)
            else:
                self.retry.add(job)
            return
        ex = self.config.exchange(job.exchange)
        if job.kind == "file":
            ok = await self._send_file(ex, job.inbox, job.topic, job.name)
        elif job.kind == "place":
            ok = await self._check_place(ex, job.topic)
        elif job.kind == "index":
            ok = ex.home != self.config.host or await self._send_rev(ex, ex.root / INDEX_NAME, "i")
        else:
            ok = await self._send_receipt(ex, job.inbox, job.topic, job.name)
        if ok:
            self.retry.discard(job)
        else:
            self.retry.add(job)

    def _spots(self, ex: BridgedExchange) -> Iterator[tuple[Path, Spot]]:
        yield ex.root, Spot(ex, "root", "", "")
        for side in sorted(ex.hosts):
            inbox = ex.root / f"to-{side}"
            yield inbox, Spot(ex, "inbox", side, "")
            yield inbox / DONE, Spot(ex, "done", side, "")

    def _scan_all(self, watch: Watch, where: dict[Path, Spot], jobs: list[Job]) -> None:
        """Queue everything this host should have published (idempotent); watch every folder."""
        for ex in self.config.exchanges:
            receipts = ex.home != self.config.host
            for directory, spot in self._spots(ex):
                where[directory] = spot
                if not watch.watching(directory):
                    watch.add(directory)
            for side in sorted(ex.hosts):
                inbox_dir = ex.root / f"to-{side}"
                writer = next(s for s in ex.hosts if s != side)
                local_reader = ex.hosts[side] == self.config.host != ex.hosts[writer]
                for topic in _topics(inbox_dir / DONE):
                    jobs.append(Job("place", ex.name, "", topic))
                for topic, names in _live(inbox_dir):
                    topic_dir = inbox_dir / topic
                    where[topic_dir] = Spot(ex, "topic", side, topic)
                    if not watch.watching(topic_dir):
                        watch.add(topic_dir)
                    jobs.append(Job("place", ex.name, "", topic))
                    if ex.hosts[writer] != self.config.host:
                        with contextlib.suppress(OSError):
                            sweep_temps(topic_dir, TEMP_SWEEP_SECONDS)
                    for name in names:
                        jobs.append(Job("file", ex.name, side, topic, name))
                        if receipts and local_reader and _entry_name(name):
                            jobs.append(Job("receipt", ex.name, side, topic, name))
            jobs.append(Job("index", ex.name))
        for link in self.chats.values():
            parent = link.chat.path.parent
            where.setdefault(parent, Spot(None, "chats", "", ""))
            if not watch.watching(parent):
                watch.add(parent)
            jobs.append(Job("chat", link.chat.name))

    def _on_change(
        self, watch: Watch, where: dict[Path, Spot], change: Change, jobs: list[Job]
    ) -> None:
        """Queue what ``change`` means to publish."""
        spot = where.get(change.directory)
        if spot is None:
            return
        if spot.role == "chats" or spot.exchange is None:
            for link in self.chats.values():
                if link.chat.path == change.directory / change.name:
                    jobs.append(Job("chat", link.chat.name))
            return
        ex = spot.exchange
        if spot.role == "root":
            if change.name == INDEX_NAME:
                jobs.append(Job("index", ex.name))
        elif spot.role in ("inbox", "done"):
            if spot.role == "inbox" and change.is_dir and not change.gone:
                topic_dir = change.directory / change.name
                if TOPIC_RE.fullmatch(change.name):
                    where[topic_dir] = Spot(ex, "topic", spot.inbox, change.name)
                    watch.add(topic_dir)
                    for name in _names(topic_dir):
                        jobs.append(Job("file", ex.name, spot.inbox, change.name, name))
            if TOPIC_RE.fullmatch(change.name):
                jobs.append(Job("place", ex.name, "", change.name))
        elif not change.name.startswith("."):
            jobs.append(Job("file", ex.name, spot.inbox, spot.topic, change.name))

    async def _run(self, jobs: list[Job]) -> None:
        """Do ``jobs`` in order, up to ``PUBLISH_WINDOW`` publishes in flight at once (each
        job's publish is sent before the next job starts, so per-origin order holds)."""
        for i in range(0, len(jobs), PUBLISH_WINDOW):
            await asyncio.gather(*(self._do(j) for j in jobs[i : i + PUBLISH_WINDOW]))

    async def _publisher(self) -> None:
        watch = Watch()
        loop = asyncio.get_running_loop()
        events = watch.fileno()  # None: no names from the kernel, a rescan on the timer
        if events is not None:
            loop.add_reader(events, self._wake.set)
        where: dict[Path, Spot] = {}
        try:
            jobs: list[Job] = []
            self._scan_all(watch, where, jobs)
            await self._run(jobs)
            next_reconcile = time.monotonic() + RECONCILE_SECONDS
            while True:
                timeout = max(0.0, next_reconcile - time.monotonic())
                if self.retry:
                    timeout = min(timeout, RETRY_SECONDS)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                self._wake.clear()
                jobs = []
                changed = watch.take_changes() if events is not None else {}
                for names in (changed or {}).values():
                    for change in (names or {}).values():
                        if change.state not in (WRITING, TOUCHED):  # not done, or no content
                            self._on_change(watch, where, change, jobs)
                jobs += self.receipts
                self.receipts = []
                jobs += sorted(self.retry - set(jobs))
                if changed is None or time.monotonic() >= next_reconcile:  # events were lost
                    self._scan_all(watch, where, jobs)
                    next_reconcile = time.monotonic() + RECONCILE_SECONDS
                await self._run(jobs)
                self.ledger.flush()
        finally:
            if events is not None:
                loop.remove_reader(events)
            watch.close()

    # -- receiving ---------------------------------------------------------------------
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
        # the revision it sets is merged back here, where the ledger is written from
        revisions = {item.key: self.ledger.received.get(item.key, 0)}
        try:
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
            self.receipts.append(job)
            self._wake.set()
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

    async def _receiver(self, peer: str) -> None:
        sub = await self._js.pull_subscribe_bind(CONSUMER, in_stream(peer))
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

    # -- status ------------------------------------------------------------------------
    async def _peer_status(self, peer: str) -> dict[str, Any]:
        info: dict[str, Any] = {"last_heard": self.last_heard.get(peer)}
        try:
            si = await self._js.stream_info(in_stream(peer))
            src = (si.sources or [None])[0]
            if src is not None:
                active_ns = src.active if src.active is not None else -1
                info["lag_in"] = src.lag
                info["active_ms_ago"] = None if active_ns < 0 else active_ns // 1_000_000
            ci = await self._js.consumer_info(in_stream(peer), CONSUMER)
            info["pending_in"] = (ci.num_pending or 0) + (ci.num_ack_pending or 0)
        except Exception as e:
            info["error"] = str(e)
        try:
            peer_js = self._nc.jetstream(domain=peer, timeout=0.5)
            psi = await peer_js.stream_info(in_stream(self.config.host))
            ours = await self._js.stream_info(out_stream(self.config.host))
            psrc = (psi.sources or [None])[0]
            info["pending_out"] = psrc.lag if psrc is not None else None
            info["link"] = "up"
            info["out_last_seq"] = ours.state.last_seq
        except Exception:
            info["link"] = "down"
        return info

    async def _stream_status(self) -> dict[str, dict[str, Any]]:
        """Each of this host's streams: messages, bytes, its byte limit, and ``full`` (it
        refuses what comes next: a publish here, the peer's source there)."""
        out: dict[str, dict[str, Any]] = {}
        names = [out_stream(self.config.host), *(in_stream(p) for p in self.config.peers)]
        for name in names:
            try:
                si = await self._js.stream_info(name)
            except Exception as e:
                out[name] = {"error": str(e)}
                continue
            limit = si.config.max_bytes or -1
            used = si.state.bytes
            out[name] = {
                "messages": si.state.messages,
                "bytes": used,
                "max_bytes": limit,
                "full": limit > 0 and used + FULL_MARGIN_BYTES >= limit,
            }
        if self.full_since is not None:
            out[names[0]]["full"] = True
            out[names[0]]["full_since"] = self.full_since
        return out

    async def status(self) -> dict[str, Any]:
        """What ``bridge status`` shows."""
        peers = {p: await self._peer_status(p) for p in self.config.peers}
        return {
            "streams": await self._stream_status(),
            "write_error": self.write_error,
            "host": self.config.host,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "updated_at": format_time(),
            "connected": self.connected,
            "peers": peers,
            "counts": dict(self.counts),
            "pending_publish": len(self.retry),
            "conflicts": self.ledger.totals.get("conflicts", 0),
            "refused": self.ledger.totals.get("refused", 0),
            "recent_conflicts": self.ledger.conflicts[-10:],
            "recent_refused": self.ledger.refused[-10:],
        }

    async def _status_writer(self, extra: dict[str, Any]) -> None:
        path = self.config.state_dir / STATUS_NAME
        while True:
            data = await self.status()
            data.update(extra)
            atomic_write(path, json.dumps(data, indent=1), mode=0o644, durable=False)
            await asyncio.sleep(STATUS_SECONDS)

    # -- the whole -----------------------------------------------------------------------
    async def run(self, stop: asyncio.Event, extra_status: dict[str, Any] | None = None) -> None:
        """Run until ``stop`` is set."""
        self.config.state_dir.mkdir(parents=True, exist_ok=True)
        await self._connect()
        try:
            await self._ensure_streams()
            tasks: list[asyncio.Task[None]] = [
                asyncio.create_task(self._publisher(), name="publisher"),
                asyncio.create_task(self._status_writer(extra_status or {}), name="status"),
            ]
            tasks += [
                asyncio.create_task(self._receiver(p), name=f"receive-{p}")
                for p in self.config.peers
            ]
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception()]
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
        finally:
            self.ledger.flush(force=True)
            with contextlib.suppress(Exception):
                await self._nc.close()

"""Publishing: what this host's sides wrote goes into its out stream, once.

Publishing is driven by kernel events on the outbox folders and backed by a full rescan at start
and every ``RECONCILE_SECONDS``: files are the truth, and republishing is idempotent by subject
(an entry's subject holds one message, so a second publish is refused as stored already). Jobs
that failed (the local server down or its stream full) are retried every ``RETRY_SECONDS``.

A file is sent only once whole, by the rule ``exchange watch`` reads hand-written entries by
(``core.wait.settled``, fed the last event on each name): one its writer still holds open is
looked at again when it closes or when the bound says. An entry is write-once: the digest it was
published with is kept in the ledger, and an entry whose bytes here change afterwards (a writer
killed part-way that wrote it again, an edit) is a conflict on this host -- logged, counted in
``status``, failed by ``doctor`` while it lasts -- and its new bytes are sent as a version the
peers keep beside theirs as ``.conflict`` (a conflict there too): never an overwrite, never a
silent difference.
Besides files: a topic's place (archived or live), the home tick's INDEX.md and HELD.md as
revisions, the blocks said in bridged chats, and the arrival receipts the receivers queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from mailslot.bridge.chatlink import ChatLink
from mailslot.bridge.config import BridgeConfig, BridgedExchange
from mailslot.bridge.ledger import Ledger
from mailslot.bridge.outbox import placement, read_outgoing
from mailslot.bridge.streams import RETRY_SECONDS, out_stream
from mailslot.bridge.wire import (
    HELD_NAME,
    INDEX_NAME,
    KIND_ENTRY,
    KIND_STATE,
    MAX_PAYLOAD_BYTES,
    PLACE_DONE,
    PLACE_LIVE,
    SHA_HEADER,
    chat_subject,
    headers_for,
    held_subject,
    index_subject,
    place_subject,
    receipt_subject,
    version_subject,
)
from mailslot.core.clock import format_time
from mailslot.core.fsio import read_regular, sweep_temps
from mailslot.core.names import TOPIC_RE
from mailslot.core.wait import APPEARED, CLOSED, GONE, TOUCHED, WRITING, Change, Watch, settled
from mailslot.exchange.entries import ENTRY_RE
from mailslot.exchange.layout import DONE, Exchange, load_exchange

__all__ = ["Job", "Part", "Publisher", "Shared"]

log = logging.getLogger(__name__)

# Files are the truth: a full rescan republishes whatever an event was missed for.
RECONCILE_SECONDS = 30.0
# Temps a bridge killed mid-write left where it materialises (folders only remote sides write)
# are removed at a reconcile once this old and unlocked; the home host's tick never runs here.
TEMP_SWEEP_SECONDS = 2 * RECONCILE_SECONDS
# A publish the local server does not answer within this is retried (idempotent by subject).
PUBLISH_TIMEOUT = 2.0
# Publishes in flight at once from one burst of changes (acks awaited together).
PUBLISH_WINDOW = 128
# NATS error code of a publish refused by a stream limit: the subject holds its one message
# already (an entry sent before: stored), or the stream is full (not stored: retried).
ERR_STREAM_LIMIT = 10077
PER_SUBJECT_LIMIT = "per subject"
# What ``_publish_as`` says of a publish the stream took: stored by it, or stored before it.
STORED = "stored"
STORED_BEFORE = "stored before"
# The last event on a name that says something about whether the file is whole.
_KEPT_STATES = (APPEARED, WRITING, CLOSED)
CHANGED_AFTER_SENT = (
    "changed here after it was published: the peers keep the published version and this one "
    "beside it as .conflict; put the published bytes back, and say anything new in a new entry"
)


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


class Shared(NamedTuple):
    """What the publisher and the receivers share."""

    config: BridgeConfig
    ledger: Ledger
    exchanges: dict[str, Exchange]  # loaded once, by name
    chats: dict[str, ChatLink]
    counts: dict[str, int]  # published, materialised, skipped_same


class Part:
    """A part of the running bridge: what it shares, and the JetStream context ``js`` (set
    once connected)."""

    def __init__(self, shared: Shared) -> None:
        self.config, self.ledger, self.exchanges, self.chats, self.counts = shared
        self.js: Any = None


class Publisher(Part):
    """This host's publishing."""

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self.sent_sig: dict[str, tuple[int, int, int]] = {}
        self.retry: set[Job] = set()
        self.receipts: list[Job] = []  # arrival receipts to send (from the receivers)
        self.receipted: set[str] = set()
        self.full_since: str | None = None  # when the out stream last refused a publish as full
        self.states: dict[str, str] = {}  # file path -> what its events said last, until sent
        self.deferred: dict[Job, float] = {}  # a file still being written -> monotonic recheck
        self._wake = asyncio.Event()

    def queue_receipt(self, job: Job) -> None:
        """Send an arrival receipt soon (the receivers call this once an entry is written)."""
        self.receipts.append(job)
        self._wake.set()

    def _members(self, ex: BridgedExchange) -> dict[str, str]:
        if ex.name not in self.exchanges:
            self.exchanges[ex.name] = load_exchange(ex.root)
        local = self.exchanges[ex.name]
        members = {s: s for s in local.sides}
        members.update(local.humans)
        return members

    async def _publish(self, subject: str, data: bytes, *, delete: bool = False) -> bool:
        """Publish into this host's out stream; whether it is stored (now or before)."""
        return await self._publish_as(subject, data, delete=delete) is not None

    async def _publish_as(self, subject: str, data: bytes, *, delete: bool = False) -> str | None:
        """Publish into this host's out stream: ``STORED``, ``STORED_BEFORE`` (its subject holds
        a message already), or ``None`` when it failed (retried)."""
        from nats.js.errors import APIError

        try:
            await self.js.publish(
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
                return None
            self.full_since = None
            return STORED_BEFORE
        except Exception as e:  # a timeout, or the local server restarting
            log.warning("publishing %s failed: %s", subject, e)
            return None
        self.full_since = None
        self.counts["published"] += 1
        return STORED

    async def _stored_sha(self, subject: str) -> str | None:
        """The digest of the message ``subject`` holds in this host's out stream (``None``
        when it cannot be read now)."""
        try:
            msg = await self.js.get_last_msg(out_stream(self.config.host), subject)
        except Exception as e:
            log.warning("reading back %s failed: %s", subject, e)
            return None
        return (msg.headers or {}).get(SHA_HEADER)

    def _diverged(self, ex: BridgedExchange, rel: str, key: str, first: str, now: str) -> None:
        """Entry ``key`` holds ``now`` here, not ``first`` as published: a conflict, once."""
        if self.ledger.diverge(key, now, exchange=ex.name, path=rel, published=first):
            log.error("conflict: %s/%s %s", ex.root, rel, CHANGED_AFTER_SENT)
            self.ledger.alert(
                "conflicts",
                peer=self.config.host,
                exchange=ex.name,
                path=rel,
                reason=CHANGED_AFTER_SENT,
            )

    def _whole(self, job: Job, path: Path, st: os.stat_result, state: str | None) -> bool:
        """Whether the file at ``path`` (``state``: what its events said last) may be sent as
        whole now (``core.wait.settled``); if not, ``job`` is done again when its writer is
        likely done (or on its next event)."""
        verdict = settled(path, st, state, time.time())
        if verdict.whole:
            self.deferred.pop(job, None)
            if verdict.note is not None:
                log.warning("sending %s as it stands: %s", path, verdict.note)
            return True
        again = time.monotonic() + max(0.0, (verdict.again or time.time()) - time.time())
        self.deferred[job] = min(self.deferred.get(job, again), again)
        return False

    async def _send_file(self, ex: BridgedExchange, inbox: str, topic: str, name: str) -> bool:
        """Publish ``to-<inbox>/<topic>/<name>`` if it is this host's to send; ``False`` when
        a publish failed (the caller retries)."""
        path = ex.root / f"to-{inbox}" / topic / name
        state = self.states.pop(str(path), None)  # kept only while the file is not whole
        if name == HELD_NAME:
            return ex.home != self.config.host or await self._send_rev(
                ex, ex.root / f"to-{inbox}" / topic / HELD_NAME, "held", inbox, topic
            )
        writer = next(s for s in ex.hosts if s != inbox)
        if ex.hosts[writer] != self.config.host:
            return True
        rel = f"to-{inbox}/{topic}/{name}"
        key = f"{ex.name}/{rel}"
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            self.sent_sig.pop(key, None)
            self.ledger.settle(key)  # gone from the live folders: archived, or removed
            return True
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self.sent_sig.get(key) == sig:
            return True
        if not self._whole(Job("file", ex.name, inbox, topic, name), path, st, state):
            if state is not None:
                self.states[str(path)] = state
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
        first = self.ledger.published.get(key) if out.kind == KIND_ENTRY else None
        if first is None:
            stored = await self._publish_as(out.subject, out.data)
            if stored is None:
                return False
            if out.kind == KIND_ENTRY:
                # published before this ledger knew it (a lost ledger): ask the stream
                first = await self._stored_sha(out.subject) if stored == STORED_BEFORE else out.sha
                if first is None:
                    return False
                self.ledger.mark_published(key, first)
        if out.kind == KIND_STATE:
            self.ledger.mark_sent(out.key, out.sha, out.rev)
        elif first is not None and first != out.sha:
            # the peers keep the published version; this one goes beside it as .conflict
            version = version_subject(self.config.host, ex.name, inbox, topic, name, out.sha)
            if not await self._publish(version, out.data):
                return False
            self._diverged(ex, rel, key, first, out.sha)
        else:
            self.ledger.settle(key)
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

    def _note(self, change: Change) -> None:
        """Keep what the events said last about a file (whether its writer is done)."""
        if change.is_dir:
            return
        path = str(change.directory / change.name)
        if change.state in _KEPT_STATES:
            self.states[path] = change.state
        elif change.state == GONE:
            self.states.pop(path, None)

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

    async def run(self) -> None:
        """Publish what changes, and everything at start and every ``RECONCILE_SECONDS``."""
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
                if self.deferred:
                    timeout = min(timeout, min(self.deferred.values()) - time.monotonic())
                timeout = max(0.0, timeout)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                self._wake.clear()
                jobs = []
                changed = watch.take_changes() if events is not None else {}
                for names in (changed or {}).values():
                    for change in (names or {}).values():
                        self._note(change)
                        if change.state != TOUCHED:  # attributes only: no content changed
                            self._on_change(watch, where, change, jobs)
                now = time.monotonic()
                due = [j for j, t in self.deferred.items() if t <= now]
                for j in due:
                    del self.deferred[j]
                jobs += due
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

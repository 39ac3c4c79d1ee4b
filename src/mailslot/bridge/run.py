"""The running bridge: publish what local sides wrote, materialise what peers wrote.

Streams on this host's JetStream (its own domain, named after the host)::

    MS_OUT_<host>    subjects ms.<host>.>   one message per subject, a second one refused
    MS_IN_<peer>     no subjects; sources MS_OUT_<peer> through $JS.<peer>.API

Sources are store-and-forward: a host cut off from its peers keeps publishing into its own
``MS_OUT`` and a peer's ``MS_IN`` catches up when the link heals, in order per origin. A durable
pull consumer on each ``MS_IN`` hands messages to ``check_incoming`` and ``materialise``; a
message is acknowledged only once its file is on disk, so a bridge killed at any moment loses
nothing (the server redelivers) and duplicates nothing (materialising is idempotent).

Publishing is driven by kernel events on the outbox folders and backed by a full rescan at start
and every ``RECONCILE_SECONDS``: files are the truth, and republishing is idempotent by subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from mailslot.bridge.config import BridgeConfig, BridgedExchange
from mailslot.bridge.ledger import Ledger
from mailslot.bridge.materialise import Outcome, materialise
from mailslot.bridge.outbox import Outgoing, local_inboxes, read_outgoing, scan_names
from mailslot.bridge.wire import KIND_STATE, check_incoming, headers_for
from mailslot.core.clock import format_time
from mailslot.core.dirwatch import DirWatch
from mailslot.core.errors import MailslotError
from mailslot.core.fsio import atomic_write
from mailslot.exchange.layout import Exchange, load_exchange

__all__ = ["CONSUMER", "STATUS_NAME", "Bridge", "in_stream", "out_stream"]

log = logging.getLogger(__name__)

CONSUMER = "mailslot-bridge"
STATUS_NAME = "status.json"
# Files are the truth: a full rescan republishes whatever an event was missed for.
RECONCILE_SECONDS = 30.0
# How often status.json is rewritten (and how stale ``bridge status`` may be).
STATUS_SECONDS = 1.0
# A publish the local server does not answer within this is retried (idempotent by subject).
PUBLISH_TIMEOUT = 2.0
# A message not acknowledged within this is redelivered (a bridge killed mid-write).
ACK_WAIT_SECONDS = 30.0
# The retry pause after the local server failed a publish or a fetch.
RETRY_SECONDS = 0.5
# NATS error code: the subject holds its one message already (an entry sent before).
ERR_SUBJECT_FULL = 10077
# How long entries wait in a stream: far beyond any partition worth riding out.
STREAM_MAX_AGE_SECONDS = 365 * 24 * 3600


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
        self.retry: set[tuple[str, str, str, str, str]] = set()
        self.counts: dict[str, int] = {"published": 0, "materialised": 0, "skipped_same": 0}
        self.last_heard: dict[str, str] = {}
        self.started_at = format_time()
        self.connected = False
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
            await self._js.update_stream(cfg)

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
        await self._put_stream(
            StreamConfig(
                name=out_stream(host),
                subjects=[f"ms.{host}.>"],
                max_msgs_per_subject=1,
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
                StreamConfig(name=in_stream(peer), sources=[source], max_age=STREAM_MAX_AGE_SECONDS)
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

    async def _publish(self, out: Outgoing) -> bool:
        from nats.js.errors import APIError

        try:
            await self._js.publish(
                out.subject,
                out.data,
                timeout=PUBLISH_TIMEOUT,
                headers=headers_for(out.subject, out.data),
            )
        except APIError as e:
            if getattr(e, "err_code", None) != ERR_SUBJECT_FULL:
                log.warning("publishing %s failed: %s", out.subject, e)
                return False
        except Exception as e:  # a timeout, or the local server restarting
            log.warning("publishing %s failed: %s", out.subject, e)
            return False
        if out.kind == KIND_STATE:
            self.ledger.mark_sent(out.key, out.sha, out.rev)
        self.counts["published"] += 1
        return True

    async def _send_one(
        self, ex: BridgedExchange, writer: str, inbox: str, topic: str, name: str
    ) -> None:
        path = ex.root / f"to-{inbox}" / topic / name
        key = f"{ex.name}/to-{inbox}/{topic}/{name}"
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            self.sent_sig.pop(key, None)
            return
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self.sent_sig.get(key) == sig:
            return
        try:
            out = read_outgoing(
                self.config, ex, self._members(ex), writer, inbox, topic, name, self.ledger
            )
        except OSError as e:
            log.warning("not sending %s: %s", path, e)
            return
        if out is None:
            return
        if await self._publish(out):
            self.sent_sig[key] = sig
            self.retry.discard((ex.name, writer, inbox, topic, name))
        else:
            self.retry.add((ex.name, writer, inbox, topic, name))

    async def _scan_all(self, watch: DirWatch) -> None:
        for ex in self.config.exchanges:
            for writer, inbox, inbox_dir in local_inboxes(self.config, ex):
                if not watch.watching(inbox_dir):
                    watch.add(inbox_dir)
                for topic, name in scan_names(inbox_dir):
                    topic_dir = inbox_dir / topic
                    if not watch.watching(topic_dir):
                        watch.add(topic_dir)
                    await self._send_one(ex, writer, inbox, topic, name)

    async def _publisher(self) -> None:
        watch = DirWatch()
        wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        if watch.available:
            loop.add_reader(watch.fileno(), wake.set)
        # directory -> (exchange, writer, inbox, topic or "" for the inbox folder itself)
        where: dict[Path, tuple[BridgedExchange, str, str, str]] = {}
        for ex in self.config.exchanges:
            for writer, inbox, inbox_dir in local_inboxes(self.config, ex):
                where[inbox_dir] = (ex, writer, inbox, "")
        try:
            await self._scan_all(watch)
            next_reconcile = time.monotonic() + RECONCILE_SECONDS
            while True:
                timeout = max(0.0, next_reconcile - time.monotonic())
                if self.retry:
                    timeout = min(timeout, RETRY_SECONDS)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout)
                wake.clear()
                for change in watch.read():
                    spot = where.get(change.directory)
                    if spot is None or change.gone:
                        continue
                    ex, writer, inbox, topic = spot
                    if not topic:  # a new topic folder
                        if change.is_dir:
                            topic_dir = change.directory / change.name
                            where[topic_dir] = (ex, writer, inbox, change.name)
                            watch.add(topic_dir)
                            for name in sorted(os.listdir(topic_dir)):
                                if not name.startswith("."):
                                    await self._send_one(ex, writer, inbox, change.name, name)
                        continue
                    if not change.name.startswith("."):
                        await self._send_one(ex, writer, inbox, topic, change.name)
                for ex_name, writer, inbox, topic, name in sorted(self.retry):
                    await self._send_one(self.config.exchange(ex_name), writer, inbox, topic, name)
                if watch.overflowed or time.monotonic() >= next_reconcile:
                    watch.overflowed = False
                    for ex in self.config.exchanges:
                        for writer, inbox, inbox_dir in local_inboxes(self.config, ex):
                            for topic in os.listdir(inbox_dir) if inbox_dir.is_dir() else ():
                                where.setdefault(inbox_dir / topic, (ex, writer, inbox, topic))
                    await self._scan_all(watch)
                    next_reconcile = time.monotonic() + RECONCILE_SECONDS
                self.ledger.flush()
        finally:
            if watch.available:
                loop.remove_reader(watch.fileno())
            watch.close()

    # -- receiving ---------------------------------------------------------------------
    async def _handle(self, peer: str, msg: Any) -> None:
        try:
            item = check_incoming(
                self.config, peer, msg.subject, msg.headers, msg.data, self.members
            )
        except MailslotError as e:
            log.warning("refused from %s: %s", peer, e)
            self.ledger.alert("refused", peer=peer, subject=msg.subject[:200], reason=str(e))
            await msg.ack()
            return
        try:
            outcome = materialise(item, self.ledger.received, self.exchanges)
        except (OSError, MailslotError) as e:
            log.warning("cannot write %s from %s (will retry): %s", item.relpath, peer, e)
            await msg.nak(delay=RETRY_SECONDS)
            return
        if outcome is Outcome.CONFLICT:
            log.error("conflict: %s from %s differs from the file here", item.relpath, peer)
            self.ledger.alert(
                "conflicts", peer=peer, exchange=item.exchange.name, path=str(item.relpath)
            )
        elif outcome is Outcome.WRITTEN:
            self.counts["materialised"] += 1
            if item.kind == KIND_STATE:
                self.ledger.touch()
        elif outcome is Outcome.SAME:
            self.counts["skipped_same"] += 1
        self.last_heard[peer] = format_time()
        await msg.ack()

    async def _receiver(self, peer: str) -> None:
        sub = await self._js.pull_subscribe_bind(CONSUMER, in_stream(peer))
        while True:
            try:
                msgs = await sub.fetch(1, timeout=1.0)
            except TimeoutError:
                self.ledger.flush()
                continue
            except Exception as e:  # the local server restarting: try again
                log.debug("fetch from %s failed: %s", peer, e)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            for msg in msgs:
                await self._handle(peer, msg)
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

    async def status(self) -> dict[str, Any]:
        """What ``bridge status`` shows."""
        peers = {p: await self._peer_status(p) for p in self.config.peers}
        return {
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

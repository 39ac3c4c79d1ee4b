"""The running bridge: publish what local sides wrote, materialise what peers wrote.

One NATS connection to this host's server (``streams``: the streams and their consumers), a
``Publisher`` for what this host's sides write, a ``Receiver`` per peer's in stream for what
they send, and ``status.json`` rewritten every ``STATUS_SECONDS`` for ``bridge status`` and
``doctor``. The receivers queue arrival receipts for the publisher to send; everything else
they share is the ledger, the counts, and the exchanges and chats carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

from mailslot.bridge.chatlink import ChatLink
from mailslot.bridge.config import BridgeConfig
from mailslot.bridge.ledger import Ledger
from mailslot.bridge.publisher import Publisher, Shared
from mailslot.bridge.receiver import Receiver
from mailslot.bridge.streams import CONSUMER, connect, ensure_streams, in_stream, out_stream
from mailslot.bridge.wire import MAX_PAYLOAD_BYTES
from mailslot.core.clock import format_time
from mailslot.core.fsio import atomic_write
from mailslot.exchange.layout import Exchange

__all__ = ["CONSUMER", "STATUS_NAME", "Bridge", "in_stream", "out_stream"]

STATUS_NAME = "status.json"
# How often status.json is rewritten (and how stale ``bridge status`` may be).
STATUS_SECONDS = 1.0
# How long a stopping bridge waits for a cancelled part before cancelling it again.
CANCEL_AGAIN_SECONDS = 0.5
# A stream with less room left than the largest message it may carry is full.
FULL_MARGIN_BYTES = MAX_PAYLOAD_BYTES + 1024


class Bridge:
    """One host's bridge over one NATS connection."""

    def __init__(self, config: BridgeConfig, url: str | None = None) -> None:
        self.config = config
        self.url = url or config.nats.client_url()
        self.ledger = Ledger.load(config.state_dir)
        self.counts: dict[str, int] = {"published": 0, "materialised": 0, "skipped_same": 0}
        exchanges: dict[str, Exchange] = {}
        chats = {c.name: ChatLink(c, config.host, config.state_dir) for c in config.chats}
        shared = Shared(config, self.ledger, exchanges, chats, self.counts)
        self.publisher = Publisher(shared)
        self.receiver = Receiver(shared, self.publisher.queue_receipt)
        self.started_at = format_time()
        self.connected = False
        self._js: Any = None
        self._nc: Any = None

    def _connected(self, up: bool) -> None:
        self.connected = up

    # -- status ------------------------------------------------------------------------
    async def _peer_status(self, peer: str) -> dict[str, Any]:
        info: dict[str, Any] = {"last_heard": self.receiver.last_heard.get(peer)}
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
        if self.publisher.full_since is not None:
            out[names[0]]["full"] = True
            out[names[0]]["full_since"] = self.publisher.full_since
        return out

    async def status(self) -> dict[str, Any]:
        """What ``bridge status`` shows."""
        peers = {p: await self._peer_status(p) for p in self.config.peers}
        return {
            "streams": await self._stream_status(),
            "write_error": self.receiver.write_error,
            "host": self.config.host,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "updated_at": format_time(),
            "connected": self.connected,
            "peers": peers,
            "counts": dict(self.counts),
            "pending_publish": len(self.publisher.retry),
            "conflicts": self.ledger.totals.get("conflicts", 0),
            "refused": self.ledger.totals.get("refused", 0),
            "recent_conflicts": self.ledger.conflicts[-10:],
            "recent_refused": self.ledger.refused[-10:],
            "diverged": [self.ledger.diverged[k] for k in sorted(self.ledger.diverged)],
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
        self._nc = await connect(self.config, self.url, self._connected)
        try:
            self._js = self.publisher.js = self.receiver.js = self._nc.jetstream()
            await ensure_streams(self._js, self.config)
            tasks: list[asyncio.Task[None]] = [
                asyncio.create_task(self.publisher.run(), name="publisher"),
                asyncio.create_task(self._status_writer(extra_status or {}), name="status"),
            ]
            tasks += [
                asyncio.create_task(self.receiver.run(p), name=f"receive-{p}")
                for p in self.config.peers
            ]
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception()]
            for t in tasks:
                t.cancel()
            # a cancel can be lost (before Python 3.12, asyncio.wait_for drops it when what it
            # awaits finishes at that moment), so a part still running is cancelled again
            while pending := [t for t in tasks if not t.done()]:
                await asyncio.wait(pending, timeout=CANCEL_AGAIN_SECONDS)
                for t in pending:
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

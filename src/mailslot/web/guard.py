"""What one client can hold of a server: time, header bytes and a share of the connections.

uvicorn bounds none of these for a client that sends slowly: its keep-alive timer stops at the
first byte of a request, so a client that trickles one header line a second (a slow-loris) holds
its connection, and an open file, for ever, and 20,000 of them lock every peer out. This module
wraps uvicorn's httptools protocol with:

* a header deadline: the request line and headers must arrive within ``header_timeout`` of the
  connection opening (or of the previous response, on a kept-alive connection), else the client
  gets 408 and the connection closes;
* a body deadline: the body must arrive within ``body_timeout`` of the headers, else it closes;
* a read deadline: an answer the client does not take (its receive window and the server's
  buffers full) for ``body_timeout`` aborts the connection, which otherwise holds a request
  "busy in the app" for ever;
* a header cap: more than ``header_bytes`` before the headers end is 431 (httptools has none);
* an early answer (the app answered before reading the whole body, as a refusal on the headers
  does): the rest of the body is drained and discarded, then the connection serves its next
  request, when its declared length leaves at most ``DRAIN_MAX`` bytes; otherwise (more, a
  chunked body, a client waiting for ``100 Continue``) the answer says ``connection: close``
  and the connection closes. What is left of a body is never parsed as the next request;
* a pipeline cap: at most ``PIPELINE_MAX`` requests queued behind the one being answered, else
  the connection closes (uvicorn queues them without bound: one client, hundreds of MB);
* a connection bound: at most ``max_connections`` open at once. A connection over the bound
  evicts the connection whose client has been silent longest (an idle or slow one, or one that
  does not read its answer; never one whose request the app is working on), so a slow crowd
  cannot keep a prompt client out, nor evict an upload that keeps sending; if every connection
  is busy in the app, the newcomer gets 503.

Every answer is JSON ``{"error": ...}`` like the apps' own. Invariant: the app only ever sees
whole requests; a connection cut here never reached it (head) or sees a disconnect (body).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mailslot.web.settings import ServerLimits

__all__ = ["DRAIN_MAX", "PIPELINE_MAX", "guarded_protocol"]

log = logging.getLogger(__name__)

# _DRAIN: answered early; what is left of the body is read and dropped.
_HEAD, _BODY, _APP, _DRAIN = "head", "body", "app", "drain"

# Requests a client may queue behind the one being answered. No common client pipelines (httpx,
# curl and browsers do not); a client that sends more is flooding, not batching.
PIPELINE_MAX = 16

# The most of an unread body drained after an early answer to keep the connection: a client that
# sent a form over a cap can send its next request on the same connection; a bigger rest is not
# worth reading, and the connection closes.
DRAIN_MAX = 64 * 1024


class _Flood(Exception):
    """Raised in a parser callback to stop parsing the rest of a read; httptools reports it as
    a parser error, whose 400 (``send_400_response``) finds the connection already closed."""


def _json_response(status: int, reason: str, message: str, extra: str = "") -> bytes:
    body = json.dumps({"error": message}).encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra}connection: close\r\n\r\n"
    ).encode() + body


class _OneWrite:
    """A request's transport as uvicorn's answer writes to it: the answer's head is held until
    its body follows (or until the loop's next pass), and both leave in one write. uvicorn
    writes them apart: two system calls and, on loopback or a LAN, two segments the client
    wakes for, measured at a fifth of the inbox's event-loop time under load. Bytes go out in
    the order written; a close sends what is held first; everything else is the transport's."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        # b"": the next write is a head, to hold; None: written through from now on.
        self._held: bytes | None = b""

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._transport.write(data)
            return
        if not held:  # the first write: a head; hold it for this pass of the loop
            self._held = data
            self._loop.call_soon(self.flush)
            return
        self._held = None
        self._transport.write(held + data)

    def flush(self) -> None:
        """Send what is held now."""
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def guarded_protocol(limits: ServerLimits) -> type[asyncio.Protocol]:
    """An httptools protocol class for uvicorn (``Config(http=...)``) enforcing ``limits``.

    Each call makes a class with its own connection registry: one per server.
    """
    # Every open connection -> when its client last sent a byte, or began to leave its answer
    # unread (None: busy in the app).
    live: dict[Guarded, float | None] = {}

    class Guarded(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._phase = _HEAD
            self._timer: asyncio.TimerHandle | None = None
            self._unread: asyncio.TimerHandle | None = None  # armed while writing is paused
            self._running: Any = None  # the request the app is answering
            self._head_bytes = 0  # bytes received since the last end of headers
            self._head_parsed = 0  # bytes of this request's line and headers, as parsed
            self._body_seen = 0  # bytes of this request's body received so far

        # -- the connection bound ------------------------------------------------------------

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            live[self] = time.monotonic()
            if len(live) > limits.max_connections:
                waiting = [(since, c) for c, since in live.items() if since is not None]
                victim = min(
                    ((s, c) for s, c in waiting if c is not self),
                    key=lambda sc: sc[0],
                    default=None,
                )
                if victim is None:  # every other connection is busy in the app
                    self._refuse(
                        _json_response(
                            503,
                            "Service Unavailable",
                            "server busy; retry shortly",
                            "retry-after: 1\r\n",
                        )
                    )
                    return
                victim[1]._refuse(None)
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel()
            live.pop(self, None)
            # uvicorn tells only the last request parsed; the one the app is answering (a
            # pipelined one, when the guard cut the connection) would write to a closed
            # transport and log a traceback per cut connection.
            for cycle in (self._running, *(c for c, _ in self.pipeline)):
                if cycle is not None and not cycle.response_complete:
                    cycle.disconnected = True
                    cycle.message_event.set()
            super().connection_lost(exc)

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            self._running = cycle
            super()._start_asgi_task(cycle, app)

        def _refuse(self, answer: bytes | None) -> None:
            """Close this connection now (after ``answer``), and stop counting it."""
            self._cancel()
            live.pop(self, None)
            if self.transport.is_closing():
                return
            if self._running is not None and isinstance(self._running.transport, _OneWrite):
                self._running.transport.flush()  # an answer's head held back goes first
            if answer is not None:
                self.transport.write(answer)
            if self.transport.get_write_buffer_size():
                # The client is not reading: close() would wait for it for ever, file held.
                self.transport.abort()
            else:
                self.transport.close()

        # -- deadlines -----------------------------------------------------------------------

        def _cancel(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._unread is not None:
                self._unread.cancel()
                self._unread = None

        def _arm(self, seconds: float) -> None:
            self._cancel()
            self._timer = self.loop.call_later(seconds, self._expired)

        def _await_head(self) -> None:
            self._phase = _HEAD
            self._head_bytes = 0
            if self in live:
                live[self] = time.monotonic()
            self._arm(limits.header_timeout)

        def _expired(self) -> None:
            self._timer = None
            if self._phase == _HEAD:
                if self._head_bytes == 0:  # idle between requests: nothing to answer
                    self._refuse(None)
                    return
                message = f"request headers not received within {limits.header_timeout:g} s"
                self._refuse(_json_response(408, "Request Timeout", message))
            elif self._phase == _BODY:  # the app is waiting on it: it sees a disconnect
                log.info("closing a connection whose body did not arrive in time")
                self._refuse(None)
            elif self._phase == _DRAIN:  # answered already: nothing waits on the rest
                self._refuse(None)

        # -- parser events -------------------------------------------------------------------

        def pause_writing(self) -> None:
            super().pause_writing()
            if live.get(self, 0.0) is None:  # the app waits on the client: evictable
                live[self] = time.monotonic()
            if self._unread is None:
                self._unread = self.loop.call_later(limits.body_timeout, self._not_read)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._unread is not None:
                self._unread.cancel()
                self._unread = None
            if self._phase == _APP and self in live:
                live[self] = None

        def _not_read(self) -> None:
            self._unread = None
            log.info("closing a connection whose client did not read its answer in time")
            self._refuse(None)

        def data_received(self, data: bytes) -> None:
            if self._phase not in (_BODY, _DRAIN):
                self._head_bytes += len(data)
            if self._phase != _APP and self in live:
                live[self] = time.monotonic()
            super().data_received(data)
            if self._phase not in (_BODY, _DRAIN) and self._head_bytes > limits.header_bytes:
                # Still no end of headers (it resets the count): refuse before buffering more.
                if self._phase == _HEAD:
                    message = f"request headers over {limits.header_bytes} bytes"
                    self._refuse(_json_response(431, "Request Header Fields Too Large", message))
                else:  # bytes of a pipelined request while the app answers the last one
                    self._refuse(None)

        # A request whose headers end within one read never trips the count above (the end of
        # headers resets it mid-read), so the parsed line and headers are counted as well.
        def on_message_begin(self) -> None:
            self._head_parsed = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
            super().on_header(name, value)

        def _count_head(self, n: int) -> None:
            self._head_parsed += n
            if self._head_parsed <= limits.header_bytes:
                return
            if self.cycle is None or self.cycle.response_complete:
                message = f"request headers over {limits.header_bytes} bytes"
                self._refuse(_json_response(431, "Request Header Fields Too Large", message))
            else:  # a pipelined request: an answer now would cut into the one being sent
                self._refuse(None)
            raise _Flood  # stop parsing what is left of this read

        def handle_websocket_upgrade(self) -> None:
            self._refuse(None)  # neither app speaks WebSocket; nothing upgrades past the limits

        def send_400_response(self, msg: str) -> None:
            self._refuse(_json_response(400, "Bad Request", "invalid HTTP request"))

        def on_headers_complete(self) -> None:
            if len(self.pipeline) >= PIPELINE_MAX:
                log.info("closing a connection that queued over %d requests", PIPELINE_MAX)
                self._refuse(None)
                raise _Flood  # stop parsing what is left of this read
            self._phase = _BODY
            self._head_bytes = 0
            self._body_seen = 0
            if self in live:
                live[self] = time.monotonic()
            self._arm(limits.body_timeout)
            super().on_headers_complete()
            cycle: Any = self.cycle
            cycle.transport = _OneWrite(self.transport, self.loop)
            self._watch_early_answer(cycle)

        def _watch_early_answer(self, cycle: Any) -> None:
            """Have ``cycle``'s answer close the connection if it starts before the body was
            read and more than ``DRAIN_MAX`` of it (or an unknown amount) is still to come."""
            send = cycle.send

            async def send_watched(message: Any) -> None:
                early = message["type"] == "http.response.start" and cycle.more_body
                if early and self._rest_of_body(cycle) is None:
                    cycle.keep_alive = False  # uvicorn says connection: close, then closes
                await send(message)

            cycle.send = send_watched

        def _rest_of_body(self, cycle: Any) -> int | None:
            """Bytes of ``cycle``'s body still to come, if at most ``DRAIN_MAX`` and known."""
            if getattr(cycle, "waiting_for_100_continue", False):
                return None  # the client waits for a go-ahead before sending any of it
            declared = None
            for name, value in cycle.scope["headers"]:
                if name == b"transfer-encoding":
                    return None
                if name == b"content-length":
                    try:
                        declared = int(value)
                    except ValueError:
                        return None
            if declared is None:
                return None
            rest = declared - self._body_seen
            return rest if rest <= DRAIN_MAX else None

        def on_body(self, body: bytes) -> None:
            self._body_seen += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            if self._phase == _DRAIN:  # the rest of an early-answered body is read
                super().on_message_complete()
                self._await_head()
                return
            self._cancel()
            self._phase = _APP
            if self in live:
                live[self] = None
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.transport.is_closing():
                return
            answered = self.cycle is None or self.cycle.response_complete
            if answered and self._phase == _BODY:  # answered early: drain the rest first
                self._phase = _DRAIN
                if self in live:
                    live[self] = time.monotonic()
                self._arm(limits.body_timeout)
                return
            if answered:
                self._await_head()

    return Guarded

"""The peer inbox app: exactly one route, ``POST /inbox``.

There is no GET, no read-back, no docs page and no OpenAPI route on the wire: the only thing
this server does is accept a message from a peer that holds a token. Everything else is 404
(another path) or 405 (another method), as JSON. The spec exists for tooling
(``create_app(settings).openapi()``, ``mailslot peer openapi``), not as a route.

``POST /inbox`` is the hot path: it is answered by a plain ASGI handler (``InboxApp``) that
skips the framework's routing, middleware and dependency solving but keeps its body cap,
checks, JSON answers and error shapes; FastAPI declares the same operation for the spec and
answers every other request. The handler does itself what the app's middleware does (the body
cap, ``SHORTCUT_COVERS``), and only that: an app given any other middleware answers
``POST /inbox`` through the whole stack too, so no middleware is ever skipped.

Order of checks for ``POST /inbox``: body cap (413, before reading), bearer token (401), payload
shape and bounds (422), a receipt for the peer's ``Idempotency-Key`` (a retry gets the first
answer, ``web.receipts``), the peer's hourly limit of accepted messages (429), then the durable
write. A refused request stores nothing and spends none of the peer's quota: the limit is
checked before the write and spent by its success, so a full disk (507) spends nothing either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from mailslot import __version__
from mailslot.core.errors import Conflict, MailslotError
from mailslot.core.fsio import sweep_temps
from mailslot.web.auth import PeerEntry, PeerRegistry, match_token
from mailslot.web.bind import bind_socket, check_private, parse_bind, run_server
from mailslot.web.http import (
    ASGIApp,
    BodyCap,
    Receive,
    Scope,
    Send,
    error_answer,
    install_error_handlers,
    read_capped,
    send_json,
    status_for,
)
from mailslot.web.peer import is_stored, new_id, parse_payload, store
from mailslot.web.ratelimit import Limiter, Reservation, per_hour
from mailslot.web.receipts import Receipts, check_key
from mailslot.web.settings import PEER_SUBJECT_MAX, PeerSettings
from mailslot.web.workers import WorkerPool

__all__ = ["SHORTCUT_COVERS", "Answer", "InboxApp", "accept", "create_app", "serve", "spec"]

log = logging.getLogger(__name__)

_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["body"],
    "properties": {
        "subject": {"type": ["string", "null"], "maxLength": PEER_SUBJECT_MAX},
        "body": {"type": "string", "minLength": 1},
    },
    "description": "Any 'from' is ignored: the sender is the peer whose token matched.",
}

_ERROR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


# Threads writing messages at once: enough to overlap the fsyncs of a burst (each waits a few
# milliseconds on the disk), few enough that they do not fight the event loop for the GIL.
WORKERS = 16

# The middleware ``post_inbox`` does itself, in this order (the app's whole middleware list).
SHORTCUT_COVERS: tuple[type, ...] = (BodyCap,)


class Answer(NamedTuple):
    """The decision on one ``POST /inbox``: its status, JSON body and extra headers."""

    status: int
    doc: dict[str, Any]
    headers: dict[str, str] | None = None


class InboxApp(FastAPI):
    """FastAPI for the spec and every other request (404, 405); ``POST /inbox``, the one hot
    path, is answered by ``post_inbox``, a plain ASGI handler below the framework's routing,
    middleware and dependency solving: the same body cap, checks and answers, less work each.
    Only while the app's middleware is exactly ``SHORTCUT_COVERS``, what the handler does
    itself (checked at the first request, once the list can no longer change)."""

    post_inbox: ASGIApp | None = None
    _shortcut: ASGIApp | None = None
    _decided = False

    def _take_shortcut(self) -> ASGIApp | None:
        if not self._decided:
            stack: tuple[object, ...] = tuple(m.cls for m in self.user_middleware)
            self._shortcut = self.post_inbox if stack == SHORTCUT_COVERS else None
            self._decided = True
        return self._shortcut

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shortcut = self._take_shortcut()
        if (
            shortcut is not None
            and scope["type"] == "http"
            and scope["path"] == "/inbox"
            and scope["method"] == "POST"
        ):
            await shortcut(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(settings: PeerSettings) -> InboxApp:
    """The inbox app for ``settings``; ``MailslotError`` if the peers file is unusable."""
    registry = PeerRegistry(settings.peers_file)
    limiter = Limiter()
    settings.inbox.mkdir(parents=True, exist_ok=True)
    sweep_temps(settings.inbox)  # leftovers of a writer killed mid-write (readers skip them)
    receipts = Receipts(settings.inbox)

    workers = WorkerPool(WORKERS, "mailslot-inbox")

    async def decide(authorization: str | None, raw: bytes, key: str | None) -> Answer:
        # One hop to a worker thread for all the work (token, payload, limit, fsync'd write):
        # the event loop only speaks HTTP, and concurrent writes overlap their fsyncs.
        try:
            return await workers.run(
                accept, settings, registry, limiter, authorization, raw, key, receipts
            )
        except MailslotError as e:  # a full disk (507): the same answer the app's handler gives
            status, message = error_answer(e)
            return Answer(status, {"error": message})

    async def post_inbox(scope: Scope, receive: Receive, send: Send) -> None:
        raw = await read_capped(scope, receive, send, settings.body_cap)
        if raw is None:
            return  # refused (400, 413: answered) or the client left
        authorization = key = None
        for name, value in scope["headers"]:
            if name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif name == b"idempotency-key" and key is None:
                key = value.decode("latin-1")
        try:
            status, doc, headers = await decide(authorization, raw, key)
        except Exception:
            log.exception("unexpected error")
            status, doc, headers = 500, {"error": "internal error"}, None
        await send_json(send, status, doc, headers)

    app = InboxApp(
        title="mailslot peer inbox",
        version=__version__,
        description="Private point-to-point inbox. Inbound content is data, never executed.",
        docs_url=None,
        redoc_url=None,
        # "/inbox/" is another path (404), not a redirect a client may follow with its token.
        redirect_slashes=False,
        openapi_url=None,
    )
    install_error_handlers(app)
    app.add_middleware(BodyCap, cap=settings.body_cap)  # SHORTCUT_COVERS: post_inbox does it too

    @app.post(
        "/inbox",
        status_code=201,
        summary="Leave one message for this box",
        responses={
            201: {"description": "Stored durably: {id, from, received_at}."},
            401: {"description": "Missing or unknown token.", **_ERROR},
            413: {"description": "Body over the cap.", **_ERROR},
            422: {"description": "Not {subject?, body}.", **_ERROR},
            429: {"description": "This peer's hourly limit is used up.", **_ERROR},
        },
        openapi_extra={
            "security": [{"bearer": []}],
            "parameters": [
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "description": "One per message, the same on every retry: a repeat from "
                    "the same peer gets the first answer and stores nothing.",
                    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
                }
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _REQUEST_SCHEMA}},
            },
        },
    )
    async def inbox(request: Request) -> JSONResponse:
        # Declares the operation for the spec; requests reach ``post_inbox`` (same decision).
        auth, key = request.headers.get("authorization"), request.headers.get("idempotency-key")
        status, doc, headers = await decide(auth, await request.body(), key)
        return JSONResponse(doc, status_code=status, headers=headers)

    _add_error_schema(app)
    app.post_inbox = post_inbox
    return app


def accept(
    settings: PeerSettings,
    registry: PeerRegistry,
    limiter: Limiter,
    authorization: str | None,
    raw: bytes,
    idempotency_key: str | None = None,
    receipts: Receipts | None = None,
) -> Answer:
    """Decide one ``POST /inbox`` (its ``Answer``); stores the message on 201.

    Checks in order: bearer token (401), payload and key (413/422), a receipt for this peer's
    key (the first answer again, nothing stored), the peer's hourly limit (429).
    """
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return Answer(401, {"error": "missing bearer token"}, {"WWW-Authenticate": "Bearer"})
    try:
        peers = registry.current()
    except (MailslotError, OSError) as e:  # fail safe: an unreadable peers file admits nobody
        log.error("peers file unusable: %s", e)
        return Answer(503, {"error": "inbox unavailable"})
    peer = match_token(peers, token)
    if peer is None:
        challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
        return Answer(401, {"error": "invalid token"}, challenge)
    try:
        subject, body = parse_payload(raw, cap=settings.body_cap)
        if idempotency_key is not None:
            check_key(idempotency_key)
    except MailslotError as e:
        return Answer(status_for(e), {"error": str(e)})
    if idempotency_key is None or receipts is None:
        return _admit(settings, limiter, peer, subject, body)
    with receipts.claim(peer.name, idempotency_key) as name:
        try:
            first = receipts.get(name, raw)
        except Conflict as e:
            return Answer(422, {"error": str(e)})
        if first is not None and is_stored(settings.inbox, first["id"]):
            return Answer(201, first, {"Idempotent-Replayed": "true"})
        # No receipt, or the receipt of a try that never stored its message (the server was
        # killed, or the disk was full): store it, under the id that try was promised.
        promised = None if first is None else (first["id"], first["received_at"])
        return _admit(settings, limiter, peer, subject, body, promised, (receipts, name, raw))


def _admit(
    settings: PeerSettings,
    limiter: Limiter,
    peer: PeerEntry,
    subject: str | None,
    body: str,
    promised: tuple[str, str] | None = None,
    receipt: tuple[Receipts, str, bytes] | None = None,
) -> Answer:
    """The hourly limit (429), then the receipt (if any) and the durable write (201)."""
    limit = settings.override_per_hour or peer.per_hour or settings.per_hour
    slot = limiter.reserve(f"peer:{peer.name}", [per_hour(limit)])
    if not isinstance(slot, Reservation):
        message = f"peer {peer.name} has used its {limit} messages per hour"
        return Answer(429, {"error": message}, {"Retry-After": str(int(slot))})
    with slot:  # spent by the stored message; a refused write (507) gives it back
        if receipt is None:
            msg = store(settings.inbox, peer.name, subject, body)
            return Answer(201, {"id": msg.id, "from": msg.sender, "received_at": msg.received_at})
        receipts, name, raw = receipt
        while True:
            msg_id, received_at = promised or new_id(peer.name)
            answer = {"id": msg_id, "from": peer.name, "received_at": received_at}
            if promised is None:  # first the receipt: a kill after it leaves a retry to store
                receipts.put(name, raw, answer)
            try:
                store(settings.inbox, peer.name, subject, body, planned=(msg_id, received_at))
            except Conflict:
                if promised is not None:
                    raise
                continue  # a fresh id collided with a stored one: draw again
            return Answer(201, answer)


def _add_error_schema(app: InboxApp) -> None:
    base = app.openapi

    def openapi() -> dict[str, Any]:
        spec = base()
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        spec["components"]["securitySchemes"] = {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "A token from 'mailslot peer token new'.",
            }
        }
        schemas["Error"] = {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}},
        }
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def serve(settings: PeerSettings, bind: str, announce: Callable[[str], None] | None = None) -> None:
    """Run the inbox on ``bind`` (private addresses only) until stopped.

    Raises ``InvalidValue`` for a public address, ``FormatError`` for a malformed one,
    ``ServerFailed`` for one that is busy or not this host's, or the peers file's error, before
    anything listens.
    """
    where = check_private(parse_bind(bind))
    app = create_app(settings)
    sock = bind_socket(where)
    port = sock.getsockname()[1]
    if announce is not None:
        announce(f"{where.url(port)}/inbox")
    run_server(app, sock, settings.server)


def spec() -> dict[str, Any]:
    """The inbox's OpenAPI spec (built from a throwaway app; the inbox does not serve it)."""
    import tempfile

    from mailslot.web.auth import new_token

    with tempfile.TemporaryDirectory() as tmp:
        peers = Path(tmp) / "peers.json"
        new_token(peers, "example")
        return create_app(PeerSettings(peers, Path(tmp) / "inbox")).openapi()

"""What both apps share at the HTTP edge: the body cap, JSON errors, security headers.

Invariants:

* A body over the cap is refused with 413 *before* it is read whole: a ``Content-Length`` over
  the cap is refused without reading a byte, and a streamed (chunked) body is counted as it
  arrives and refused the moment it passes the cap. At most ``cap`` bytes are ever buffered.
* Every error is JSON ``{"error": "..."}`` with its 4xx status; an unexpected exception is a
  500 with ``{"error": "internal error"}`` and the traceback goes to the log, never the client.
* ``MailslotError`` maps to a status in one place (``status_for``); a full disk is 507.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mailslot.core.errors import (
    Conflict,
    FormatError,
    InvalidName,
    InvalidPath,
    InvalidValue,
    LimitExceeded,
    MailslotError,
    NoSpace,
    NotFound,
)

__all__ = [
    "BodyCap",
    "error",
    "error_answer",
    "install_error_handlers",
    "read_capped",
    "send_json",
    "status_for",
]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PHRASES = {400: "bad request", 401: "unauthorized", 404: "not found", 405: "method not allowed"}
# What a client is told for a server-side failure: the detail (paths) goes to the log only.
_SERVER_SIDE = {507: "no space left on the server's disk; try again later"}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON error response ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def status_for(exc: MailslotError) -> int:
    """The HTTP status of a refusal: 413 for a too-large body, 422 for a bad payload, ..."""
    if isinstance(exc, LimitExceeded) and exc.what == "request body":
        return 413
    if isinstance(exc, LimitExceeded | FormatError | InvalidName | InvalidPath | InvalidValue):
        return 422
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, Conflict):
        return 409
    if isinstance(exc, NoSpace):
        return 507  # Insufficient Storage: the server's disk, not the client's request
    return 500


def error_answer(exc: MailslotError) -> tuple[int, str]:
    """``(status, message)`` a client is told for a refusal: a server-side failure's detail
    (paths) goes to the log, never the client."""
    status = status_for(exc)
    if status >= 500:
        log.error("refused with a server-side error: %s", exc)
        return status, _SERVER_SIDE.get(status, "internal error")
    return status, str(exc)


def install_error_handlers(app: FastAPI) -> None:
    """Make every error the app can raise a JSON ``{"error": ...}`` response."""

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else None
        message = detail or _PHRASES.get(exc.status_code, "error")
        if exc.status_code == 404:
            message = "not found"
        return error(exc.status_code, message.lower(), dict(exc.headers or {}))

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        return error(422, "invalid request")

    async def mailslot_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MailslotError)
        return error(*error_answer(exc))

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        return error(500, "internal error")

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(MailslotError, mailslot_error)
    app.add_exception_handler(Exception, unexpected)


async def _send_error(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def read_capped(scope: Scope, receive: Receive, send: Send, cap: int) -> bytes | None:
    """The request's whole body, or None once it was refused (400 for a bad ``Content-Length``,
    413 over ``cap``: answered here) or the client left. Reads at most ``cap`` bytes."""
    length: int | None = None
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                await _send_error(send, 400, "bad content-length")
                return None
    if length is not None and length > cap:
        await _send_error(send, 413, f"request body is {length} bytes; the limit is {cap}")
        return None
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            await _send_error(send, 413, f"request body exceeds the limit of {cap} bytes")
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(
    send: Send, status: int, doc: Any, headers: Mapping[str, str] | None = None
) -> None:
    """Answer with ``doc`` as JSON, byte for byte what ``JSONResponse`` sends (for a handler
    that answers below the framework)."""
    body = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    raw.append((b"content-length", str(len(body)).encode()))
    raw.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class BodyCap:
    """ASGI middleware: refuse a request body over ``cap`` bytes with 413, reading at most
    ``cap`` bytes of it, then hand the app the buffered body."""

    def __init__(self, app: ASGIApp, cap: int) -> None:
        self.app = app
        self.cap = cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await read_capped(scope, receive, send, self.cap)
        if body is None:
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

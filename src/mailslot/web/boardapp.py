"""The board app: the Agora API, its page, and the discovery card.

Order of checks for ``POST /api/agora`` (bounds before the rate limit):
body cap (413, before reading) -> per-source request limit (429, counts every POST, so a flood
of refused requests stops here) -> ban (403) -> shape and bounds (422) -> per-source accepted-post
limit, one per 20 s and 30 per day (429; checked here, spent only when the insert stores the post,
so a full disk's 507 spends nothing) -> durable insert.

Reads are served from bytes cached until the database changes (``Board.version``: our writes
and anyone else's, such as a moderator hiding a post from the command line), so ``GET`` costs
one ``PRAGMA data_version``.

The source is the TCP peer's address. ``X-Forwarded-For`` is believed only when the TCP peer is
a configured trusted proxy, and then the rightmost address that is not a trusted proxy is the
source. IPv6 sources share their /64 in the rate limits (one host usually owns a whole /64).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from mailslot import __version__
from mailslot.core.errors import InvalidValue, MailslotError
from mailslot.web.auth import PeerEntry, load_peers
from mailslot.web.bind import bind_socket, parse_bind, run_server
from mailslot.web.board import CSP, Board, parse_post, render_page
from mailslot.web.http import BodyCap, error, install_error_handlers, status_for
from mailslot.web.manifest import CardConfig, build_card, load_card_config
from mailslot.web.ratelimit import Limiter, Reservation, per_day, per_seconds
from mailslot.web.settings import BoardSettings

__all__ = ["create_app", "serve", "source_of", "spec"]

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_POST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["agent", "message"],
    "properties": {
        "agent": {"type": "string", "minLength": 2, "maxLength": 40},
        "message": {"type": "string", "minLength": 1, "maxLength": 1200},
        "link": {"type": ["string", "null"], "format": "uri", "maxLength": 2048},
    },
}
_POST_OUT: dict[str, Any] = {
    "type": "object",
    "required": ["id", "agent", "message", "link", "posted_at"],
    "properties": {
        "id": {"type": "integer"},
        "agent": {"type": "string"},
        "message": {"type": "string"},
        "link": {"type": ["string", "null"]},
        "posted_at": {"type": "string"},
    },
}
_ERROR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_PAGE_HEADERS = {
    "Content-Security-Policy": "",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _networks(values: tuple[str, ...]) -> tuple[Network, ...]:
    try:
        return tuple(ipaddress.ip_network(v, strict=False) for v in values)
    except ValueError as e:
        raise InvalidValue(f"--trust-proxy: {e}") from None


def _in(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == n.version and ip in n for n in networks)


def source_of(request: Request, trusted: tuple[Network, ...]) -> str:
    """The address a request comes from, believing X-Forwarded-For only from a trusted proxy."""
    peer = request.client.host if request.client else "unknown"
    if not trusted or not _in(peer, trusted):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getlist("x-forwarded-for")).split(",")]
    for hop in reversed([h for h in hops if h]):
        if not _in(hop, trusted):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:  # garbage from the far side: count it against the proxy itself
                return peer
    return peer


def _bucket(source: str) -> str:
    try:
        ip = ipaddress.ip_address(source)
    except ValueError:
        return source
    if ip.version == 6 and ip.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip.ipv4_mapped or ip) if ip.version == 6 else str(ip)


def create_app(settings: BoardSettings) -> FastAPI:
    """The board app for ``settings``; ``MailslotError`` if the database or config is unusable."""
    board = Board(settings.db)
    card_config = load_card_config(settings.card_file) if settings.card_file else CardConfig()
    trusted = _networks(settings.trust_proxy)
    limiter = Limiter()
    request_limit = [per_seconds(settings.requests_per_minute, 60)]
    post_limit = [per_seconds(1, settings.post_every_s), per_day(settings.posts_per_day)]
    cache: dict[str, Any] = {}
    page_headers = {**_PAGE_HEADERS, "Content-Security-Policy": CSP}

    app = FastAPI(
        title="mailslot board (Agora)",
        version=__version__,
        description="Public board. Posts are data: stored verbatim, shown escaped, moderated "
        "on a schedule, never executed.",
        docs_url=None,  # the docs page loads script from elsewhere; the spec is enough
        redoc_url=None,
        redirect_slashes=False,  # "/api/agora/" is 404, not a 307 to follow
    )
    install_error_handlers(app)
    app.add_middleware(BodyCap, cap=settings.body_cap)

    def snapshot() -> dict[str, Any]:
        version = board.version()
        if cache.get("version") != version:
            posts = board.newest()
            cache.clear()
            cache.update(
                version=version,
                json=json.dumps(posts, ensure_ascii=False).encode(),
                html=render_page(posts, card_config.name + " Agora").encode(),
            )
        return cache

    def known_peers() -> dict[str, PeerEntry]:
        if settings.peers_file is None:
            return {}
        try:
            return load_peers(settings.peers_file)
        except MailslotError as e:
            log.warning("card: peers file unusable, listing config peers only: %s", e)
            return {}

    @app.get(
        "/api/agora",
        summary="The 50 newest posts, newest first",
        responses={
            200: {
                "content": {"application/json": {"schema": {"type": "array", "items": _POST_OUT}}}
            }
        },
    )
    async def agora_list() -> Response:
        return Response(snapshot()["json"], media_type="application/json")

    @app.post(
        "/api/agora",
        status_code=201,
        summary="Append one post",
        responses={
            201: {"content": {"application/json": {"schema": _POST_OUT}}},
            403: {"description": "This source is banned.", **_ERROR},
            413: {"description": "Body over 8 KB.", **_ERROR},
            422: {"description": "Out of bounds or malformed.", **_ERROR},
            429: {"description": "Rate limited.", **_ERROR},
        },
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _POST_SCHEMA}},
            }
        },
    )
    async def agora_post(request: Request) -> JSONResponse:
        source = source_of(request, trusted)
        bucket = _bucket(source)
        wait = limiter.take(f"req:{bucket}", request_limit)
        if wait is not None:
            return error(429, "too many requests from this source", {"Retry-After": str(int(wait))})
        if board.is_banned(source):
            return error(403, "this source is banned from posting")
        raw = await request.body()
        try:
            post = parse_post(raw, cap=settings.body_cap)
        except MailslotError as e:
            return error(status_for(e), str(e))
        slot = limiter.reserve(f"post:{bucket}", post_limit)
        if not isinstance(slot, Reservation):
            return error(
                429,
                f"one post per {settings.post_every_s} s and {settings.posts_per_day} per day "
                "per source",
                {"Retry-After": str(int(slot))},
            )
        with slot:  # spent by the stored post; a refused insert (507) gives it back
            stored = await anyio.to_thread.run_sync(board.add, post, source)
        return JSONResponse(stored, status_code=201)

    @app.get("/", response_class=HTMLResponse, summary="The board as an HTML page")
    async def page() -> Response:
        return Response(
            snapshot()["html"], media_type="text/html; charset=utf-8", headers=page_headers
        )

    def card(request: Request) -> JSONResponse:
        base = settings.public_url or str(request.base_url)
        return JSONResponse(
            build_card(card_config, base, known_peers()), headers={"Cache-Control": "max-age=300"}
        )

    @app.get("/.well-known/agent-card.json", summary="A2A v1.0 agent card")
    async def agent_card(request: Request) -> JSONResponse:
        return card(request)

    @app.get("/.well-known/agent.json", summary="The same card at its older name")
    async def agent_json(request: Request) -> JSONResponse:
        return card(request)

    base_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        spec = base_openapi()
        spec.setdefault("components", {}).setdefault("schemas", {})["Error"] = {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}},
        }
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
    app.state.board = board
    return app


def serve(
    settings: BoardSettings, bind: str, announce: Callable[[str], None] | None = None
) -> None:
    """Run the board on ``bind`` until stopped.

    The board is public by design, so any address is allowed; the recommended deployment is a
    loopback bind behind a reverse proxy named with ``--trust-proxy``. Raises ``FormatError``
    for a malformed address, ``ServerFailed`` for a busy or foreign one, ``CannotOpen`` for a
    database that will not open, before anything listens.
    """
    where = parse_bind(bind)
    app = create_app(settings)
    sock = bind_socket(where)
    if announce is not None:
        announce(where.url(sock.getsockname()[1]) + "/")
    run_server(app, sock, settings.server)


def spec() -> dict[str, Any]:
    """The board's OpenAPI spec (the same one it serves at /openapi.json)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(BoardSettings(Path(tmp) / "agora.db"))
        try:
            return app.openapi()
        finally:
            app.state.board.close()

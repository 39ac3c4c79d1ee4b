"""The page app: server-rendered views of every root, and the few writes a human may make.

Routes (all HTML unless said): ``/`` overview; ``/x/{src}`` an exchange's topics (filters,
pages) and its time picture; ``/x/{src}/t/{topic}`` a thread; ``/c/{src}/{chat}`` a chat and
``.../events`` its server-sent events; ``/b/{src}`` a bus; ``/login``, ``/logout``;
``/static/*``. Writes (POST, CSRF-checked, logged-in human only) go through the channel
functions: ``exchange.entries.send``, ``exchange.state.set_state``, ``chat.room.human_say``,
``chat.room.human_approve``. Every check a write needs lives in that function, not here.

The guard (``guard``) runs before any route: Host (421), login for reading off loopback, CSP.
Reads run in worker threads (they touch the disk); nothing from a file reaches the HTML except
through Jinja2's autoescape or ``markdown.render_markdown``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from mailslot.core.errors import MailslotError
from mailslot.web.http import status_for
from mailslot.web.page import guard
from mailslot.web.page.humans import HumanRegistry
from mailslot.web.page.settings import PageSettings
from mailslot.web.page.sources import Sources, find_sources

__all__ = ["Context", "GuardedApp", "create_app", "in_thread", "qs", "sse_lines"]

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
STATIC = {
    "page.css": "text/css; charset=utf-8",
    "live.js": "text/javascript; charset=utf-8",
}
_HEADERS = {
    "Content-Security-Policy": guard.CSP,
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on a form
    # POST, and the CSRF origin check needs the real one. Links out still send none.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass
class Context:
    """What every handler needs: the sources, the settings, who is logged in."""

    sources: Sources
    settings: PageSettings
    humans: HumanRegistry
    sessions: guard.Sessions


def _templates() -> Any:
    import jinja2
    import markupsafe

    from mailslot.web.page.markdown import render_markdown

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(HERE / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    # render_markdown's output is safe by construction (raw HTML off, links vetted).
    env.filters["markdown"] = lambda text: markupsafe.Markup(render_markdown(text))  # noqa: S704
    env.filters["q"] = lambda text: quote(str(text), safe="")
    return env


def create_app(settings: PageSettings) -> GuardedApp:
    """The page app for ``settings``; ``NotFound`` for a root that holds nothing to show."""
    from mailslot.web.page import routes

    ctx = Context(
        find_sources(list(settings.roots)),
        settings,
        HumanRegistry(settings.humans_file),
        guard.Sessions(),
    )
    env = _templates()
    handlers = routes.Handlers(ctx, env)
    app = Starlette(
        routes=[
            Route("/", handlers.overview),
            Route("/login", handlers.login_form, methods=["GET"]),
            Route("/login", handlers.login, methods=["POST"]),
            Route("/logout", handlers.logout, methods=["POST"]),
            Route("/static/{name}", static),
            Route("/x/{src}", handlers.exchange),
            Route("/x/{src}/send", handlers.exchange_send, methods=["POST"]),
            Route("/x/{src}/t/{topic}", handlers.topic),
            Route("/x/{src}/t/{topic}/send", handlers.topic_send, methods=["POST"]),
            Route("/x/{src}/t/{topic}/state", handlers.topic_state, methods=["POST"]),
            Route("/c/{src}/{chat}", handlers.chat),
            Route("/c/{src}/{chat}/events", handlers.chat_events),
            Route("/c/{src}/{chat}/say", handlers.chat_say, methods=["POST"]),
            Route("/c/{src}/{chat}/answer", handlers.chat_answer, methods=["POST"]),
            Route("/b/{src}", handlers.bus),
            Route("/search", handlers.search),
        ],
    )
    app.state.ctx = ctx
    threading.Thread(target=handlers.warm, name="page-warm", daemon=True).start()
    return GuardedApp(app, ctx, env, handlers.close)


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return HTMLResponse("not found", status_code=404)
    return FileResponse(
        HERE / "static" / name,
        media_type=STATIC[name],
        headers={**_HEADERS, "Cache-Control": "max-age=300"},
    )


Scope = dict[str, Any]
ASGI = Callable[[Scope, Any, Any], Awaitable[None]]


class GuardedApp:
    """The guard around the routes: Host (421), login for reading off loopback, the headers."""

    def __init__(self, app: Starlette, ctx: Context, env: Any, close: Callable[[], None]) -> None:
        self.app = app
        self._close = close
        self.ctx = ctx
        self.env = env
        self.state = app.state
        self.session_cookie = guard.cookie_name(guard.SESSION_COOKIE, ctx.settings.port)

    def close(self) -> None:
        """Stop the views' file watchers and the search's follower (the server has stopped)."""
        self._close()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        port = self.ctx.settings.port or (scope.get("server") or ("", 0))[1]
        if not guard.host_allowed(headers.get("host"), self.ctx.settings.bind_host, port):
            response: Response = HTMLResponse(
                "misdirected request: this server answers to its own address only",
                status_code=421,
                headers=_HEADERS,
            )
            await response(scope, receive, send)
            return
        path = scope.get("path", "")
        open_path = path in ("/login",) or path.startswith("/static/")
        if not self.ctx.settings.reading_open and not open_path:
            request = Request(scope)
            if self.ctx.sessions.get(request.cookies.get(self.session_cookie)) is None:
                response = RedirectResponse("/login", status_code=303, headers=_HEADERS)
                await response(scope, receive, send)
                return

        started = time.perf_counter()

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                # What the server spent before answering (the benchmark reads it).
                took = (time.perf_counter() - started) * 1000
                message["headers"] = [
                    *message.get("headers", []),
                    (b"server-timing", f"app;dur={took:.2f}".encode()),
                ]
                have = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.lower().encode(), v.encode())
                    for k, v in _HEADERS.items()
                    if k.lower().encode() not in have
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def status_of(exc: MailslotError) -> int:
    """The HTTP status of a refusal (``web.http.status_for``)."""
    return status_for(exc)


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` (disk work) in a worker thread."""
    return await anyio.to_thread.run_sync(fn, *args)


def qs(**kw: Any) -> str:
    """A query string of the given non-empty values."""
    return urlencode({k: v for k, v in kw.items() if v not in (None, "")})


async def sse_lines(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    """Server-sent events, one JSON object each (``event``, ``data``); a comment every so often
    keeps proxies from closing an idle stream."""
    async for ev in events:
        if ev.get("ping"):
            yield b": ping\n\n"
            continue
        data = json.dumps(ev["data"], ensure_ascii=False)
        yield f"event: {ev['event']}\nid: {ev.get('id', '')}\ndata: {data}\n\n".encode()

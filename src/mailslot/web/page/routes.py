"""The page's handlers: each reads through a channel function (in a worker thread) and renders a
template, or checks a write's session and CSRF token and hands it to a channel function."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from urllib.parse import quote

import anyio
import anyio.to_thread
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse

from mailslot.core.cursor import ByteCursor
from mailslot.core.errors import FormatError, MailslotError, NotFound
from mailslot.defaults import board_db
from mailslot.web.page import guard
from mailslot.web.page.app import Context, in_thread, qs, sse_lines, status_of
from mailslot.web.page.finder import PageSearch
from mailslot.web.page.humans import match
from mailslot.web.page.sources import Source
from mailslot.web.page.views import FILTERS, ViewCache, filter_rows, minutes_ago

__all__ = ["Handlers"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Chats the overview lists per root, newest first: the live ones are among the newest.
OVERVIEW_CHATS = 20
# LOG.md lines the overview shows per bus; the bus page shows more.
OVERVIEW_LOG = 5
BUS_LOG = 50
# The longest one wait of an event stream's worker thread: a stop or a closed tab is noticed
# within it (the wait is armed anew each time, so no message is missed between two).
STREAM_STEP_S = 1.0
# What the page says while a stream polls its chat file instead of following kernel events.
POLLING_WHY = (
    "the server cannot watch this chat (its inotify watch limit, fs.inotify.max_user_watches, "
    "is reached): polling it instead"
)
# What the exchange page says while some of its directories are polled, not watched.
EXCHANGE_POLLED = (
    "polled: the server cannot watch every directory of this exchange (its inotify watch "
    "limit, fs.inotify.max_user_watches, is reached); changes show when the page is loaded "
    "again, each read whole"
)
# Hits one search shows: a page of results, the best first.
SEARCH_HITS = 50


class Handlers:
    """Every route's handler, sharing the context and the templates."""

    def __init__(self, ctx: Context, env: Any) -> None:
        self.ctx = ctx
        self.env = env
        self.cache = ViewCache()
        self.finder = PageSearch([s.root for s in ctx.sources.all])
        self.session_cookie = guard.cookie_name(guard.SESSION_COOKIE, ctx.settings.port)
        self.login_cookie = guard.cookie_name(guard.LOGIN_COOKIE, ctx.settings.port)
        # Each open event stream waits in a worker thread; these bound how many at once.
        self.sse_limiter = anyio.CapacityLimiter(ctx.settings.sse_streams)

    def close(self) -> None:
        """Stop the views' watchers and the search's follower (the server has stopped)."""
        self.cache.close()
        self.finder.close()

    def warm(self) -> None:
        """Build every exchange's view ahead of the first request (a 10,000-topic exchange
        takes seconds); a failure here is logged and left to the first request."""
        for source in self.ctx.sources.all:
            if source.exchange is not None:
                try:
                    self.cache.exchange(source.exchange)
                except Exception:
                    log.exception("could not build the view of %s", source.root)

    # -- helpers ---------------------------------------------------------------------------
    def session(self, request: Request) -> guard.Session | None:
        """The logged-in human's session, if any (a revoked credential has none)."""
        session = self.ctx.sessions.get(request.cookies.get(self.session_cookie))
        if session is not None and session.human not in self.ctx.humans.current():
            self.ctx.sessions.end(request.cookies.get(self.session_cookie))
            return None
        return session

    def render(self, request: Request, template: str, status: int = 200, **kw: Any) -> HTMLResponse:
        session = self.session(request)
        html = self.env.get_template(template).render(
            who=session.human if session else None,
            csrf=session.csrf if session else None,
            reading_open=self.ctx.settings.reading_open,
            sources=self.ctx.sources.all,
            minutes_ago=minutes_ago,
            qs=qs,
            **kw,
        )
        return HTMLResponse(html, status_code=status)

    def refused(self, request: Request, status: int, message: str) -> HTMLResponse:
        """The page saying what was refused, with its status."""
        return self.render(request, "error.html", status, title=str(status), message=message)

    async def guarded_form(
        self, request: Request
    ) -> tuple[guard.Session, dict[str, str]] | HTMLResponse:
        """A POST's session and form, or the page refusing it: no session (401), a foreign
        origin or a missing or wrong CSRF token (403), a form over the cap (413)."""
        session = self.session(request)
        if session is None:
            return self.refused(request, 401, "log in first: every write is a person's")
        host = request.headers.get("host", "")
        if not guard.origin_allowed(
            request.headers.get("origin"), request.headers.get("referer"), host
        ):
            return self.refused(request, 403, "this form was not sent from this page")
        body = await _bounded_body(request)
        if body is None:
            return self.refused(request, 413, f"form over {guard.FORM_MAX_BYTES} bytes")
        form = guard.parse_form(body)
        if not guard.same_token(form.get("csrf"), session.csrf):
            return self.refused(request, 403, "missing or stale form token; reload the page")
        return session, form

    async def write_form(
        self, request: Request, locate: Callable[[Request], T]
    ) -> tuple[guard.Session, dict[str, str], T] | HTMLResponse:
        """A write's session, form and what ``locate`` finds from its path (an exchange, a
        chat), or the page refusing it: as ``guarded_form``, or what ``locate`` refused."""
        checked = await self.guarded_form(request)
        if isinstance(checked, HTMLResponse):
            return checked
        try:
            found = locate(request)
        except MailslotError as e:
            return self.refused(request, status_of(e), str(e))
        return (*checked, found)

    async def attempt(
        self, request: Request, fn: Callable[..., Any], *args: Any, back: str
    ) -> Response:
        """Run the write ``fn(*args)`` in a thread; 303 to ``back`` on success, the refusal
        (the channel's own words, with its status) otherwise."""
        try:
            await in_thread(fn, *args)
        except MailslotError as e:
            return self.refused(request, status_of(e), str(e))
        self.finder.written()
        return RedirectResponse(back, status_code=303)

    # -- login -----------------------------------------------------------------------------
    async def login_form(self, request: Request) -> Response:
        token = guard.new_login_token()
        response = self.render(request, "login.html", title="log in", login_token=token, error=None)
        response.set_cookie(self.login_cookie, token, httponly=True, samesite="strict", max_age=600)
        return response

    async def login(self, request: Request) -> Response:
        if not guard.origin_allowed(
            request.headers.get("origin"),
            request.headers.get("referer"),
            request.headers.get("host", ""),
        ):
            return self.refused(request, 403, "this form was not sent from this page")
        body = await _bounded_body(request)
        if body is None:
            return self.refused(request, 413, "form too large")
        form = guard.parse_form(body)
        if not guard.same_token(form.get("csrf"), request.cookies.get(self.login_cookie)):
            return self.refused(request, 403, "missing or stale form token; reload the page")
        human = match(self.ctx.humans.current(), form.get("token", "").strip())
        if human is None:
            token = guard.new_login_token()
            response = self.render(
                request,
                "login.html",
                status=401,
                title="log in",
                login_token=token,
                error="unknown credential",
            )
            response.set_cookie(
                self.login_cookie, token, httponly=True, samesite="strict", max_age=600
            )
            return response
        sid, _ = self.ctx.sessions.start(human.name)
        done = RedirectResponse("/", status_code=303)
        done.set_cookie(
            self.session_cookie,
            sid,
            httponly=True,
            samesite="strict",
            max_age=int(guard.SESSION_SECONDS),
        )
        done.delete_cookie(self.login_cookie)
        return done

    async def logout(self, request: Request) -> Response:
        checked = await self.guarded_form(request)
        if isinstance(checked, HTMLResponse):
            return checked
        self.ctx.sessions.end(request.cookies.get(self.session_cookie))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(self.session_cookie)
        return response

    # -- overview --------------------------------------------------------------------------
    async def overview(self, request: Request) -> Response:
        from mailslot.web.page.readers import bridge_summary

        cards = await in_thread(self._overview)
        bridge = await in_thread(bridge_summary)
        return self.render(request, "overview.html", title="mailslot", cards=cards, bridge=bridge)

    def _overview(self) -> list[dict[str, Any]]:
        from mailslot.web.page.readers import board_summary, bus_summary, chats_of, peer_summary

        out = []
        for source in self.ctx.sources.all:
            card: dict[str, Any] = {
                "source": source,
                "exchange": None,
                "bus": None,
                "peer": None,
                "board": None,
            }
            if source.exchange is not None:
                card["exchange"] = self.cache.exchange(source.exchange)
            card["chats"] = chats_of(source.root, OVERVIEW_CHATS)
            if source.bus:
                card["bus"] = bus_summary(source.root, OVERVIEW_LOG)
            if source.peer_inbox is not None:
                card["peer"] = peer_summary(source.peer_inbox)
            if board_db(source.root).is_file():
                card["board"] = board_summary(board_db(source.root))
            out.append(card)
        return out

    # -- exchange --------------------------------------------------------------------------
    def _exchange_of(self, request: Request) -> tuple[Source, Any]:
        return self.ctx.sources.exchange(request.path_params["src"])

    async def exchange(self, request: Request) -> Response:
        try:
            source, ex = self._exchange_of(request)
        except NotFound as e:
            return self.refused(request, 404, str(e))
        which = request.query_params.get("filter", "all")
        which = which if which in FILTERS else "all"
        session = self.session(request)
        my_side = ex.humans.get(session.human) if session else None
        side = request.query_params.get("side") or my_side
        side = side if side in ex.sides else None
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        view = await in_thread(self.cache.exchange, ex)
        as_of = await in_thread(self.cache.as_of, ex)
        polled = await in_thread(self.cache.polled, ex)
        # numbers and dates drawn by the page itself (timepic): nothing from a file
        picture = Markup(await in_thread(self.cache.picture, ex))  # noqa: S704
        rows = filter_rows(view, which, side)
        per = self.ctx.settings.rows
        pages = max(1, -(-len(rows) // per))
        page = min(page, pages)
        return self.render(
            request,
            "exchange.html",
            title=f"{source.id} - exchange",
            source=source,
            ex=ex,
            view=view,
            rows=rows[(page - 1) * per : page * per],
            total=len(rows),
            page=page,
            pages=pages,
            which=which,
            filters=FILTERS,
            side=side,
            can_write=my_side is not None,
            picture=picture,
            as_of=as_of,
            polled=polled,
            polled_why=EXCHANGE_POLLED,
        )

    async def topic(self, request: Request) -> Response:
        from mailslot.exchange.overview import read_topic

        try:
            source, ex = self._exchange_of(request)
            detail = await in_thread(read_topic, ex, request.path_params["topic"])
        except MailslotError as e:
            return self.refused(request, status_of(e), str(e))
        session = self.session(request)
        my_side = ex.humans.get(session.human) if session else None
        return self.render(
            request,
            "topic.html",
            title=f"{detail.name} - {source.id}",
            source=source,
            ex=ex,
            detail=detail,
            my_side=my_side,
        )

    async def topic_send(self, request: Request) -> Response:
        from mailslot.exchange.entries import send

        return await self._topic_write(request, send, ("action", "fyi"), ("body", ""))

    async def topic_state(self, request: Request) -> Response:
        from mailslot.exchange.state import set_state

        return await self._topic_write(request, set_state, ("status", ""))

    async def _topic_write(
        self, request: Request, fn: Callable[..., Any], *fields: tuple[str, str]
    ) -> Response:
        """``fn(ex, human, topic, *values)``: a write to the path's topic as the logged-in
        human, with the form's ``fields`` (name, default) in order; back to the topic after."""
        checked = await self.write_form(request, self._exchange_of)
        if isinstance(checked, HTMLResponse):
            return checked
        session, form, (source, ex) = checked
        topic = request.path_params["topic"]
        values = [form.get(name, default) for name, default in fields]
        done = await self.attempt(
            request, fn, ex, session.human, topic, *values, back=f"/x/{source.id}/t/{topic}"
        )
        self.cache.invalidate(ex, topic)
        return done

    async def exchange_send(self, request: Request) -> Response:
        from mailslot.exchange.entries import send

        checked = await self.write_form(request, self._exchange_of)
        if isinstance(checked, HTMLResponse):
            return checked
        session, form, (source, ex) = checked
        try:
            result = await in_thread(
                send,
                ex,
                session.human,
                form.get("topic", ""),
                form.get("action", "fyi"),
                form.get("body", ""),
            )
        except MailslotError as e:
            return self.refused(request, status_of(e), str(e))
        self.finder.written()
        self.cache.invalidate(ex, result.topic)
        return RedirectResponse(f"/x/{source.id}/t/{result.topic}", status_code=303)

    # -- chat ----------------------------------------------------------------------------
    def _chat_path(self, request: Request) -> tuple[Source, Path]:
        from mailslot.chat import locate_chat

        source = self.ctx.sources.get(request.path_params["src"])
        return source, locate_chat(source.root, request.path_params["chat"])

    async def chat(self, request: Request) -> Response:
        from mailslot.chat import read, status

        try:
            source, path = self._chat_path(request)
            batch = await in_thread(read, path)
            st = await in_thread(status, path)
        except MailslotError as e:
            return self.refused(request, status_of(e), str(e))
        return self.render(
            request,
            "chat.html",
            title=f"{st.topic or path.name} - chat",
            source=source,
            name=path.name,
            st=st,
            messages=[chat_message(m) for m in batch.messages],
            cursor=batch.cursor,
            summary=chat_summary(st),
        )

    async def chat_events(self, request: Request) -> Response:
        """Server-sent events: each batch of messages appended after ``since`` (the byte cursor
        the page was rendered at, or the browser's ``Last-Event-ID`` on a reconnect)."""
        try:
            _, path = self._chat_path(request)
            since = int(
                request.headers.get("last-event-id") or request.query_params.get("since", "0")
            )
        except (MailslotError, ValueError) as e:
            return self.refused(request, 404 if isinstance(e, MailslotError) else 422, str(e))
        stream = chat_stream(request, path, since, self.ctx.settings.sse_ping, self.sse_limiter)
        return StreamingResponse(
            sse_lines(stream),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def chat_say(self, request: Request) -> Response:
        from mailslot.chat import human_say

        checked = await self.write_form(request, self._chat_path)
        if isinstance(checked, HTMLResponse):
            return checked
        session, form, (source, path) = checked
        back = f"/c/{source.id}/{quote(path.name)}"
        return await self.attempt(
            request, human_say, path, session.human, form.get("body", ""), back=back
        )

    async def chat_answer(self, request: Request) -> Response:
        from mailslot.chat import human_answer

        checked = await self.write_form(request, self._chat_path)
        if isinstance(checked, HTMLResponse):
            return checked
        session, form, (source, path) = checked
        verdict = form.get("verdict", "")
        if verdict not in ("approve", "refuse"):
            return self.refused(request, 422, "verdict must be approve or refuse")
        back = f"/c/{source.id}/{quote(path.name)}"
        return await self.attempt(
            request,
            lambda: human_answer(
                path,
                session.human,
                form.get("author", ""),
                form.get("text", ""),
                approve=verdict == "approve",
            ),
            back=back,
        )

    # -- bus, search -----------------------------------------------------------------------
    async def bus(self, request: Request) -> Response:
        from mailslot.web.page.readers import bus_view

        try:
            source = self.ctx.sources.get(request.path_params["src"])
        except NotFound as e:
            return self.refused(request, 404, str(e))
        if not source.bus:
            return self.refused(request, 404, f"{source.id} holds no bus")
        view = await in_thread(bus_view, source.root, BUS_LOG)
        return self.render(request, "bus.html", title=f"{source.id} - bus", source=source, bus=view)

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        hits: list[dict[str, Any]] = []
        error = None
        if query:
            try:
                found = await in_thread(self._search, query)
            except MailslotError as e:
                error = str(e)
            else:
                hits = [self._hit(h) for h in found]
        return self.render(
            request,
            "search.html",
            status=422 if error else 200,
            title=f"search: {query}" if query else "search",
            query=query,
            hits=hits,
            error=error,
        )

    def _search(self, query: str) -> list[Any]:
        return self.finder.find(query, SEARCH_HITS)

    def _hit(self, hit: Any) -> dict[str, Any]:
        """A search hit as the page shows it: where it links, its snippet in marked pieces."""
        source = next((s for s in self.ctx.sources.all if str(s.root) == hit.root), None)
        src = source.id if source else ""
        if hit.channel == "exchange":
            href = f"/x/{src}/t/{quote(hit.thread)}#e{quote(hit.anchor.removesuffix('.md'))}"
        elif hit.channel == "chat":
            href = f"/c/{src}/{quote(hit.thread)}#m{quote(hit.anchor)}"
        elif hit.channel == "log":
            href = f"/b/{src}#{quote(hit.anchor)}"  # the anchor is L<line> already
        else:
            href = f"/#src-{src}"
        pieces: list[tuple[str, bool]] = []
        at = 0
        for start, end in hit.marks:
            if start < at:
                continue
            pieces += [(hit.snippet[at:start], False), (hit.snippet[start:end], True)]
            at = end
        pieces.append((hit.snippet[at:], False))
        return {"hit": hit, "href": href, "source": src, "pieces": pieces}


def chat_message(m: Any) -> dict[str, Any]:
    """A chat block as the page shows it (and as an event carries it)."""
    from mailslot.chat.status import is_person, message_time

    return {
        "offset": m.offset,
        "from": m.sender,
        "time": message_time(m),
        "body": m.body,
        "kind": m.kind,
        "human": is_person(m.sender),
    }


def _status(path: Path) -> Any:
    from mailslot.chat import status

    return status(path)


class _Step(NamedTuple):
    """One wait of an event stream: the messages after the cursor (None: none came in time),
    the cursor past them, whether the file was read again from its start, and whether the wait
    polled the file (the kernel would not watch it: the inotify watch limit)."""

    batch: Any
    at: ByteCursor
    again: bool
    polling: bool


def _next_batch(path: Path, since: ByteCursor, timeout: float) -> _Step:
    """The messages after ``since`` once there are some (armed before it looks), or None after
    ``timeout`` seconds; and the cursor past them. Once the stream has read the file (the cursor
    knows its inode), a file replaced or cut shorter than the cursor (``ByteCursor.valid_for``,
    the rule ``chat wait`` keeps) is read from its start, also when the swap comes between that
    look and the read; a cursor the client gave that is past the end is refused by ``read``."""
    from mailslot.chat import read
    from mailslot.core.wait import Watch

    at = since
    again = False
    deadline = time.monotonic() + timeout
    with Watch() as watch:
        while True:
            watch.add(path)  # armed before the read: a message landing after it is an event
            try:
                inode: int | None = path.stat().st_ino  # before the read: a swap re-reads
            except OSError:
                inode = None  # removed: ``read`` says so
            start = at.offset if at.inode is None or at.valid_for(path) else 0
            try:
                batch = read(path, start)
            except FormatError:
                if not start or at.inode is None:
                    raise  # the file itself, or a cursor the client gave: ``read`` says which
                continue  # replaced or cut shorter since ``valid_for`` looked: look again
            again = again or start < at.offset
            at = ByteCursor(batch.cursor, inode)
            left = deadline - time.monotonic()
            if batch.messages or left <= 0:
                return _Step(batch if batch.messages else None, at, again, watch.polling)
            watch.wait(left)


def chat_summary(st: Any) -> str:
    """The chat's state in one plain line: messages, who is present, the end handshake, open
    human checks (the page shows it, and each event carries it so the line stays current)."""
    parts = [f"{st.messages} messages", f"present: {', '.join(st.present) or 'nobody'}"]
    if st.ended:
        parts.append(f"ended by mutual agreement at {st.ended_at}")
    elif st.end_request:
        req = st.end_request
        waiting = ", ".join(req.get("waiting_for") or []) or "nobody"
        parts.append(f"end requested by {req['from']}, waiting for {waiting}")
    parts += [f"HUMAN-CHECK open by {c['from']}" for c in st.human_checks]
    return "; ".join(parts)


async def chat_stream(
    request: Request, path: Path, since: int, ping: float, limiter: Any
) -> AsyncIterator[dict[str, Any]]:
    """Each batch appended to the chat after ``since``, as events, until the client goes, the
    chat ends, or its file is removed (one replaced or cut shorter than the cursor is sent again
    from its start, as ``chat wait`` reads it). A worker thread waits at most ``STREAM_STEP_S`` at a
    time, so a stopping server (and a closed tab) is noticed within it."""
    at = ByteCursor(since)
    idle = 0.0
    restart = False  # the file was read again from its start: the page shows it anew
    polling = False  # what the last ``watch`` event said (none sent: events, as expected)
    while not await request.is_disconnected():
        try:
            step = await anyio.to_thread.run_sync(
                _next_batch, path, at, STREAM_STEP_S, limiter=limiter, abandon_on_cancel=True
            )
        except MailslotError as e:
            yield {"event": "gone", "data": {"error": str(e)}}
            return
        batch, at = step.batch, step.at
        restart = restart or step.again
        if step.polling != polling:  # said when it starts and when it ends, never silent
            polling = step.polling
            why = POLLING_WHY if polling else ""
            yield {"event": "watch", "data": {"polling": polling, "why": why}}
        if batch is None:
            idle += STREAM_STEP_S
            if idle >= ping:
                idle = 0.0
                yield {"ping": True}
            continue
        idle = 0.0
        cursor = batch.cursor
        yield {
            "event": "message-batch",
            "id": str(cursor),
            "data": {
                "messages": [chat_message(m) for m in batch.messages],
                "cursor": cursor,
                "ended": batch.ended,
                "restart": restart,
            },
        }
        restart = False
        try:  # after the messages, so reading the status never delays them
            summary = chat_summary(await in_thread(_status, path))
        except MailslotError:
            continue
        yield {"event": "summary", "id": str(cursor), "data": {"summary": summary}}
        if batch.ended:
            return


async def _bounded_body(request: Request) -> bytes | None:
    """The request body, or None once it passes ``guard.FORM_MAX_BYTES`` (never read whole)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > guard.FORM_MAX_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > guard.FORM_MAX_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)

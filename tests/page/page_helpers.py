"""Helpers for the page tests: a realistic world (an exchange with a human, a bus, chats, a peer
inbox) made through the channels' own functions, the page served on a real loopback server,
logging in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from shared_helpers import loopback_server, with_watch_limit

HOSTILE = [
    "<script>window.__pwned = 1; document.title = 'pwned'</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "[click me](javascript:window.__pwned=3)",
    "![beacon](http://127.0.0.1:9/beacon.png)",
    '</p><svg onload="window.__pwned = 4"></svg>',
    '<a href="javascript:window.__pwned=5">x</a> and '
    '<iframe srcdoc="<script>parent.__pwned=6</script>">',
    "[data](data:text/html;base64,PHNjcmlwdD5wYXJlbnQuX19wd25lZD03PC9zY3JpcHQ+)",
]


@dataclass
class World:
    """Roots with realistic data, and the credentials of the humans who may log in."""

    exchange: Path
    bus: Path
    chats: Path
    chat: Path
    humans_file: Path
    tokens: dict[str, str]
    topics: list[str]

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.exchange, self.bus, self.chats)


def make_world(base: Path) -> World:
    from mailslot.bus import log, tasks
    from mailslot.bus.layout import init as bus_init
    from mailslot.chat import check, join, new_chat, say
    from mailslot.exchange.create import create_exchange
    from mailslot.exchange.entries import send
    from mailslot.exchange.state import set_state
    from mailslot.web.page.humans import new_credential
    from mailslot.web.peer import store

    ex = create_exchange(base / "exchange", ["claude", "olu"], humans=["ops:claude"], git=False)
    topics = []
    r = send(
        ex,
        "claude",
        "gate-bug",
        "required",
        "The gate lets **everyone** through.\n\n- step 1\n- step 2",
    )
    topics.append(r.topic)
    send(ex, "olu", r.topic, "fyi", "Looking at it; `gate.py` line 40.")
    r2 = send(ex, "olu", "hostile-bodies", "required", "\n\n".join(HOSTILE))
    topics.append(r2.topic)
    r3 = send(ex, "claude", "release-notes", "fyi", "Notes are in `docs/`.")
    set_state(ex, "claude", r3.topic, "done")
    set_state(ex, "olu", r3.topic, "in-progress")
    topics.append(r3.topic)

    bus = base / "bus"
    bus.mkdir()
    bus_init(bus, consumer="olu")
    log.append(bus, "claude", "woke; read the outbox; nothing new")
    log.append(bus, "olu", "<b>bold</b> claims: shipped the build")
    tasks.add(bus, "review the gate fix", owner="olu")
    tasks.add(bus, "write the changelog")
    from mailslot.web.board import Board, parse_post

    board = Board(bus / "board" / "agora.db")
    board.add(parse_post('{"agent": "reef", "message": "<b>hello</b> board"}'), "10.0.0.9")
    hidden = board.add(parse_post('{"agent": "spam", "message": "buy now"}'), "10.0.0.8")
    board.hide(hidden["id"])
    board.close()
    (bus / "peer" / "inbox").mkdir(parents=True)
    store(bus / "peer" / "inbox", "tidal", "hello", "a peer says hi <script>x</script>")

    chats = base / "chats"
    chats.mkdir()
    state = base / "chat-state"
    opened = new_chat("release plan", chats, "kiran-1", "Let us plan the release.", state=state)
    join(opened.path, "dave-2", "here", state=state)
    say(opened.path, "first: <script>window.__pwned=9</script> tests", "kiran-1", state=state)
    check(opened.path, "May we publish the release today?", "kiran-1", state=state)

    humans = base / "humans.json"
    tokens = {name: new_credential(humans, name) for name in ("ops", "mallory")}
    return World(base / "exchange", bus, chats, opened.path, humans, tokens, topics)


@contextmanager
def serve_page(settings: Any, listen: str = "127.0.0.1") -> Iterator[str]:
    """The page for ``settings`` on ``listen``:<free port>; yields its base URL (on ``listen``).
    Its file watchers are stopped when it stops.

    ``settings.bind_host`` may differ from ``listen``: a page configured for a private address
    is then reached over loopback with that address in ``Host``, as a browser there would."""
    import dataclasses

    from mailslot.web.page.app import create_app

    made: list[Any] = []

    def build(port: int) -> Any:
        made.append(create_app(dataclasses.replace(settings, port=port)))
        return made[-1]

    try:
        with loopback_server(build, settings.server, listen) as url:
            yield url
    finally:
        for app in made:
            app.close()


@contextmanager
def serve_command(
    world: World, *, watch_limit: int | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``mailslot web`` over the world's roots in a process of its own, as people run it, on a
    free loopback port; yields the process and its base URL, and kills it if still running.
    ``watch_limit``: run it with that inotify watch limit (``shared_helpers.with_watch_limit``);
    what it says before it listens is kept in ``proc.said_first``."""
    env = {**os.environ, "MAILSLOT_STATE_DIR": str(world.exchange.parent / "state")}
    argv = (
        [sys.executable, "-m", "mailslot", "web", "--bind", "127.0.0.1:0"]
        + [a for root in world.roots for a in ("--root", str(root))]
        + ["--humans", str(world.humans_file)]
    )
    if watch_limit is not None:
        argv = with_watch_limit(watch_limit, argv)
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        said: list[str] = []
        found = None
        while found is None and len(said) < 20:  # a warning or two may come first
            said.append(proc.stderr.readline())
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", said[-1])
            assert said[-1], said
        assert found, said
        proc.said_first = said[:-1]  # type: ignore[attr-defined]
        yield proc, found.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def login(client: httpx.Client, url: str, token: str) -> str:
    """Log ``client`` in with ``token``; return the session's CSRF token (from a page's form)."""
    form = client.get(f"{url}/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, form.text
    r = client.post(
        f"{url}/login",
        data={"csrf": csrf.group(1), "token": token},
        headers={"Origin": url},
    )
    assert r.status_code == 303, r.text
    page = client.get(f"{url}/")
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, "a logged-in page carries the session's CSRF token"
    return found.group(1)


def login_in_browser(page: Any, url: str, token: str) -> None:
    """Log a browser page in through the login form."""
    page.goto(f"{url}/login", wait_until="load")
    page.fill("#token", token)
    page.click("form.login button")
    page.wait_for_url(f"{url}/")

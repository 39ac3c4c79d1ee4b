"""The chat page: live over server-sent events as other processes write, the end handshake and
human checks shown plainly, and a person who posts and answers a check as themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from page_helpers import World, login, serve_command

from mailslot.chat import end, join, new_chat, read, say, status
from mailslot.core.cursor import ByteCursor
from mailslot.core.errors import MailslotError
from mailslot.web.page.routes import POLLING_WHY, _next_batch


def _until(page: Any, expression: str, timeout: float = 15.0) -> None:
    """Poll ``expression`` in the page until it is true. Not ``wait_for_function``: its
    polling evaluates a string, which the page's CSP (no unsafe-eval) rightly refuses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"not true within {timeout}s: {expression}"
        page.wait_for_timeout(20)


def _chat_url(url: str, world: World) -> str:
    return f"{url}/c/chats/{world.chat.name}"


def _say_from_another_process(chat: Path, name: str, text: str, state: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "mailslot", "chat", "say", str(chat), text, "--as", name],
        check=True,
        capture_output=True,
        env={"MAILSLOT_STATE_DIR": str(state), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


@pytest.mark.browser
def test_a_message_written_by_another_process_appears_without_reload(
    browser: Any, page_url: str, world: World, shots: Path
) -> None:
    page = browser.new_page()
    page.goto(_chat_url(page_url, world), wait_until="load")
    _until(page, "document.getElementById('live-status').textContent === 'live'")
    before = page.locator("#messages li").count()
    page.evaluate("window.__marker = 'same page'")
    state = world.chat.parent.parent / "chat-state"
    _say_from_another_process(world.chat, "dave-2", "<img src=x onerror=alert(1)> hello", state)
    _until(page, f"document.querySelectorAll('#messages li').length > {before}")
    last = page.locator("#messages li").last
    assert last.locator(".from").inner_text() == "dave-2"
    assert last.locator(".text").inner_text() == "<img src=x onerror=alert(1)> hello"
    assert page.locator("#messages img").count() == 0
    assert page.evaluate("window.__marker") == "same page"  # no reload happened
    assert page.locator("#live-summary").inner_text().startswith(f"{before + 1} messages")
    state = world.chat.parent.parent / "chat-state"
    end(world.chat, "request", "wrapping up", "kiran-1", state=state)
    _until(page, "document.getElementById('live-summary').textContent.includes('end requested')")
    assert "waiting for dave-2" in page.locator("#live-summary").inner_text()
    assert "HUMAN-CHECK open by kiran-1" in page.locator("#live-summary").inner_text()
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "chat-live.png"), full_page=True)
    page.close()


def test_the_event_stream_sends_each_batch_after_the_cursor(page_url: str, world: World) -> None:
    start = read(world.chat).cursor
    url = f"{_chat_url(page_url, world)}/events?since={start}"
    with httpx.stream("GET", url, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        state = world.chat.parent.parent / "chat-state"
        _say_from_another_process(world.chat, "kiran-1", "news", state)
        lines = []
        for line in r.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert any(line.startswith("event: message-batch") for line in lines)
    assert not any(line.startswith("event: watch") for line in lines)  # events, not polling
    data = lines[-1]
    assert '"from": "kiran-1"' in data and '"body": "news"' in data


def _events(r: httpx.Response) -> Iterator[tuple[str, Any]]:
    """Each server-sent event of ``r`` as (event, its data decoded)."""
    event = ""
    for line in r.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            yield event, json.loads(line[6:])


def test_past_the_watch_limit_the_stream_polls_and_says_so(world: World) -> None:
    """A real inotify watch limit (0, in a user namespace of its own): the chat file cannot be
    watched, and the stream says it polls before anything else, then still delivers."""
    with serve_command(world, watch_limit=0) as (_, url):
        start = read(world.chat).cursor
        with httpx.stream("GET", f"{_chat_url(url, world)}/events?since={start}", timeout=30) as r:
            events = _events(r)
            assert next(events) == ("watch", {"polling": True, "why": POLLING_WHY})
            state = world.chat.parent.parent / "chat-state"
            _say_from_another_process(world.chat, "kiran-1", "polled news", state)
            event, data = next(events)
            assert event == "message-batch" and data["messages"][-1]["body"] == "polled news"


@pytest.mark.browser
def test_the_page_says_when_it_polls(browser: Any, world: World) -> None:
    with serve_command(world, watch_limit=0) as (_, url):
        page = browser.new_page()
        page.goto(_chat_url(url, world), wait_until="load")
        _until(page, "document.getElementById('live-status').textContent.includes('polled')")
        assert "inotify watch limit" in page.locator("#live-status").inner_text()
        before = page.locator("#messages li").count()
        state = world.chat.parent.parent / "chat-state"
        _say_from_another_process(world.chat, "dave-2", "still live", state)
        _until(page, f"document.querySelectorAll('#messages li').length > {before}")
        assert page.locator("#live-status").inner_text().startswith("live, polled")
        page.close()


def test_a_person_posts_and_is_not_a_participant(page_url: str, world: World) -> None:
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        r = client.post(
            f"{_chat_url(page_url, world)}/say",
            data={"csrf": csrf, "body": "I am watching; carry on."},
            headers={"Origin": page_url},
        )
        assert r.status_code == 303, r.text
    messages = read(world.chat).messages
    assert messages[-1].sender == "human:ops" and messages[-1].body == "I am watching; carry on."
    st = status(world.chat)
    assert "human:ops" not in st.participants
    state = world.chat.parent.parent / "chat-state"
    end(world.chat, "request", "done", "kiran-1", state=state)
    st = end(world.chat, "accept", None, "dave-2", state=state)
    assert st.ended  # nobody waited for the person


def test_a_person_approves_a_human_check(page_url: str, world: World, shots: Path) -> None:
    assert status(world.chat).human_check is not None
    with httpx.Client() as client:
        csrf = login(client, page_url, world.tokens["ops"])
        r = client.post(
            f"{_chat_url(page_url, world)}/answer",
            data={"csrf": csrf, "author": "kiran-1", "verdict": "refuse", "text": "not today"},
            headers={"Origin": page_url},
        )
        assert r.status_code == 303, r.text
        assert status(world.chat).human_check is not None  # a refusal keeps the agents holding
        assert "REFUSED kiran-1's human check" in read(world.chat).messages[-1].body
        r = client.post(
            f"{_chat_url(page_url, world)}/answer",
            data={"csrf": csrf, "author": "kiran-1", "verdict": "approve", "text": "publish"},
            headers={"Origin": page_url},
        )
        assert r.status_code == 303, r.text
        again = client.post(
            f"{_chat_url(page_url, world)}/answer",
            data={"csrf": csrf, "author": "kiran-1", "verdict": "approve", "text": "twice"},
            headers={"Origin": page_url},
        )
        assert again.status_code == 409
    last = read(world.chat).messages[-1]
    assert last.sender == "human:ops" and last.body.startswith("---HUMAN-APPROVED--- @kiran-1")
    assert status(world.chat).human_check is None


def test_a_chat_post_needs_a_login_and_its_token(page_url: str, world: World) -> None:
    before = len(read(world.chat).messages)
    r = httpx.post(
        f"{_chat_url(page_url, world)}/say",
        data={"body": "anonymous"},
        headers={"Origin": page_url},
    )
    assert r.status_code == 401
    with httpx.Client() as client:
        login(client, page_url, world.tokens["ops"])
        r = client.post(
            f"{_chat_url(page_url, world)}/say",
            data={"body": "no token"},
            headers={"Origin": page_url},
        )
        assert r.status_code == 403
    assert len(read(world.chat).messages) == before


def test_a_new_participant_joining_is_shown_live_in_the_status(page_url: str, world: World) -> None:
    state = world.chat.parent.parent / "chat-state"
    join(world.chat, "lena-3", "hi", state=state)
    html = httpx.get(_chat_url(page_url, world)).text
    assert "lena-3" in html and "HUMAN-CHECK open by kiran-1" in html


def test_a_chat_replaced_between_the_streams_look_and_its_read_is_read_from_its_start(
    tmp_path: Path,
) -> None:
    """The stream looks whether its cursor still holds (the same file, not shorter), then
    reads: a shorter file swapped in between is read from its start, never refused as a
    cursor past the end (which ends the stream). A thread swaps two files in and out."""
    path = new_chat("race", tmp_path, "alice").path
    join(path, "bob")
    short = tmp_path / "short"
    short.write_bytes(path.read_bytes())
    for i in range(5):
        say(path, f"message {i}", "alice")
    long = tmp_path / "long"
    os.link(path, long)
    at = ByteCursor(read(path).cursor, path.stat().st_ino)  # the stream read it to its end
    stop = threading.Event()

    def swap() -> None:
        n = 0
        while not stop.is_set():
            for kept in (short, long):  # the same two files, each under the name in turn
                tmp = tmp_path / f".swap-{n}"
                n += 1
                os.link(kept, tmp)
                os.replace(tmp, path)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    refused = []
    try:
        for _ in range(400):  # about 1 in 12 read a swapped file before the fix
            try:
                step = _next_batch(path, at, 0.0)
            except MailslotError as e:
                refused.append(str(e))
            else:
                assert step.batch is None or step.again  # nothing new, or all of it anew
            time.sleep(0.002)  # each look's watch is let go before too many are open
    finally:
        stop.set()
        swapper.join()
    assert refused == []


@pytest.mark.parametrize("how", ["cut in place", "replaced"])
def test_the_event_stream_reads_a_chat_cut_shorter_or_replaced_from_its_start(
    page_url: str, world: World, how: str
) -> None:
    data = world.chat.read_bytes()
    start = read(world.chat).cursor
    first = data[: data.index(b"\n---MSG---", 1)]  # the opening message alone: shorter
    url = f"{_chat_url(page_url, world)}/events?since={start}"
    state = world.chat.parent.parent / "chat-state"
    with httpx.stream("GET", url, timeout=30) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        _say_from_another_process(world.chat, "dave-2", "before the cut", state)
        assert any("before the cut" in line for line in lines)  # the stream has read the file
        if how == "cut in place":
            with open(world.chat, "r+b") as f:
                f.truncate(len(first))
        else:
            fresh = world.chat.with_name(".fresh")
            fresh.write_bytes(first)
            os.replace(fresh, world.chat)
        _say_from_another_process(world.chat, "kiran-1", "after the cut", state)
        events: list[tuple[str, str]] = []
        event = ""
        for line in lines:
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((event, line))
                if event == "gone" or "after the cut" in line:
                    break
    assert "gone" not in [e for e, _ in events], events
    sent = "".join(d for _, d in events)
    assert "Let us plan the release." in sent and "after the cut" in sent
    batches = [json.loads(d[5:]) for e, d in events if e == "message-batch"]
    assert batches[0]["restart"] and batches[0]["messages"][0]["offset"] == 0
    assert not any(b["restart"] for b in batches[1:])


@pytest.mark.browser
def test_the_page_shows_a_cut_chat_anew_without_reload(
    browser: Any, page_url: str, world: World
) -> None:
    page = browser.new_page()
    page.goto(_chat_url(page_url, world), wait_until="load")
    _until(page, "document.getElementById('live-status').textContent === 'live'")
    state = world.chat.parent.parent / "chat-state"
    _say_from_another_process(world.chat, "dave-2", "before the cut", state)
    _until(page, "document.getElementById('messages').textContent.includes('before the cut')")
    data = world.chat.read_bytes()
    with open(world.chat, "r+b") as f:
        f.truncate(data.index(b"\n---MSG---", 1))  # the opening message alone
    _say_from_another_process(world.chat, "kiran-1", "after the cut", state)
    _until(page, "document.getElementById('messages').textContent.includes('after the cut')")
    texts = page.locator("#messages li .text").all_inner_texts()
    assert len(texts) == 2 and texts[1] == "after the cut", texts
    assert "before the cut" not in "".join(texts)
    page.close()

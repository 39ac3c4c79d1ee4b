"""What the views say, over real HTTP: the doctor's verdict and the tick's heartbeat on the
overview, the time picture, the table's filters and pages."""

from __future__ import annotations

import dataclasses
import html
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx
from page_helpers import World, serve_command, serve_page

from mailslot.exchange.layout import load_exchange
from mailslot.web.page.settings import PageSettings


def test_the_overview_says_the_doctor_has_not_run_until_it_has(
    run_cli, page_url: str, world: World
) -> None:
    assert '<span class="doctor">not run</span>' in httpx.get(f"{page_url}/").text
    r = run_cli("exchange", "doctor", "--root", str(world.exchange), "--json")
    verdict = "ok" if r.returncode == 0 else "failed"
    shown = re.search(r'<span class="doctor">([^<]*)</span>', httpx.get(f"{page_url}/").text)
    assert shown and shown.group(1).startswith(verdict), (r.returncode, shown)


def test_the_overview_shows_the_ticks_heartbeat(run_cli, page_url: str, world: World) -> None:
    assert "never ran" in httpx.get(f"{page_url}/").text
    r = run_cli("exchange", "tick", "--root", str(world.exchange))
    assert r.returncode == 0, r.stderr
    html = httpx.get(f"{page_url}/").text
    assert "never ran" not in html and re.search(r"\(0 min ago\)", html)


def test_the_time_picture_counts_entries_and_waits(page_url: str, world: World) -> None:
    html = httpx.get(f"{page_url}/x/exchange").text
    assert html.count('<svg class="picture') == 2
    entries = re.search(r'<svg class="picture entries".*?</svg>', html, re.S)
    assert entries
    counts = [int(float(n)) for n in re.findall(r": ([0-9.]+) entries</title>", entries.group(0))]
    assert sum(counts) == 4  # every entry of the world was written today
    waits = re.search(r'<svg class="picture waits".*?</svg>', html, re.S)
    # gate-bug was answered, within the test's run
    assert waits and re.search(r": under a minute</title>", waits.group(0))
    assert "1 required entries still unanswered" in html  # hostile-bodies was not
    assert "<script" not in entries.group(0)


def test_the_table_pages_and_filters(world: World) -> None:
    from mailslot.exchange.entries import send

    ex = load_exchange(world.exchange)
    for i in range(5):
        send(ex, "olu", f"extra-{i}", "fyi", f"note {i}")
    settings = dataclasses.replace(PageSettings(world.roots, world.humans_file), rows=3)
    with serve_page(settings) as url:
        first = httpx.get(f"{url}/x/exchange").text
        assert "8 topics, page 1 of 3" in first
        assert first.count('<tr class="live') == 3
        last = httpx.get(f"{url}/x/exchange?page=3").text
        assert last.count('<tr class="live') == 2
        waiting = httpx.get(f"{url}/x/exchange?filter=waiting").text
        assert "2 topics" in waiting  # the two required entries nobody answered yet
        assert "no topics here" in httpx.get(f"{url}/x/exchange?filter=held").text
        archived = httpx.get(f"{url}/x/exchange?filter=archived").text
        assert "no topics here" in archived


def test_the_table_follows_writes_made_elsewhere(page_url: str, world: World) -> None:
    from mailslot.exchange.entries import send
    from mailslot.exchange.state import set_state

    ex = load_exchange(world.exchange)
    assert "owed by" in httpx.get(f"{page_url}/x/exchange").text  # the view is built and kept
    r = send(ex, "claude", "fresh-topic", "required", "new work")
    html = httpx.get(f"{page_url}/x/exchange").text
    assert r.topic in html and f"olu: reply {r.path.name}" in html
    set_state(ex, "olu", world.topics[2], "done")
    row = re.search(
        rf"<tr[^>]*>\s*<th scope=\"row\"><a[^>]*>{world.topics[2]}</a>.*?</tr>",
        httpx.get(f"{page_url}/x/exchange").text,
        re.S,
    )
    assert row and row.group(0).count("status-done") == 2


def test_the_overview_shows_the_bridge_once_one_is_set_up(
    run_cli, page_url: str, world: World, tmp_path, monkeypatch
) -> None:
    assert 'id="bridge"' not in httpx.get(f"{page_url}/").text
    bridge = tmp_path / "bridge"
    r = run_cli("bridge", "init", "--dir", str(bridge), "--host", "hq", "--peer", "lab")
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("MAILSLOT_BRIDGE_DIR", str(bridge))  # the page runs in this process
    html = httpx.get(f"{page_url}/").text
    assert 'id="bridge"' in html and "host hq" in html and "not running" in html


def _rows(view: Any) -> list[tuple[Any, ...]]:
    return [dataclasses.astuple(r) for r in view.rows]


def test_the_kept_table_agrees_with_a_fresh_reading_after_each_kind_of_change(
    world: World,
) -> None:
    """The table kept from file events (reading again only the topics that changed) says what
    a reading of the whole exchange says, after new topics and entries, states, a STATE.md
    that does not read, an archive (a move into done/ on both sides) and a topic removed."""
    import shutil

    from mailslot.exchange.entries import send
    from mailslot.exchange.layout import DONE
    from mailslot.exchange.state import set_state
    from mailslot.web.page.views import ViewCache

    ex = load_exchange(world.exchange)
    kept = ViewCache()
    try:
        kept.exchange(ex)  # built once and followed from here
        changes = [
            lambda: send(ex, "claude", "fresh-topic", "required", "new work"),
            lambda: send(ex, "olu", world.topics[0], "required", "one more question"),
            lambda: set_state(ex, "olu", world.topics[1], "blocked"),
            lambda: (ex.inbox("claude") / world.topics[1] / "STATE.md").write_text("status: X\n"),
            lambda: [
                os.rename(ex.inbox(s) / world.topics[2], ex.inbox(s) / DONE / world.topics[2])
                for s in ex.sides
            ],
            lambda: shutil.rmtree(ex.inbox("olu") / world.topics[0]),
        ]
        for change in changes:
            change()
            deadline = time.monotonic() + 10
            while True:
                fresh = ViewCache()
                want = fresh.exchange(ex)
                fresh.close()
                got = kept.exchange(ex)
                if _rows(got) == _rows(want) and got.warnings == want.warnings:
                    break
                assert time.monotonic() < deadline, (_rows(got), _rows(want))
                time.sleep(0.02)
            assert (got.open_count, got.debt_count) == (want.open_count, want.debt_count)
        assert any(r.where == "archived" for r in got.rows) and got.warnings
    finally:
        kept.close()


def test_events_lost_to_a_full_kernel_queue_read_the_whole_exchange_again(world: World) -> None:
    """The page's process stopped while more events than the kernel queues arrive: the queue
    overflows, and the new entry written after it has no event at all. Once the process runs
    again the page still shows it (events lost read the whole exchange again)."""
    from mailslot.exchange.entries import send

    queue = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    ex = load_exchange(world.exchange)
    busy = ex.inbox("olu") / world.topics[0]
    files = [busy / "scratch-a.txt", busy / "scratch-b.txt"]
    for f in files:
        f.write_text("x")
    with serve_command(world) as (proc, url):
        assert "olu: reply" not in httpx.get(f"{url}/x/exchange").text  # built and watched
        proc.send_signal(signal.SIGSTOP)
        try:
            for i in range(queue + 100):  # alternating names: the kernel merges no two
                os.utime(files[i % 2], (i, i))
            r = send(ex, "claude", "after-the-flood", "required", "lost in the overflow")
        finally:
            proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 20
        while f"olu: reply {r.path.name}" not in httpx.get(f"{url}/x/exchange").text:
            assert time.monotonic() < deadline, "the entry written after the overflow never showed"
            time.sleep(0.05)


def test_an_exchange_past_the_watch_limit_is_polled_and_the_page_says_so(world: World) -> None:
    """A real inotify watch limit of 0 (a user namespace of its own): no directory can be
    watched, the view still follows the files, and the page says why it is polled."""
    from mailslot.exchange.entries import send
    from mailslot.web.page.routes import EXCHANGE_POLLED

    with serve_command(world, watch_limit=0) as (_, url):
        first = httpx.get(f"{url}/x/exchange").text
        assert html.escape(EXCHANGE_POLLED) in first
        r = send(load_exchange(world.exchange), "claude", "polled-topic", "fyi", "still shown")
        deadline = time.monotonic() + 20
        while r.topic not in httpx.get(f"{url}/x/exchange").text:
            assert time.monotonic() < deadline, "a change to a polled exchange never showed"
            time.sleep(0.05)
    with serve_command(world) as (_, url):
        assert 'id="polled"' not in httpx.get(f"{url}/x/exchange").text

"""What the views say, over real HTTP: the doctor's verdict and the tick's heartbeat on the
overview, the time picture, the table's filters and pages."""

from __future__ import annotations

import dataclasses
import re

import httpx
from page_helpers import World, serve_page

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

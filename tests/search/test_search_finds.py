"""Search finds every kind of message, names it by transport and links to it in its thread."""

from __future__ import annotations

import json

import pytest
from search_helpers import Roots, links

from mailslot.core.errors import InvalidValue, LimitExceeded, NotFound
from mailslot.exchange import send
from mailslot.search import Hit, search


def test_every_channel_is_searched_and_each_hit_names_its_message(roots: Roots) -> None:
    hits = search(roots.all, "gate")
    by_channel = {h.channel: h for h in hits}
    assert set(by_channel) == {"exchange", "chat", "log", "peer"}

    entry = next(h for h in hits if h.name == "0001-claude.md")
    assert entry.root == str(roots.ex.root)
    assert entry.thread.endswith("-gate-bug")
    assert entry.sender == "claude"
    assert entry.at is not None and entry.at.endswith("Z")
    assert entry.link == f"to-olu/{entry.thread}/0001-claude.md#0001-claude"
    assert (roots.ex.root / entry.path).is_file()
    assert entry.snippet.startswith("The gate rejects")
    start, end = entry.marks[0]
    assert entry.snippet[start:end] == "gate"

    said = by_channel["chat"]
    assert said.thread == roots.chat_file.name and said.sender == "alice"
    assert said.path == roots.chat_file.name
    offset = int(said.anchor)
    assert roots.chat_file.read_bytes()[offset:].lstrip(b"\r\n").startswith(b"---MSG---")

    line = by_channel["log"]
    assert line.sender == "beacon" and line.link.startswith("LOG.md#L")
    n = int(line.anchor[1:])
    assert "gate card" in (roots.bus / "LOG.md").read_text().split("\n")[n - 1]

    item = by_channel["peer"]
    assert item.sender == "lantern" and item.thread == "inbox"
    assert (roots.bus / item.path).is_file() and item.anchor in item.path


def test_the_words_must_all_appear_and_a_phrase_in_order(roots: Roots) -> None:
    assert links(roots.all, "gate tuesday") == [links(roots.all, "tuesday")[0]]
    assert links(roots.all, '"valid tokens"') and not links(roots.all, '"tokens valid"')
    assert links(roots.all, "rollout") and not links(roots.all, "rollout tuesday")


def test_prefix_stem_and_accents_match(roots: Roots) -> None:
    assert links(roots.all, "turnst*") == links(roots.all, "turnstile")
    assert links(roots.all, "rejecting")  # 'rejects' by its stem
    assert links(roots.all, "TUESDAY")


def test_exclusions_and_filters_narrow_the_hits(roots: Roots) -> None:
    everything = search(roots.all, "gate")
    assert {h.sender for h in search(roots.all, "gate from:OLU")} == {"olu"}
    assert {h.channel for h in search(roots.all, "gate in:log in:peer")} == {"log", "peer"}
    not_tuesday = search(roots.all, "gate -tuesday")
    assert len(not_tuesday) == len(everything) - 1
    assert all("Tuesday" not in h.snippet for h in not_tuesday)
    assert search(roots.all, "gate from:nobody") == []


def test_the_topic_name_is_searchable_and_weighs_more(roots: Roots) -> None:
    hits = search([roots.ex.root], "bug")
    assert {h.thread for h in hits} == {hits[0].thread} and len(hits) == 2


def test_limit_keeps_the_best(roots: Roots) -> None:
    assert len(search(roots.all, "gate", limit=2)) == 2
    assert search(roots.all, "gate", limit=2) == search(roots.all, "gate")[:2]
    with pytest.raises(LimitExceeded):
        search(roots.all, "gate", limit=0)
    with pytest.raises(LimitExceeded):
        search(roots.all, "gate", limit=501)


def test_a_root_with_nothing_to_search_is_refused(roots: Roots, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotFound, match="nothing to search"):
        search([roots.ex.root, empty], "gate")
    with pytest.raises(NotFound):
        search([tmp_path / "missing"], "gate")


def test_a_query_with_nothing_to_look_for_is_refused(roots: Roots) -> None:
    for text in ("", "   ", "-gate", "from:olu", '""', "in:exchange", "!!! ..."):
        with pytest.raises(InvalidValue):
            search(roots.all, text)
    with pytest.raises(InvalidValue, match="unknown channel"):
        search(roots.all, "gate in:mail")


def test_hits_are_named_records_and_json_ready(roots: Roots) -> None:
    hit = search(roots.all, "tuesday")[0]
    assert isinstance(hit, Hit)
    data = json.loads(json.dumps(hit.to_json()))
    assert data["link"] == hit.link and data["marks"] == [list(m) for m in hit.marks]
    assert set(data) >= {"channel", "root", "thread", "name", "sender", "at", "snippet", "link"}
    assert data["location"] == f"{hit.root}/{hit.link}"  # an added field; the others keep theirs


def test_with_one_root_the_printed_links_open_from_any_directory(
    roots: Roots, run_cli, tmp_path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for root in roots.all:
        out = run_cli("search", "gate", "--root", str(root), cwd=elsewhere)
        assert out.returncode == 0, out.stderr
        printed = [line.strip() for line in out.stdout.splitlines() if line.startswith("  /")]
        assert printed and len(printed) == out.stdout.count("\n  | "), out.stdout
        for where in printed:
            assert (elsewhere / where.partition("#")[0]).is_file(), where


def test_cli_prints_hits_and_json(roots: Roots, run_cli) -> None:
    args = ["search", "gate", *(a for r in roots.all for a in ("--root", str(r)))]
    out = run_cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {h["channel"] for h in data["hits"]} == {"exchange", "chat", "log", "peer"}
    text = run_cli(*args, "--limit", "1")
    assert text.returncode == 0 and "[gate]" in text.stdout and text.stdout.count("\n  | ") == 1
    env_root = run_cli("search", "tuesday", env={"MAILSLOT_ROOT": str(roots.ex.root)})
    assert env_root.returncode == 0 and "0001-claude.md" in env_root.stdout
    nothing = run_cli("search", "zebra", "--root", str(roots.ex.root))
    assert nothing.returncode == 0 and nothing.stdout.strip() == "no match"


def test_cli_refusals_are_one_line_and_exit_1(roots: Roots, run_cli, tmp_path) -> None:
    bad = run_cli("search", "gate in:mail", "--root", str(roots.ex.root))
    assert bad.returncode == 1 and bad.stderr.startswith("mailslot: error:")
    assert len(bad.stderr.strip().splitlines()) == 1
    none = run_cli("search", "--root", str(roots.ex.root))
    assert none.returncode == 1 and "QUERY" in none.stderr
    empty = run_cli("search", "gate", "--root", str(tmp_path))
    assert empty.returncode == 1 and "nothing to search" in empty.stderr
    both = run_cli("search", "gate", "--reindex", "--root", str(roots.ex.root))
    assert both.returncode == 2


def test_past_the_rank_window_the_newest_matches_are_ranked(roots: Roots, monkeypatch) -> None:
    from mailslot.search import store

    search(roots.all, "gate")  # indexed first: older than what follows
    for i in range(6):
        send(roots.ex, "olu", "gate-bug", "fyi", f"gate note {i}")
    everything = search(roots.all, "gate", limit=50)
    monkeypatch.setattr(store, "RANK_WINDOW", 4)
    newest = search([roots.ex.root], "gate", limit=50)
    assert len(newest) == 4
    assert {h.name for h in newest} == {f"{n:04d}-olu.md" for n in range(5, 9)}  # 3..8 are new
    assert len(search([roots.ex.root], "gate from:olu", limit=50)) == 4
    assert len(everything) == 11  # 8 entries, the chat, the LOG line, the peer message


def test_the_window_holds_the_newest_by_message_time_not_by_indexing(
    roots: Roots, monkeypatch
) -> None:
    from search_helpers import hand_entry

    from mailslot.search import store

    search(roots.all, "gate")
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    hand_entry(topic, 9, "olu", "gate from long ago", "2020-01-01T00:00:00Z")  # indexed last
    hand_entry(topic, 10, "olu", "gate from the future", "2099-01-01T00:00:00Z")
    monkeypatch.setattr(store, "RANK_WINDOW", 2)
    names = {h.name for h in search([roots.ex.root], "gate")}
    assert "0009-olu.md" not in names  # old, though the newest to arrive in the index
    assert "0010-olu.md" in names  # a time in the future counts as now, not as forever newest


def test_sender_and_channel_filters_are_exact(roots: Roots) -> None:
    with roots.chat_file.open("a") as f:
        f.write("\n---MSG---\nFROM: kiran-48291\nTIME: 2026-11-29T18:14:00Z\n---\ngate talk\n")
        f.write("\n---MSG---\nFROM: kiran 48291\nTIME: 2026-11-29T18:14:01Z\n---\ngate talk\n")
    (hit,) = search(roots.all, "gate from:kiran-48291")
    assert hit.sender == "kiran-48291"
    assert {h.channel for h in search(roots.all, "gate in:chat")} == {"chat"}
    assert search(roots.all, "exchange in:peer") == []  # a channel's name is not a word of it


def test_a_query_past_its_time_budget_is_refused(roots: Roots, monkeypatch) -> None:
    from mailslot.search import store

    search(roots.all, "gate")
    monkeypatch.setattr(store, "QUERY_SECONDS", 0.0)
    monkeypatch.setattr(store, "PROGRESS_STEPS", 1)
    with pytest.raises(LimitExceeded, match="seconds"):
        search(roots.all, "gate", fresh=False)

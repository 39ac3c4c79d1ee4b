"""Hostile content: query syntax from users, huge files, bytes that are not UTF-8, symlinks, FIFOs
and control characters never break a search, leak a file or stall a refresh."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_helpers import Roots, hand_entry, links

from mailslot.core.errors import InvalidValue, LimitExceeded
from mailslot.search import parse_query, refresh, search
from mailslot.search import sources as search_sources
from mailslot.search.store import Index

SECRET = "xylophonesecret"


def test_fts_syntax_in_a_query_is_searched_for_never_obeyed(roots: Roots) -> None:
    from mailslot.exchange import send

    send(roots.ex, "olu", "gate-bug", "fyi", 'NEAR(alpha beta) title:gamma "quoted ^delta OR')
    for text in ("NEAR(alpha", "title:gamma", "^delta", '"quoted', "OR", "alpha OR", "beta)"):
        hits = search([roots.ex.root], text)
        assert [h.name for h in hits] == ["0003-olu.md"], text
    assert search([roots.ex.root], "alpha OR gamma")  # OR is a word here, as is every word
    assert not search([roots.ex.root], "alpha OR zebra")  # not 'either'
    assert not search([roots.ex.root], "alpha NOT gamma")  # not 'but not'
    assert parse_query("a*b* c'd").match == '"a*b"* AND "c\'d"'
    assert parse_query("alpha\x00beta").match == '"alpha" AND "beta"'


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(min_size=0, max_size=80))
def test_any_text_is_a_valid_query_or_a_clear_refusal(roots: Roots, text: str) -> None:
    try:
        q = parse_query(text)
    except (InvalidValue, LimitExceeded):
        return
    with Index(roots.ex.root) as index:
        index.query(q, 5)  # FTS5 never sees syntax it cannot parse


def test_query_bounds_are_refused_whole() -> None:
    with pytest.raises(LimitExceeded):
        parse_query("a" * 501)
    with pytest.raises(LimitExceeded):
        parse_query(" ".join(["word"] * 33))
    with pytest.raises(InvalidValue):
        parse_query("a*")  # a prefix this short would match most of the index
    assert parse_query(" ".join(["word"] * 32)).match.count('"word"') == 32


def test_symlinks_never_bring_a_file_into_the_index(roots: Roots, tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(f"---MSG---\nFROM: x\nTIME: y\n---\n{SECRET}\n\n")
    (roots.chats / "chat-evil.txt").symlink_to(secret)
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    (topic / "0009-olu.md").symlink_to(secret)
    (roots.ex.inbox("claude") / "2026-11-29-linked").symlink_to(topic)
    (roots.bus / "peer" / "inbox" / "20261129T000000.000Z-x-00000000.json").symlink_to(secret)
    log_md = roots.bus / "LOG.md"
    log_md.unlink()
    log_md.symlink_to(secret)
    reports = [refresh(r) for r in roots.all]
    assert not links(roots.all, SECRET)
    problems = [p for r in reports for p in r.problems]
    assert any("chat-evil.txt" in p for p in problems) and any("LOG.md" in p for p in problems)
    assert links(roots.all, "tuesday")  # the rest is indexed


def test_a_fifo_named_like_a_message_does_not_stall_a_refresh(roots: Roots) -> None:
    os.mkfifo(roots.chats / "chat-2026-11-29-000000.txt")
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    os.mkfifo(topic / "0009-olu.md")
    os.mkfifo(roots.bus / "peer" / "inbox" / "20261129T000000.000Z-x-00000000.json")
    assert links(roots.all, "tuesday")  # returns (pytest's timeout would end a blocked read)
    assert links([roots.bus], "turnstile")


def test_huge_files_are_refused_never_truncated(roots: Roots, monkeypatch) -> None:
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    hand_entry(topic, 9, "olu", "elephant " * 60_000, "2026-11-29T18:14:00Z")  # 540 KB
    assert not links([roots.ex.root], "elephant")
    assert links([roots.ex.root], "tuesday")
    monkeypatch.setattr(search_sources, "APPEND_READ_MAX", 4096)
    big = roots.chats / "chat-2026-11-29-999999.txt"
    big.write_text(
        "".join(f"---MSG---\nFROM: a\nTIME: t\n---\nmammoth {i}\n\n" for i in range(200))
    )
    report = refresh(roots.chats)
    assert any(big.name in p and "at most" in p for p in report.problems)
    assert not links([roots.chats], "mammoth") and links([roots.chats], "rollout")


def test_bytes_that_are_not_utf8_are_indexed_as_replacement_characters(roots: Roots) -> None:
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    (topic / "0009-olu.md").write_bytes(
        b"---\nfrom: olu\nat: 2026-11-29T18:14:00Z\naction: fyi\n---\nbad \xff\xfe bytes okapi\n"
    )
    with roots.chat_file.open("ab") as f:
        f.write(b"\n---MSG---\nFROM: bob\xff\nTIME: 2026-11-29T18:14:00Z\n---\nnarwhal \xc3\x28\n")
    with (roots.bus / "LOG.md").open("ab") as f:
        f.write(b"2026-11-29T18:14:03Z \xe2\x80\x94 [Bob] w01: ibex \xff here\n")
    record = b'{"from": "x", "body": "\xff tapir", "received_at": "2026-11-29T18:14:00Z"}'
    (roots.bus / "peer" / "inbox" / "20261129T000000.000Z-x-00000000.json").write_bytes(record)
    for word in ("okapi", "narwhal", "ibex"):
        (hit,) = search(roots.all, word)
        assert "\ufffd" in hit.snippet, word
    assert not links(roots.all, "tapir")  # a peer record that does not parse has no body
    assert search(roots.all, "narwhal")[0].sender == "bob\ufffd"


def test_control_characters_cannot_forge_a_highlight(roots: Roots) -> None:
    topic = next(roots.ex.inbox("claude").glob("*-gate-bug"))
    # by hand: exchange send refuses a NUL, a hand agent can still write one
    body = "plain \x02fake\x03 marks around quagga\x00"
    hand_entry(topic, 9, "olu", body, "2026-11-29T18:14:00Z")
    (hit,) = search([roots.ex.root], "quagga")
    assert "\x02" not in hit.snippet and "\x03" not in hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.marks] == ["quagga"]


def test_a_file_that_is_not_a_chat_is_reported_not_indexed(roots: Roots) -> None:
    (roots.chats / "chat-notes.txt").write_text(f"shopping list: {SECRET}\n")
    report = refresh(roots.chats)
    assert any("chat-notes.txt" in p and "not a chat" in p for p in report.problems)
    assert not links([roots.chats], SECRET)


def test_a_peer_record_that_does_not_parse_is_kept_out_of_results(roots: Roots) -> None:
    inbox = roots.bus / "peer" / "inbox"
    (inbox / "20261129T000000.000Z-x-00000001.json").write_text(json.dumps([SECRET]))
    assert not links([roots.bus], SECRET)
    assert links([roots.bus], "turnstile")

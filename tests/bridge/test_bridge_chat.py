"""A chat across hosts: every host ends with the same messages, each once and whole, each
sender's in order; a name belongs to the host where it joined; the end handshake works across."""

from __future__ import annotations

import hashlib
import json

from bridge_helpers import chat_messages, cli, publish_raw, wait_for


def _say(host, name: str, text: str) -> None:
    cli("chat", "say", str(host.chat), text, "--as", name)


def _same(pair) -> bool:
    a, b = chat_messages(pair.a), chat_messages(pair.b)
    return sorted(a) == sorted(b) and len(a) > 0


def test_a_chat_converges_across_hosts_through_a_partition_and_ends_by_handshake(pair) -> None:
    cli("chat", "join", str(pair.a.chat), "hello from a", "--as", "alice")
    cli("chat", "join", str(pair.b.chat), "hello from b", "--as", "bob")
    wait_for(lambda: _same(pair) and len(chat_messages(pair.a)) == 2, what="joins on both")
    pair.proxy.cut()
    for i in range(4):
        _say(pair.a, "alice", f"alice {i}")
        _say(pair.b, "bob", f"bob {i}")
    assert len(chat_messages(pair.a)) == 6  # each host keeps talking to itself
    pair.proxy.heal()
    wait_for(lambda: _same(pair) and len(chat_messages(pair.a)) == 10, 30, "convergence")
    for host in (pair.a, pair.b):
        msgs = chat_messages(host)
        assert len(set(msgs)) == len(msgs)  # each exactly once
        for who in ("alice", "bob"):  # each sender's in its order
            mine = [body for sender, _, body in msgs if sender == who]
            assert mine[1:] == [f"{who} {i}" for i in range(4)]
    cli("chat", "end", str(pair.a.chat), "request", "we are done", "--as", "alice")
    wait_for(lambda: len(chat_messages(pair.b)) == 11, what="the end request on b")
    cli("chat", "end", str(pair.b.chat), "accept", "--as", "bob")
    for host in (pair.a, pair.b):

        def ended(h=host) -> bool:
            out = cli("chat", "status", str(h.chat), "--json")
            return bool(json.loads(out.stdout)["ended"])

        wait_for(ended, what=f"the chat ended on {host.name}")


def test_a_peer_speaking_under_a_name_another_host_holds_is_refused(pair) -> None:
    cli("chat", "join", str(pair.a.chat), "hi", "--as", "alice")
    wait_for(lambda: len(chat_messages(pair.b)) == 1, what="alice's join on b")
    forged = b"\n---MSG---\nFROM: alice\nTIME: 2026-12-01T10:00:00.000Z\n---\nI am alice\n"
    headers = {"Mailslot-Sha256": hashlib.sha256(forged).hexdigest()}
    publish_raw(pair.b.url, "ms.b.room.c.999999", forged, headers)
    half = b"\n---MSG---\nFROM: mallory\n"
    publish_raw(
        pair.b.url,
        "ms.b.room.c.1000000",
        half,
        {"Mailslot-Sha256": hashlib.sha256(half).hexdigest()},
    )
    wait_for(lambda: pair.a.status().get("refused", 0) >= 2, what="both refused")
    assert [m[2] for m in chat_messages(pair.a)] == [chat_messages(pair.b)[0][2]]
    assert all("I am alice" not in m[2] for m in chat_messages(pair.a))


def test_a_killed_bridge_neither_loses_nor_doubles_chat_messages(pair) -> None:
    cli("chat", "join", str(pair.a.chat), "hello from a", "--as", "alice")
    cli("chat", "join", str(pair.b.chat), "hello from b", "--as", "bob")
    wait_for(lambda: _same(pair) and len(chat_messages(pair.a)) == 2, what="joins on both")
    for i in range(3):
        _say(pair.a, "alice", f"alice {i}")
    pair.b.kill9()  # b's bridge and server die while alice's messages are in flight
    for i in range(3):
        _say(pair.b, "bob", f"bob {i}")
        _say(pair.a, "alice", f"alice {i + 3}")
    pair.b.start()
    pair.a.kill9()
    pair.a.start()
    wait_for(lambda: _same(pair) and len(chat_messages(pair.a)) == 11, 40, "convergence")
    for host in (pair.a, pair.b):
        msgs = chat_messages(host)
        assert len(set(msgs)) == len(msgs) == 11
        alice = [body for sender, _, body in msgs if sender == "alice"][1:]
        assert alice == [f"alice {i}" for i in range(6)]

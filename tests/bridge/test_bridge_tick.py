"""The tick across hosts: it runs on the home host only; HELD.md, INDEX.md, archives and reopens
reach the other host as explicit messages; the guard compares a side's ``done`` with when an
entry reached that side's host (its arrival receipt), so that guard holds across hosts."""

from __future__ import annotations

import json

from bridge_helpers import cli, converged, wait_for


def _tick(host) -> dict:
    out = cli("--root", str(host.root), "exchange", "tick", "--json")
    return json.loads(out.stdout)


def _state(host, side: str, topic: str, status: str, *extra: str) -> None:
    cli("--root", str(host.root), "--as", side, "exchange", "state", topic, status, *extra)


def _receipt(pair, topic: str, name: str) -> bool:
    from mailslot.exchange.arrivals import arrivals

    return name in arrivals(pair.a.root / ".mailslot", "b", topic)


def test_the_tick_runs_on_the_home_host_only(pair) -> None:
    out = cli("--root", str(pair.b.root), "exchange", "tick", check=False)
    assert out.returncode == 1
    assert "its tick runs on host 'a'" in out.stderr
    assert _tick(pair.a)["archived"] == []


def test_a_done_before_the_reply_arrived_holds_until_a_remote_reaffirm_releases(pair) -> None:
    # b asks (required) and marks its side done anyway; a replies and marks done
    q = pair.b.send("b", "gate", "Is the gate fixed?", action="required")
    topic = q.split("/")[1]
    wait_for(lambda: (pair.a.root / q).exists(), what="b's question on a")
    _state(pair.b, "b", topic, "done", "--force")
    wait_for(lambda: (pair.a.root / "to-a" / topic / "STATE.md").exists(), what="b's done on a")
    reply = pair.a.send("a", topic, "Yes, fixed in 1.2.")
    _state(pair.a, "a", topic, "done")
    wait_for(lambda: _receipt(pair, topic, "0002-a.md"), what="b's arrival receipt on a")
    # b's done predates the reply's arrival on b: b owes a re-read, on its own host
    first = _tick(pair.a)
    assert first["archived"] == [] and topic in first["held"]
    held = pair.b.root / "to-b" / topic / "HELD.md"
    wait_for(held.exists, what="HELD.md on b")
    assert b"done" in held.read_bytes()
    wait_for(lambda: (pair.b.root / "INDEX.md").exists(), what="INDEX.md on b")
    # b re-affirms on its host: the home tick releases and archives on both hosts
    _state(pair.b, "b", topic, "done")
    wait_for(
        lambda: (
            b"done" in (pair.a.root / "to-a" / topic / "STATE.md").read_bytes()
            and (pair.a.root / "to-a" / topic / "STATE.md").read_bytes()
            == (pair.b.root / "to-a" / topic / "STATE.md").read_bytes()
        ),
        what="b's re-affirm on a",
    )
    second = _tick(pair.a)
    assert topic in second["archived"], second
    for host in (pair.a, pair.b):
        wait_for(lambda h=host: (h.root / "to-b" / "done" / topic).is_dir(), what="archived")
        wait_for(lambda h=host: not (h.root / "to-a" / topic).exists(), what="no live copy")
    assert not list(pair.b.root.rglob("HELD.md"))
    assert (pair.b.root / "to-b" / "done" / topic / reply.split("/")[-1]).exists()
    wait_for(lambda: converged(pair.a, pair.b), what="identical trees")
    wait_for(
        lambda: (pair.b.root / "INDEX.md").read_bytes() == (pair.a.root / "INDEX.md").read_bytes(),
        what="INDEX.md on b",
    )


def test_no_receipt_from_the_readers_host_means_no_archive(pair) -> None:
    rel = pair.a.send("a", "quiet", "fyi only")
    topic = rel.split("/")[1]
    wait_for(lambda: _receipt(pair, topic, "0001-a.md"), what="the first receipt")
    _state(pair.b, "b", topic, "done")
    wait_for(lambda: (pair.a.root / "to-a" / topic / "STATE.md").exists(), what="b's done")
    pair.proxy.cut()
    pair.a.send("a", topic, "a second note b has not received")
    _state(pair.a, "a", topic, "done")
    result = _tick(pair.a)
    assert result["archived"] == []  # unresolved: the fail-safe direction
    assert (pair.a.root / "to-b" / topic).is_dir()
    pair.proxy.heal()
    wait_for(lambda: _receipt(pair, topic, "0002-a.md"), 30, "the late receipt")
    assert topic in _tick(pair.a)["held"]  # b marked done before it arrived on b


def test_a_reopen_on_the_remote_host_brings_the_topic_back_on_both(pair) -> None:
    rel = pair.a.send("a", "again", "done soon")
    topic = rel.split("/")[1]
    wait_for(lambda: _receipt(pair, topic, "0001-a.md"), what="receipt")
    _state(pair.b, "b", topic, "done")
    wait_for(lambda: (pair.a.root / "to-a" / topic / "STATE.md").exists(), what="b's done")
    _state(pair.a, "a", topic, "done")
    assert topic in _tick(pair.a)["archived"]
    wait_for(lambda: (pair.b.root / "to-a" / "done" / topic).is_dir(), what="archived on b")
    cli("--root", str(pair.b.root), "--as", "b", "exchange", "reopen", topic, "--why", "not yet")
    for host in (pair.a, pair.b):
        wait_for(lambda h=host: (h.root / "to-a" / topic).is_dir(), what="live again")
        wait_for(lambda h=host: not (h.root / "to-b" / "done" / topic).exists(), what="not done")
    wait_for(lambda: converged(pair.a, pair.b), what="identical trees")
    assert _tick(pair.a)["archived"] == []

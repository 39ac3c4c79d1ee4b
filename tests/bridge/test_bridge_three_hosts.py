"""Three hosts through a hub: the home host runs the tick for two sides that live on two other
hosts; every host converges, through a partition of one leaf."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bridge_helpers import Host, Proxy, cli, converged, need_nats, send_many, wait_for


@pytest.fixture
def trio(tmp_path: Path):
    need_nats()
    a, b, c = Host(tmp_path, "a"), Host(tmp_path, "b"), Host(tmp_path, "c")
    proxy = Proxy(a.leaf_port)  # b's link to the hub can be cut
    hosts = {"x": "b", "y": "c"}  # side x on b, side y on c; a is the hub and home
    a.init(["b", "c"], hosts, "a", "--leaf-advertise", f"127.0.0.1:{proxy.port}")
    b.init(["a", "c"], hosts, "a", "--leaf-remote", f"nats-leaf://127.0.0.1:{proxy.port}")
    c.init(["a", "b"], hosts, "a", "--leaf-remote", f"nats-leaf://127.0.0.1:{a.leaf_port}")
    proxy.heal()
    for h in (a, b, c):
        h.start()
    try:
        yield a, b, c, proxy
    finally:
        for h in (c, b, a):
            h.stop()
        proxy.cut()


def test_two_leaves_talk_through_the_hub_and_the_home_tick_archives_on_all(trio) -> None:
    a, b, c, proxy = trio
    rel = b.send("x", "three", "from x on b")
    topic = rel.split("/")[1]
    wait_for(lambda: (c.root / rel).exists() and (a.root / rel).exists(), 40, "b's entry")
    proxy.cut()
    sent = send_many(c, "y", topic, 3, "while b is cut off")
    sent += send_many(b, "x", topic, 3, "from b while cut off")
    proxy.heal()
    wait_for(lambda: converged(a, b, c), 40, "three identical trees")
    assert len([p for p in a.files() if p.endswith(".md") and "STATE" not in p]) == 7
    for h, side in ((b, "x"), (c, "y")):
        cli("--root", str(h.root), "--as", side, "exchange", "state", topic, "done")
    from mailslot.exchange.arrivals import arrivals

    def ready() -> bool:
        states = [(a.root / f"to-{s}" / topic / "STATE.md").exists() for s in ("x", "y")]
        got = [arrivals(a.root / ".mailslot", s, topic) for s in ("x", "y")]
        return all(states) and sum(len(g) for g in got) == 7

    wait_for(ready, 40, "both STATEs and every receipt on the home host")
    out = json.loads(cli("--root", str(a.root), "exchange", "tick", "--json").stdout)
    assert topic in out["archived"], out
    for h in (a, b, c):
        wait_for(
            lambda h=h: (h.root / "to-x" / "done" / topic).is_dir(), 30, f"archived on {h.name}"
        )
    wait_for(lambda: converged(a, b, c), 30, "identical after the archive")

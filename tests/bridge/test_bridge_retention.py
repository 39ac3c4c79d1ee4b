"""What the streams keep: everything a peer may not have received, within a byte bound; a
full stream refuses (and says so) rather than dropping anything."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bridge_helpers import EX, Host, Pair, cli, need_nats, wait_for

from mailslot.bridge.config import load_config, write_config


async def _stream(url: str, name: str, subjects: str | None = None) -> Any:
    import nats

    nc = await nats.connect(url)
    try:
        return await nc.jetstream().stream_info(name, subjects_filter=subjects)
    finally:
        await nc.close()


def stream(host: Host, name: str, subjects: str | None = None) -> Any:
    """``name``'s stream info on ``host``'s server (with per-subject counts for ``subjects``)."""
    return asyncio.run(_stream(host.url, name, subjects))


def limit_streams(host: Host, max_bytes: int) -> None:
    config = load_config(host.dir)
    write_config(config._replace(nats=config.nats._replace(stream_max_bytes=max_bytes)))


def test_streams_are_bounded_and_keep_every_revision_and_entry(pair) -> None:
    rel = pair.a.send("a", "revs", "hello")
    topic = rel.split("/")[1]
    state_a = pair.a.root / "to-b" / topic / "STATE.md"
    state_b = pair.b.root / "to-b" / topic / "STATE.md"
    for state in ("in-progress", "blocked", "in-progress", "blocked"):
        cli("--root", str(pair.a.root), "--as", "a", "exchange", "state", topic, state)
        wait_for(
            lambda: state_b.exists() and state_b.read_bytes() == state_a.read_bytes(),
            what=f"a's STATE.md ({state}) on b",
        )
    kept = stream(pair.a, "MS_OUT_a", f"ms.a.{EX}.s.>")
    assert kept.state.subjects is not None and len(kept.state.subjects) == 4  # never purged
    # the entry keeps its own subject
    entries = stream(pair.a, "MS_OUT_a", f"ms.a.{EX}.e.>")
    assert entries.state.subjects == {f"ms.a.{EX}.e.b.{topic}.0001.a": 1}
    # b's in stream is bounded too, and keeps what came (its source resumes from the newest)
    assert stream(pair.b, "MS_IN_a").config.max_bytes > 0
    assert stream(pair.b, "MS_IN_a").state.messages >= 5


def _big_sends(host: Host, count: int, size: int) -> list[str]:
    from mailslot.exchange import load_exchange, send

    ex = load_exchange(host.root)
    return [send(ex, "a", "big", "fyi", f"{i} " + "x" * size).relpath for i in range(count)]


def test_a_full_stream_refuses_and_says_so_and_loses_nothing(tmp_path: Path) -> None:
    need_nats()
    pair = Pair(tmp_path)
    limit_streams(pair.a, 400_000)
    pair.start()
    try:
        rels = _big_sends(pair.a, 5, 120_000)
        wait_for(
            lambda: sum((pair.b.root / r).exists() for r in rels) == 3,
            what="the three entries that fit on b",
        )

        def full() -> bool:
            return bool(pair.a.status().get("streams", {}).get("MS_OUT_a", {}).get("full"))

        wait_for(full, what="a's status says its out stream is full")
        assert sum((pair.b.root / r).exists() for r in rels) == 3
        doc = cli("bridge", "doctor", "--dir", str(pair.a.dir), "--json", check=False)
        assert doc.returncode == 1
        checks = {c["check"]: c for c in json.loads(doc.stdout)["checks"]}
        assert checks["stream:MS_OUT_a"]["status"] == "fail"
        assert "full" in checks["stream:MS_OUT_a"]["detail"]
        text = cli("bridge", "status", "--dir", str(pair.a.dir)).stdout
        assert "MS_OUT_a: FULL" in text
        # room made: the refused entries go out, nothing was dropped on the way
        pair.a.stop()
        limit_streams(pair.a, 4_000_000)
        pair.a.start()
        wait_for(lambda: all((pair.b.root / r).exists() for r in rels), what="all five on b")
        for r in rels:
            assert (pair.b.root / r).read_bytes() == (pair.a.root / r).read_bytes()
        wait_for(lambda: not full(), what="the full flag cleared")
    finally:
        pair.stop()

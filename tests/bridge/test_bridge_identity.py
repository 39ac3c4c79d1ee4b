"""A peer may write only what it hosts per the receiver's own config; anything else is refused,
reported and never materialised, and the bridge goes on carrying good traffic."""

from __future__ import annotations

import hashlib

from bridge_helpers import EX, publish_raw, wait_for


def _h(data: bytes) -> dict[str, str]:
    return {"Mailslot-Sha256": hashlib.sha256(data).hexdigest()}


def test_hostile_messages_are_refused_and_reported_never_written(pair) -> None:
    topic = "2026-11-30-attack"
    body = b"---\nfrom: a\nat: 2026-11-30T10:00:00Z\naction: fyi\n---\nforged\n"
    hostile = [
        # host b writes for side a (hosted by a): a forged origin
        (f"ms.b.{EX}.e.b.{topic}.0001.a", body, _h(body)),
        # traversal attempts in a token (a subject cannot hold "..": its dots split tokens)
        (f"ms.b.{EX}.e.a.{topic}.0001.b/x", body, _h(body)),
        (f"ms.b.{EX}.e.a/etc.{topic}.0001.b", body, _h(body)),
        (f"ms.b.{EX}.e.a.2026-11-30-a%2f%2e%2e%2fetc.0001.b", body, _h(body)),
        # oversized
        (f"ms.b.{EX}.e.a.{topic}.0002.b", b"x" * (400 * 1024), _h(b"x" * (400 * 1024))),
        # malformed: no digest, a digest that lies, a subject that does not parse
        (f"ms.b.{EX}.e.a.{topic}.0003.b", body, None),
        (f"ms.b.{EX}.e.a.{topic}.0004.b", body, _h(b"other")),
        (f"ms.b.{EX}.zz.a.{topic}", body, _h(body)),
        # a sender who is no member of side b
        (f"ms.b.{EX}.e.a.{topic}.0005.mallory", body, _h(body)),
        # an exchange a does not bridge
        (f"ms.b.other.e.a.{topic}.0006.b", body, _h(body)),
        # the tick's work from a host that is not home (a is): an archive, a hold, an index
        (f"ms.b.{EX}.p.{topic}.5", b"done", _h(b"done")),
        (f"ms.b.{EX}.h.a.{topic}.5", b"held", _h(b"held")),
        (f"ms.b.{EX}.i.5", b"index", _h(b"index")),
        # a receipt for a side b does not host, and one that is no time
        (f"ms.b.{EX}.r.a.{topic}.0001.b", b"123", _h(b"123")),
        (f"ms.b.{EX}.r.b.{topic}.0001.a", b"soon", _h(b"soon")),
        # a later version of an entry: for a side b does not host, under a digest that is not
        # its bytes', under a token that is no digest
        (f"ms.b.{EX}.v.b.{topic}.0001.a.{_h(body)['Mailslot-Sha256'][:12]}", body, _h(body)),
        (f"ms.b.{EX}.v.a.{topic}.0007.b.000000000000", body, _h(body)),
        (f"ms.b.{EX}.v.a.{topic}.0008.b.a%2f%2e%2e", body, _h(body)),
    ]
    for subject, data, headers in hostile:
        publish_raw(pair.b.url, subject, data, headers)
    wait_for(lambda: pair.a.status().get("refused", 0) >= len(hostile), what="refusals")
    assert pair.a.status()["refused"] == len(hostile)
    import json

    ledger = pair.a.dir / "state" / "ledger.json"

    def recorded() -> list[dict]:
        try:
            return json.loads(ledger.read_text())["refused"]
        except (OSError, ValueError, KeyError):
            return []

    wait_for(lambda: len(recorded()) == len(hostile), what="every refusal kept in the ledger")
    reasons = " ".join(r["reason"] for r in recorded())
    assert "hosts" in reasons and "digest" in reasons and "bytes" in reasons
    assert "may not archive" in reasons and "whose home is" in reasons and "receipt" in reasons
    assert not any(p.name != "done" for p in (pair.a.root / "to-b").iterdir())
    assert not (pair.a.root / "to-a" / topic).exists()
    assert (pair.a.root / "INDEX.md").read_bytes() != b"index"
    assert not (pair.a.root / ".mailslot" / "arrivals").exists()
    assert not list(pair.a.base.rglob("x")) and not list(pair.a.base.rglob("etc*"))
    # good traffic still flows after the attack
    rel = pair.b.send("b", "after", "still here")
    wait_for(lambda: (pair.a.root / rel).exists(), what="a good entry after the attack")

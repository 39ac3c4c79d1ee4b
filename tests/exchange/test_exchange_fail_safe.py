"""What cannot be resolved is held, owed or reported, never archived or dropped: an entry dated
before the acknowledgement it arrived after, stray files in a topic, a required entry followed by
an fyi P.S., a back-dated debt.

Each drives the real CLI entry point over a real tree, with the real clock."""

from __future__ import annotations

import json

from exhelp import both_done_cli, run, send_cli, tick, write_by_hand

from mailslot.exchange.layout import Exchange


def test_back_dated_entry_holds_instead_of_archiving(ex: Exchange) -> None:
    root = ex.root
    topic = send_cli(root, "claude", "q", "fyi: context").split("/")[1]
    run(root, "exchange", "state", topic, "done", agent="olu")
    run(root, "exchange", "state", topic, "done", agent="claude")
    # olu hand-writes a required entry dated before both 'done's (the CONVENTION example time)
    write_by_hand(
        root / "to-claude" / topic / "0002-olu.md",
        "---\nfrom: olu\nat: 2026-11-29T18:14:00.123Z\naction: required\n---\nplease answer\n",
    )
    out = tick(root)
    assert out["archived"] == [] and out["held"] == [topic]
    assert (root / "to-claude" / topic / "HELD.md").is_file()  # claude owes the re-read
    assert "arrived" in (root / "to-claude" / topic / "HELD.md").read_text()
    mon = json.loads(run(root, "exchange", "monitor", "--json", agent="claude").stdout)
    kinds = {(a["kind"], a["entry"]) for a in mon["awaiting"]}
    assert ("entry", "0002-olu.md") in kinds and ("held", None) in kinds
    # re-affirming done releases it: the entry is now older than claude's acknowledgement
    run(root, "exchange", "state", topic, "done", "--force", agent="claude")
    out = tick(root)
    assert out["archived"] == [topic]


def test_stray_files_are_reported_and_block_the_archive(ex: Exchange) -> None:
    root = ex.root
    topic = both_done_cli(root)
    d = root / "to-claude" / topic
    write_by_hand(
        d / "0002-Olu.md", "---\nfrom: olu\nat: 2026-11-29T18:14:00Z\naction: required\n---\nq\n"
    )
    write_by_hand(d / "0003-olu.markdown", "also unread\n")
    out = tick(root)
    assert out["archived"] == []
    assert out["strays"] == [
        f"to-claude/{topic}/0002-Olu.md",
        f"to-claude/{topic}/0003-olu.markdown",
    ]
    assert "0002-Olu.md" in (root / "INDEX.md").read_text()
    w = json.loads(
        run(root, "exchange", "watch", "--timeout", "1", "--json", agent="claude").stdout
    )
    strays = sorted(i["path"] for i in w["items"] if i["kind"] == "stray")
    assert strays == [f"to-claude/{topic}/0002-Olu.md", f"to-claude/{topic}/0003-olu.markdown"]
    again = run(root, "exchange", "watch", "--timeout", "0.5", "--json", agent="claude", ok=False)
    assert again.exit_code == 3  # delivered once
    report = json.loads(run(root, "exchange", "doctor", "--json", ok=False).stdout)
    c = next(c for c in report["checks"] if c["check"] == "tree:strays")
    assert c["status"] == "warn" and "0003-olu.markdown" in c["detail"]
    (d / "0002-Olu.md").unlink()
    (d / "0003-olu.markdown").unlink()
    assert tick(root)["archived"] == [topic]


def test_required_then_fyi_ps_is_still_owed(ex: Exchange) -> None:
    root = ex.root
    topic = send_cli(root, "claude", "ask", "please review", "required").split("/")[1]
    send_cli(root, "claude", topic, "p.s. no rush")
    sweep = json.loads(run(root, "exchange", "sweep", "--json", agent="olu").stdout)
    assert [(d["topic"], d["reason"], d["entry"]) for d in sweep["debts"]] == [
        (topic, "reply", "0001-claude.md")
    ]
    out = tick(root)
    assert (topic, "olu", "reply") in {(d["topic"], d["side"], d["reason"]) for d in out["debts"]}
    assert "a reply to `0001-claude.md`" in (root / "INDEX.md").read_text()
    r = run(root, "exchange", "state", topic, "done", agent="claude", ok=False)
    assert r.exit_code == 1 and "0001-claude.md" in r.output
    send_cli(root, "olu", topic, "done, looks good")
    assert json.loads(run(root, "exchange", "sweep", "--json", agent="olu").stdout)["debts"] == []
    run(root, "exchange", "state", topic, "done", agent="claude")


def test_sweep_dates_a_back_dated_debt_by_its_arrival(ex: Exchange) -> None:
    root = ex.root
    topic = send_cli(root, "claude", "q", "context").split("/")[1]
    write_by_hand(
        root / "to-claude" / topic / "0002-olu.md",
        "---\nfrom: olu\nat: 2020-01-01T00:00:00Z\naction: required\n---\nplease answer\n",
    )
    debts = json.loads(run(root, "exchange", "sweep", "--json", agent="claude").stdout)["debts"]
    assert [d["entry"] for d in debts] == ["0002-olu.md"]
    assert not debts[0]["since"].startswith("2020")  # not an ancient debt: it just arrived


def test_a_state_dated_ahead_of_the_clock_waits_and_doctor_names_it(ex: Exchange) -> None:
    """olu's clock runs a day fast: its `done` cannot be compared, so the topic waits (never
    archived); nothing lands in an inbox, so doctor names the file and the side that wrote it."""
    root = ex.root
    topic = send_cli(root, "claude", "q", "please look").split("/")[1]
    run(root, "exchange", "state", topic, "done", agent="claude")
    write_by_hand(
        root / "to-claude" / topic / "STATE.md",
        "status: done\ntags: []\nupdated_at: 2099-01-01T00:00:00Z\nupdated_by: olu\n",
    )
    out = tick(root)
    assert out["archived"] == [] and any("in the future" in w["reason"] for w in out["waiting"])
    report = json.loads(run(root, "exchange", "doctor", "--json", ok=False).stdout)
    c = next(c for c in report["checks"] if c["check"] == "clocks")
    assert c["status"] == "warn" and f"to-claude/{topic}/STATE.md (by olu)" in c["detail"]
    write_by_hand(
        root / "to-claude" / topic / "STATE.md",
        "status: done\ntags: []\nupdated_at: 2020-01-01T00:00:00Z\nupdated_by: olu\n",
    )
    report = json.loads(run(root, "exchange", "doctor", "--json", ok=False).stdout)
    assert next(c for c in report["checks"] if c["check"] == "clocks")["status"] == "ok"

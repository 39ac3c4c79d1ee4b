"""dispatch / closeout / dispatch-status: one brief to several reviewers, independence said in
every copy, the close-out reaching every one of them (not only the first), and who owes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.cli import cli
from mailslot.core.errors import Conflict, MailslotError, NotFound
from mailslot.exchange import list_entries, send, set_state
from mailslot.exchange.create import create_exchange
from mailslot.exchange.dispatch import (
    closeout,
    dispatch,
    dispatch_status,
    groups_dir,
    load_group,
)


@pytest.fixture
def pair(tmp_path):
    olu = create_exchange(tmp_path / "x-olu", ["claude", "olu"], git=False)
    chuka = create_exchange(tmp_path / "x-chuka", ["claude", "chuka"], git=False)
    return olu, chuka


def _cli(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_dispatch_with_repeated_root_sends_a_new_topic_to_each(pair, _isolated_state) -> None:
    olu, chuka = pair
    r = _cli(
        "exchange",
        "dispatch",
        "--as",
        "claude",
        "--root",
        str(olu.root),
        "--to-root",
        str(chuka.root),
        "--topic",
        "gate-review",
        "--action",
        "required",
        "--json",
        "-",
        input="Is the gate logic right?\n",
    )
    assert r.exit_code == 0, r.output
    g = json.loads(r.stdout)
    assert [m["root"] for m in g["members"]] == [str(olu.root), str(chuka.root)]
    for ex, reviewer in ((olu, "olu"), (chuka, "chuka")):
        (entry,) = list_entries(ex, g["members"][0]["topic"])
        assert entry.path.parent.parent == ex.inbox(reviewer)
        assert entry.action == "required"
        assert "another agent has been sent these same questions" in entry.body
        assert "Do not consult them" in entry.body
        assert entry.body.rstrip().endswith("Is the gate logic right?")
        assert g["group"] in entry.body
    stored = Path(_isolated_state) / "mailslot" / "dispatch" / f"{g['group']}.json"
    assert stored.is_file() and groups_dir() == stored.parent


def test_status_closeout_reaches_every_member_even_archived(pair) -> None:
    olu, chuka = pair
    g = dispatch([olu.root, chuka.root], "claude", "gate-review", "required", "Brief.")
    st = dispatch_status(g.group)
    assert st["owing"] == [str(olu.root), str(chuka.root)]
    topic = g.members[0].topic
    send(olu, "olu", topic, "fyi", "Found the defect in line 12.")
    st = dispatch_status(g.group)
    assert st["owing"] == [str(chuka.root)]
    (m_olu,) = [m for m in st["members"] if m["root"] == str(olu.root)]
    assert m_olu["replied"] and m_olu["replies"] == ["0002-olu.md"]
    # chuka's topic got archived before the close-out (both sides done)
    send(chuka, "chuka", topic, "fyi", "Same defect.")
    set_state(chuka, "chuka", topic, "done")
    set_state(chuka, "claude", topic, "done")
    for side in ("claude", "chuka"):
        os.rename(chuka.inbox(side) / topic, chuka.inbox(side) / "done" / topic)
    res = closeout(g.group, "Fixed in 4a1c; the fix came from both of you.")
    assert res.errors == []
    assert [r["reopened"] for r in res.results] == [False, True]
    for ex in (olu, chuka):
        last = list_entries(ex, topic)[-1]
        assert "Fixed in 4a1c" in last.body and "all 2 reviewers" in last.body
    assert len(load_group(g.group).closeouts) == 1
    assert dispatch_status(g.group)["closeouts"] == 1


def test_closeout_reports_an_unreachable_member(pair) -> None:
    olu, chuka = pair
    g = dispatch([olu.root, chuka.root], "claude", "gate-review", "required", "Brief.")
    import shutil

    shutil.rmtree(chuka.root)
    res = closeout(g.group, "close")
    assert len(res.errors) == 1 and str(chuka.root) in res.errors[0]
    with pytest.raises(MailslotError):
        res.raise_for_errors()
    r = _cli("exchange", "closeout", g.group, "again")
    assert r.exit_code == 1 and "did not reach" in r.stderr


def test_closeout_retry_reaches_the_missed_member_without_repeating(pair, tmp_path) -> None:
    olu, chuka = pair
    g = dispatch([olu.root, chuka.root], "claude", "gate-review", "required", "Brief.")
    topic = g.members[0].topic
    away = tmp_path / "away"
    os.rename(chuka.root, away)  # chuka's exchange is unreachable for the first run
    first = closeout(g.group, "Fixed in 4a1c.")
    assert [bool(r.get("error")) for r in first.results] == [False, True]
    os.rename(away, chuka.root)
    olu_before = len(list_entries(olu, topic))
    r = _cli("exchange", "closeout", g.group, "Fixed in 4a1c.", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["results"]
    assert [x.get("already", False) for x in rows] == [True, False]
    assert rows[0]["entry"] == first.results[0]["entry"]
    assert len(list_entries(olu, topic)) == olu_before  # not written to twice
    assert "Fixed in 4a1c." in list_entries(chuka, topic)[-1].body
    text = _cli("exchange", "closeout", g.group, "Fixed in 4a1c.")
    assert text.exit_code == 0 and text.stdout.count("(already sent)") == 2
    assert len(load_group(g.group).closeouts) == 2  # a run that sent nothing records nothing
    again = closeout(g.group, "A second fix, in 5b2d.")  # new text: a new close-out, to all
    assert not any(x.get("already") for x in again.results) and again.errors == []
    for ex in (olu, chuka):
        assert "5b2d" in list_entries(ex, topic)[-1].body


RACER = """
import sys, time
from pathlib import Path
from mailslot.exchange.dispatch import closeout
go = Path(sys.argv[2])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
closeout(sys.argv[1], "Fixed in 4a1c.")
"""


def test_concurrent_closeout_retries_reach_each_member_once(pair, tmp_path) -> None:
    import subprocess
    import sys

    olu, chuka = pair
    g = dispatch([olu.root, chuka.root], "claude", "gate-review", "required", "Brief.")
    topic = g.members[0].topic
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, g.group, str(go)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    for ex in (olu, chuka):
        copies = [e for e in list_entries(ex, topic) if "Fixed in 4a1c." in e.body]
        assert len(copies) == 1, [e.name for e in copies]
    assert len(load_group(g.group).closeouts) == 1  # three runs found everyone reached
    forced = closeout(g.group, "Fixed in 4a1c.", again=True)
    assert not any(r.get("already") for r in forced.results)
    for ex in (olu, chuka):
        assert sum("Fixed in 4a1c." in e.body for e in list_entries(ex, topic)) == 2


def test_refusals_send_nothing(pair, tmp_path) -> None:
    olu, chuka = pair
    with pytest.raises(MailslotError, match="at least two"):
        dispatch([olu.root], "claude", "solo", "required", "Brief.")
    with pytest.raises(Conflict):
        dispatch([olu.root, olu.root], "claude", "twice", "required", "Brief.")
    send(chuka, "claude", "taken", "fyi", "already here")
    with pytest.raises(Conflict, match="already has a live topic"):
        dispatch([olu.root, chuka.root], "claude", "taken", "required", "Brief.")
    assert not any(r.name.endswith("taken") for r in (olu.root / "to-olu").iterdir())
    third = create_exchange(tmp_path / "x-other", ["will", "olu"], git=False)
    with pytest.raises(Conflict):
        dispatch([olu.root, third.root], "claude", "stranger", "required", "Brief.")
    assert list((olu.root / "to-olu").glob("*-stranger")) == []
    with pytest.raises(NotFound):
        dispatch_status("no-such-group")


def test_status_cli_text_and_listing(pair) -> None:
    olu, chuka = pair
    g = dispatch([olu.root, chuka.root], "claude", "gate-review", "required", "Brief.")
    r = _cli("exchange", "dispatch-status", g.group)
    assert r.exit_code == 0 and r.stdout.count("OWES a reply") == 2
    listing = _cli("exchange", "dispatch-status", "--json")
    assert [x["group"] for x in json.loads(listing.stdout)["groups"]] == [g.group]


def test_status_counts_a_reply_by_arrival_even_under_the_briefs_number(pair) -> None:
    olu, chuka = pair
    g = dispatch([olu.root, chuka.root], "claude", "reused", "required", "Brief.")
    topic = g.members[0].topic
    # a hand reviewer that did not see the brief's number takes 0001 too, after the brief arrived
    d = olu.inbox("claude") / topic
    d.mkdir(parents=True, exist_ok=True)
    (d / ".draft.md").write_text("---\nfrom: olu\nat: 2026-11-29T18:14:00Z\naction: fyi\n---\nok\n")
    (d / ".draft.md").rename(d / "0001-olu.md")
    m, _ = dispatch_status(g.group)["members"]
    assert m["replied"] and m["replies"] == ["0001-olu.md"] and not m["owes"]

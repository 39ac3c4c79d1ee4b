"""LOG.md: one physical line per agent per waking, locked, counted, hand-written lines parse."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bus_helpers import finish, spawn
from hypothesis import given
from hypothesis import strategies as st

from mailslot.bus import log
from mailslot.core import clock
from mailslot.core.errors import Conflict, LimitExceeded, MailslotError, NotFound

T0 = datetime(2026, 11, 29, 18, 14, 3, tzinfo=UTC)


def at(t: datetime) -> None:
    clock.set_clock(lambda: t)


def lines(root: Path) -> list[str]:
    return (root / "LOG.md").read_text(encoding="utf-8").splitlines()


def test_append_writes_the_log_line_format(root: Path) -> None:
    at(T0)
    entry = log.append(root, "lantern", "delivered the OG card to outbox/, needs Beacon")
    expected = (
        "2026-11-29T18:14:03Z — [Lantern] w01: delivered the OG card to outbox/, needs Beacon"
    )
    assert lines(root)[-1] == expected
    assert entry.raw == expected and entry.waking == 1 and entry.agent == "lantern"
    assert entry.lineno == len(lines(root))


def test_wakings_count_per_agent(root: Path) -> None:
    for hours in range(3):
        at(T0 + timedelta(hours=hours))
        log.append(root, "lantern", f"run {hours}")
    at(T0 + timedelta(hours=3))
    log.append(root, "beacon", "first run")
    got = [(e.agent, e.waking) for e in log.read(root)]
    assert got == [("lantern", 1), ("lantern", 2), ("lantern", 3), ("beacon", 1)]
    counter = json.loads((root / ".mailslot/wakings/lantern.json").read_text())
    assert counter["waking"] == 3


def test_second_line_in_same_waking_is_refused_and_nothing_written(root: Path) -> None:
    at(T0)
    log.append(root, "lantern", "did X")
    before = (root / "LOG.md").read_bytes()
    at(T0 + timedelta(minutes=5))
    with pytest.raises(Conflict, match=r"already logged w01 in this waking.*--same-waking"):
        log.append(root, "lantern", "and Y")
    assert (root / "LOG.md").read_bytes() == before
    # another agent is not affected
    log.append(root, "beacon", "unrelated")


def test_same_waking_and_new_waking_are_explicit(root: Path) -> None:
    at(T0)
    log.append(root, "lantern", "did X")
    at(T0 + timedelta(minutes=1))
    assert log.append(root, "lantern", "and Y", same_waking=True).waking == 1
    assert log.append(root, "lantern", "new run", new_waking=True).waking == 2
    with pytest.raises(MailslotError, match="contradict"):
        log.append(root, "lantern", "x", same_waking=True, new_waking=True)


def test_gap_ends_a_waking(root: Path) -> None:
    at(T0)
    log.append(root, "lantern", "did X")
    at(T0 + log.WAKING_GAP)
    assert log.append(root, "lantern", "next run").waking == 2


def test_waking_id_is_exact(root: Path) -> None:
    at(T0)
    log.append(root, "lantern", "run a", waking_id="1700000000")
    at(T0 + timedelta(hours=2))  # long after, but the same run id: same waking
    with pytest.raises(Conflict, match="same MAILSLOT_WAKING"):
        log.append(root, "lantern", "still run a", waking_id="1700000000")
    at(T0 + timedelta(hours=2, seconds=1))  # a new id seconds later is a new waking
    assert log.append(root, "lantern", "run b", waking_id="1700007200").waking == 2


def test_hand_written_lines_parse_and_count(root: Path) -> None:
    with (root / "LOG.md").open("a", encoding="utf-8") as f:
        f.write("2026-11-27 — [Beacon] w14: Delivered the OG card to outbox/\n")
        f.write("2026-11-28 18:00 – [Lantern] w3: en dash, zone-less time\n")  # noqa: RUF001
        f.write("2026-11-28T19:00:00+00:00 -- [lantern]: no waking number\n")
        f.write("just a note someone typed\n")
    entries = log.read(root)
    assert [(e.agent, e.waking, e.at) for e in entries] == [
        ("beacon", 14, None),
        ("lantern", 3, None),
        ("lantern", None, "2026-11-28T19:00:00Z"),
        (None, None, None),
    ]
    assert entries[0].date == "2026-11-27" and entries[0].text.startswith("Delivered")
    assert entries[3].text == "just a note someone typed"
    at(T0)
    assert log.append(root, "beacon", "next").waking == 15  # counted past the hand line


@pytest.mark.parametrize(
    "text", ["two\nlines", "trailing\n", "cr\rline", "ls\u2028sep", "ps\u2029sep", "vt\x0bx", "\n"]
)
def test_multi_line_text_is_refused_and_nothing_written(root: Path, text: str) -> None:
    before = (root / "LOG.md").read_bytes()
    with pytest.raises(LimitExceeded, match="lines"):
        log.append(root, "lantern", text)
    assert (root / "LOG.md").read_bytes() == before
    assert not (root / ".mailslot/wakings/lantern.json").exists()


@pytest.mark.parametrize(
    ("text", "error"),
    [("", "lines|empty"), ("   ", "empty"), ("esc \x1b[31m red", "control"), ("x" * 1001, "1000")],
)
def test_bad_text_is_refused(root: Path, text: str, error: str) -> None:
    before = (root / "LOG.md").read_bytes()
    with pytest.raises(MailslotError, match=error):
        log.append(root, "lantern", text)
    assert (root / "LOG.md").read_bytes() == before


def test_text_is_never_trimmed(root: Path) -> None:
    entry = log.append(root, "lantern", "  spaced  ")
    assert lines(root)[-1].endswith("w01:   spaced  ")
    assert entry.text == "  spaced  " and log.read(root)[-1].text == "  spaced  "


def test_missing_final_newline_gets_one(root: Path) -> None:
    with (root / "LOG.md").open("a", encoding="utf-8") as f:
        f.write("2026-11-27 — [Beacon] w1: typed by hand, no newline")
    entry = log.append(root, "lantern", "mine")
    assert lines(root)[-2:] == [
        "2026-11-27 — [Beacon] w1: typed by hand, no newline",
        entry.raw,
    ]
    assert entry.lineno == len(lines(root))


def test_tail_and_since_mine(root: Path) -> None:
    for i, who in enumerate(["lantern", "beacon", "tidal", "lantern", "beacon", "tidal"]):
        at(T0 + timedelta(hours=i))
        log.append(root, who, f"line {i}")
    assert [e.text for e in log.tail(root, 2).entries] == ["line 4", "line 5"]
    since = log.tail(root, None, since_mine="lantern")
    assert since.mine_found and [e.text for e in since.entries] == ["line 4", "line 5"]
    never = log.tail(root, None, since_mine="newbie")
    assert not never.mine_found and len(never.entries) == 6  # never wrote: everything
    assert log.tail(root, 0).entries == []
    with pytest.raises(MailslotError):
        log.tail(root, -1)


def test_not_a_bus(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="not a bus"):
        log.append(tmp_path, "lantern", "x")
    assert list(tmp_path.iterdir()) == []


APPENDER = r"""
import sys
from pathlib import Path
from mailslot.bus import log
root, agent, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(n):
    log.append(root, agent, f"{agent} {i:04d} " + "x" * 900, new_waking=True)
"""


@pytest.mark.slow
def test_concurrent_appends_never_tear_a_line(root: Path) -> None:
    agents = [f"agent{i}" for i in range(6)]
    per = 40
    finish([spawn(APPENDER, str(root), a, str(per)) for a in agents])
    entries = log.read(root)
    assert len(entries) == len(agents) * per
    for e in entries:
        assert e.agent in agents and e.text.endswith("x" * 900), e.raw[:80]
        assert e.text.startswith(f"{e.agent} ")
    for a in agents:
        mine = [e for e in entries if e.agent == a]
        assert [e.waking for e in mine] == list(range(1, per + 1))  # counted under the lock
        assert [int(e.text.split()[1]) for e in mine] == list(range(per))


def test_count_survives_hand_rewrites_of_the_log(root: Path) -> None:
    """The per-agent scan cache is dropped when the log was edited in place or replaced."""
    at(T0)
    log.append(root, "lantern", "one")
    at(T0 + timedelta(hours=1))
    log.append(root, "lantern", "two")
    path = root / "LOG.md"
    data = path.read_bytes()
    with path.open("r+b") as f:  # in place, same inode, same size
        f.write(data.replace(b"w02: two", b"w50: two"))
    at(T0 + timedelta(hours=2))
    assert log.append(root, "lantern", "three").waking == 51
    replaced = path.read_text().replace("w51: three", "w70: three")
    tmp = root / "LOG.new"
    tmp.write_text(replaced)
    tmp.replace(path)  # a new inode, as editors that save by rename do
    at(T0 + timedelta(hours=3))
    assert log.append(root, "lantern", "four").waking == 71
    with path.open("a") as f:  # an append without the lock between two of ours
        f.write("2026-11-29 — [Lantern] w90: by hand\n")
    at(T0 + timedelta(hours=4))
    assert log.append(root, "lantern", "five").waking == 91
    assert [e.lineno for e in log.read(root)][-1] == len(lines(root))


def test_mangled_counter_cache_is_rescanned(root: Path) -> None:
    at(T0)
    log.append(root, "lantern", "one")
    counter = root / ".mailslot/wakings/lantern.json"
    state = json.loads(counter.read_text())
    state["scan"] = {"inode": "x", "offset": -3}
    counter.write_text(json.dumps(state))
    at(T0 + timedelta(hours=1))
    assert log.append(root, "lantern", "two").waking == 2
    counter.write_text("{not json")
    with pytest.raises(MailslotError, match="corrupt waking counter"):
        log.append(root, "lantern", "three", new_waking=True)


@given(
    text=st.text(
        alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1
    ).filter(lambda t: t.strip() and len(t.splitlines()) == 1 and len(t) <= log.LOG_TEXT_MAX),
    name=st.from_regex(r"[a-z0-9][a-z0-9_-]{0,39}", fullmatch=True),
    waking=st.integers(min_value=1, max_value=999_999),
)
def test_written_lines_parse_back(text: str, name: str, waking: int) -> None:
    line = f"2026-11-29T18:14:03Z \u2014 [{name[:1].upper() + name[1:]}] w{waking:02d}: {text}"
    entry = log.parse_line(1, line)
    assert entry is not None
    assert (entry.agent, entry.waking, entry.text) == (name, waking, text)
    assert entry.at == "2026-11-29T18:14:03Z"

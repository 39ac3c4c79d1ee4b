"""The line scanner reads every entry and STATE.md exactly as the full parsers read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailslot.exchange.entries import parse_entry
from mailslot.exchange.inbox import peek_entry, peek_state, read_entry
from mailslot.exchange.state import parse_state

ENTRIES = [
    "---\nfrom: claude\nat: 2026-11-29T18:14:00.123Z\naction: required\n---\nbody\n",
    '---\r\nfrom: "claude"\r\nat: "2026-11-29T18:14:00+00:00"\r\naction: fyi\r\n---\r\nCRLF\r\n',
    "\ufeff---\nfrom: claude\nat: 2026-11-29T18:14:00Z\naction: fyi\nextra: 3\n---\n",
    "---\nfrom: claude\nat: 2026-11-29T18:14:00Z\naction: fyi\n---\n---\nbody with a rule\n",
    "---\nfrom: claude\nat: 2026-11-29T18:14:00Z\naction: maybe\n---\nbad action\n",
    "---\nfrom: claude\naction: fyi\n---\nno time\n",
    "---\nfrom: claude\nat: 2026-13-29T18:14:00Z\naction: fyi\n---\nbad month\n",
    "---\nfrom: claude\nat: 2026-11-29T18:14:00Z\nat: 2026-11-29T18:15:00Z\naction: fyi\n---\n",
    "---\nfrom: claude\nat: 2026-11-29T18:14:00Z\naction: fyi\nnote: |\n  block\n---\nx\n",
    "---\nfrom: claude\nat: 2026-11-29T18:14:00Z # comment\naction: fyi\n---\nx\n",
    "---\nfrom: claude\nat: 2026-11-29T18:14:00Z\naction: fyi\n",
    "no frontmatter at all\n",
    "---\nfrom: claude\nat: 2026-11-29 18:14:00Z\naction: 'fyi'\n---\nspace T\n",
]
# Lines YAML refuses or reads as something other than their text, which the scanner must leave
# to the parser, and (EDGE_LINES) plain lines at the edge of its one-match path: each is added
# to an otherwise plain header, read exactly as the parser reads it.
ODD_LINES = [
    "tags: [a, b",
    "on: x",
    "null: x",
    "note: a\x07b",
    "# \x01",
    "note: a:",
    'note: "abc',
    "note: ]",
    "note: - a",
    "note: a\u2028b",
    "note: a\x85b",
    "note: 'it''s'",
    'note: "a\\tb"',
    "from: null",
    "from: 7",
    "from: yes",
    "extra: 0x1F",
    "extra: .5",
    "extra: ~",
    "extra:",
    # anchors, aliases, tags and merge keys: the scanner hands them to the parser, which refuses
    "from: &a claude",
    "from: *a",
    "note: &x [a, b]",
    "<<: {action: fyi}",
    "note: !!str x",
    "note: !!python/name:os.system",
]
# Plain lines at the edge of the one-match fast path (it must agree with the line loop and YAML).
EDGE_LINES = [
    "from: claude.bot",
    "from: a@b/c",
    "from: _x-1",
    "from: Yes",
    "from: n",
    "from: yesterday",
    "nope: x",
    "ON: x",
    "at: 2026-11-29T18:14:00+0100",
    "at: 2026-11-29T18:14:00.123456789Z",
    "tags: []",
    "tags: [ ]",
    "updated_at: 2026-11-29T18:20:00Z",
]
ODD_LINES += EDGE_LINES
ENTRIES += [
    f"---\nfrom: claude\nat: 2026-11-29T18:14:00Z\naction: fyi\n{line}\n---\nx\n"
    for line in ODD_LINES
]


@pytest.mark.parametrize("text", ENTRIES)
def test_read_and_peek_entry_agree_with_the_parser(tmp_path: Path, text: str) -> None:
    p = tmp_path / "0001-claude.md"
    p.write_bytes(text.encode())
    full = parse_entry(p, "claude", "t")
    fast = read_entry(p, "claude", "t")
    assert (fast.at, fast.action, fast.body, fast.error is None, fast.meta) == (
        full.at,
        full.action,
        full.body,
        full.error is None,
        full.meta,
    )
    peek = peek_entry(p)
    assert (peek.at, peek.action) == (full.at, full.action)


STATES = [
    "status: done\ntags: []\nupdated_at: 2026-11-29T18:20:00.000Z\nupdated_by: olu\n",
    "---\nstatus: open\nupdated_at: 2026-11-29T18:20:00Z\n---\n",
    "status: in-progress\ntags:\n  - a\n  - b\nupdated_at: 2026-11-29T18:20:00+00:00\n",
    "status: finished\nupdated_at: 2026-11-29T18:20:00Z\n",
    "status: done\n",
    "status: done\nstatus: open\nupdated_at: 2026-11-29T18:20:00Z\n",
    "status: [done\n",
    *(f"status: done\ntags: []\nupdated_at: 2026-11-29T18:20:00Z\n{line}\n" for line in ODD_LINES),
]


@pytest.mark.parametrize("text", STATES)
def test_peek_state_agrees_with_the_parser(tmp_path: Path, text: str) -> None:
    p = tmp_path / "STATE.md"
    p.write_text(text)
    full = parse_state(text, "olu", p)
    fast = peek_state(p)
    assert (fast.status, fast.updated_at) == (full.status, full.updated_at)


def test_a_fence_cut_by_the_4096_byte_head_is_no_fence(tmp_path: Path) -> None:
    from mailslot.exchange.inbox import PEEK_BYTES

    start = "---\nfrom: claude\nat: 2026-11-29T18:14:00Z\naction: fyi\npad: "
    pad = "a" * (PEEK_BYTES - 3 - len(start) - 1)  # '---' of the next line ends the head
    text = start + pad + "\n---x: y\naction: required\n---\nbody\n"
    assert text.encode()[PEEK_BYTES - 3 : PEEK_BYTES] == b"---"
    p = tmp_path / "0001-claude.md"
    p.write_text(text)
    full = parse_entry(p, "claude", "t")
    assert full.error is not None and full.action is None  # 'action' twice: no reading
    peek = peek_entry(p)
    assert (peek.at, peek.action) == (full.at, full.action)


def test_missing_state_is_open(tmp_path: Path) -> None:
    assert peek_state(tmp_path / "STATE.md").status == "open"


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_LINES = st.sampled_from(
    [
        "from: claude",
        'from: "claude"',
        "at: 2026-11-29T18:14:00Z",
        "at: 2026-11-29T18:14:00.5+01:00",
        "at: '2026-11-29 18:14:00Z'",
        "at: 2026-02-30T18:14:00Z",
        "at: yesterday",
        "action: required",
        "action: fyi",
        "action: 'fyi'",
        "action: [fyi]",
        "action:",
        "action:fyi",
        "at:2026-11-29T18:14:00Z",
        "action: fyi ",
        "action:\tfyi",
        "action: null",
        "at: 2026-11-29",
        "note: a: b",
        "note: x # c",
        "# a comment",
        "",
        "  indented: 1",
        "- item",
        "tags: [a, b]",
        "key with space: 1",
        "---",
        *ODD_LINES,
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    header=st.lists(_LINES, max_size=7),
    body=st.sampled_from(["", "body\n", "---\nrule\n"]),
    crlf=st.booleans(),
)
def test_scanner_never_disagrees_with_the_parser(tmp_path: Path, header, body, crlf) -> None:
    text = "---\n" + "".join(f"{line}\n" for line in header) + "---\n" + body
    if crlf:
        text = text.replace("\n", "\r\n")
    p = tmp_path / "0007-claude.md"
    p.write_bytes(text.encode())
    full = parse_entry(p, "claude", "t")
    fast = read_entry(p, "claude", "t")
    assert (fast.at, fast.action, fast.body, fast.meta) == (
        full.at,
        full.action,
        full.body,
        full.meta,
    )
    assert (fast.error is None) == (full.error is None)
    peek = peek_entry(p)
    assert (peek.at, peek.action) == (full.at, full.action)


_STATE_LINES = st.sampled_from(
    [
        "status: done",
        "status: open",
        "status: in-progress",
        "status: finished",
        "status: 'done'",
        "status:done",
        "status: ~",
        "updated_at: 2026-11-29T18:20:00Z",
        "updated_at: 2026-11-29T18:20:00.123+00:00",
        "updated_at: never",
        "updated_by: olu",
        "tags: []",
        "tags:",
        "  - a",
        "- b",
        "note: a: b",
        "# comment",
        "",
        "---",
        *ODD_LINES,
    ]
)


@settings(max_examples=300)
@given(lines=st.lists(_STATE_LINES, max_size=7))
def test_state_scanner_never_disagrees_with_the_parser(lines) -> None:
    import tempfile

    text = "".join(f"{line}\n" for line in lines)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "STATE.md"
        p.write_text(text)
        full = parse_state(text, "olu", p)
        fast = peek_state(p)
    assert (fast.status, fast.updated_at) == (full.status, full.updated_at)

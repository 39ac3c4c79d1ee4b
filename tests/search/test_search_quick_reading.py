"""The quick reading of plain entries gives the strict parser's answer, or none at all."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from mailslot.core.clock import parse_time
from mailslot.core.errors import FormatError
from mailslot.exchange.entries import parse_entry_text, render_entry
from mailslot.search.quick import quick_entry

# Each piece is mostly one a plain entry has, sometimes one that is not plain: a document the
# quick reading accepts is then common, and so is one that differs from it by a single piece.
KEYS = (["from", "at", "action", "to", "re", "x1"], ["yes", "on", "null", "n", "Key", "a b", "<<"])
SEPARATORS = ([": ", ":  ", ": "], [":", ": \t", " : ", ":\t"])
VALUES = (
    [
        "2026-11-29T18:14:00.123Z",
        "2026-11-29T18:14:00Z",
        "2026-11-29T18:14:00+00:00",
        "2026-11-29T18:14:00+0530",
        "2026-11-29",
        "fyi",
        "required",
        "claude",
        "a:b",
        "+x",
        "1:30",
        ".inf",
        "yes",
        "null",
        "",
        "x" * 70,
        "'2026-11-29T18:14:00Z'",
        '"2026-11-29T18:14:00Z"',
        "'a b'",
        "''",
        '""',
        "'yes'",
        "'-x: y'",
    ],
    [
        "2026-11-29 18:14:00Z",
        "'a''b'",
        '"a\\tb"',
        '"2026-11-29T18:14:00\\x5a"',
        '"a\\"b"',
        "'a #b'",
        "'a",
        "a'",
        "'a' b",
        "abc:",
        "-x",
        "~",
        "a b",
        "#c",
        "&a",
        "*a",
        "[a]",
        "{a: b}",
        "|",
        ">",
        "%x",
        "@x",
    ],
)
FENCES = (["---"], ["--- ", "----", "---\t", " ---"])


def _piece(draw: st.DrawFn, choices: tuple[list[str], list[str]]) -> str:
    good, bad = choices
    return draw(st.sampled_from(bad if draw(st.integers(0, 4)) == 0 else good))


def _strict(raw: bytes) -> tuple[datetime | None, str]:
    meta, body, _ = parse_entry_text(raw, Path("0001-claude.md"))
    try:
        at = parse_time(meta.get("at"), field="at")
    except FormatError:
        at = None
    return at, body


def _quick_at(value: str | None) -> datetime | None:
    try:
        return parse_time(value, field="at")
    except FormatError:
        return None


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    lines = [_piece(draw, FENCES)]
    for _ in range(draw(st.integers(0, 6))):
        lines.append(_piece(draw, KEYS) + _piece(draw, SEPARATORS) + _piece(draw, VALUES))
    if draw(st.integers(0, 7)):
        lines.append(_piece(draw, FENCES))
    body = draw(
        st.lists(st.sampled_from(["text", "---", "", "at: x", "\u00e9t\u00e9"]), max_size=4)
    )
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(lines + body) + draw(st.sampled_from(["", newline]))
    raw = (draw(st.sampled_from(["", "\ufeff"])) + text).encode()
    if draw(st.integers(0, 15)) == 0:
        raw += b"\xff"
    return raw


@settings(max_examples=3000, deadline=None)
@given(documents())
def test_the_quick_reading_agrees_with_the_strict_parser_whenever_it_answers(raw: bytes) -> None:
    quick = quick_entry(raw)
    event("read quickly" if quick is not None else "left to the strict parser")
    if quick is None:
        return
    at_value, body = quick
    assert (_quick_at(at_value), body) == _strict(raw)


def test_what_send_writes_is_read_quickly() -> None:
    at = datetime(2026, 11, 29, 18, 14, tzinfo=UTC)
    for action in ("required", "fyi"):
        raw = render_entry("claude", action, "the gate\n---\nrejects", "2026-11-29T18:14:00.000Z")
        quick = quick_entry(raw.encode())
        assert quick is not None and _quick_at(quick[0]) == at
        assert quick[1] == _strict(raw.encode())[1]


def test_anything_unusual_goes_to_the_strict_parser() -> None:
    for raw in (
        b"---\nat: 'it''s'\n---\nan escaped quote",
        b"---\nyes: x\n---\nboolean key",
        b"---\nat: a\nat: b\n---\nrepeated",
        b"---\nat:x\n---\nno space",
        b"---\nat: x\n",
        b"no fence",
        b"---\nat: \xff\n---\n",
        b"---\n" + b"k: v\n" * 20 + b"---\nlong header",
    ):
        assert quick_entry(raw) is None, raw


def test_every_single_unusual_piece_in_a_plain_entry_gets_the_strict_answer() -> None:
    """Each piece one step away from plain, in an otherwise plain entry (exhaustive)."""
    plain = ["---", "from: claude", "action: fyi", "---", "body"]
    variants = []
    for fence in FENCES[0] + FENCES[1]:
        variants += [[fence, *plain[1:]], [*plain[:3], fence, plain[4]]]
    for key in KEYS[0] + KEYS[1]:
        for sep in SEPARATORS[0] + SEPARATORS[1]:
            for value in VALUES[0] + VALUES[1]:
                variants.append([*plain[:2], f"{key}{sep}{value}", *plain[2:]])
    for lines in variants:
        for newline in ("\n", "\r\n"):
            raw = newline.join(lines).encode()
            quick = quick_entry(raw)
            if quick is not None:
                assert (_quick_at(quick[0]), quick[1]) == _strict(raw), raw

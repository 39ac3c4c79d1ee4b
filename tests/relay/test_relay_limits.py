"""Every relay limit is checked before the write and refused whole, never trimmed.

A reply over its cap (25 words, one line) leaves the inbox as it was. A notes file never grows
past what ``stats`` reads: a write that would is refused whole (exit 1, naming the limit), before
anything is written, like the inbox's own bound.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot import relay
from mailslot.cli import cli
from mailslot.core.errors import InvalidValue, LimitExceeded
from mailslot.relay.stats import NOTES_READ_MAX_BYTES as NOTES_MAX_BYTES
from mailslot.relay.stats import stats


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (" ".join(["word"] * 26), "26 words; at most 25 words allowed"),
        ("line one\nline two", "lines"),
        ("line one\u2028line two", "lines"),  # a separator a reader might honour
        ("  ", "at least 1"),
    ],
)
def test_caps_are_refused_in_the_write_path(mb: Path, text: str, match: str) -> None:
    relay.ask(mb, "w1", "question", wait=False)
    before = (mb / "to-w1.md").read_bytes()
    with pytest.raises(LimitExceeded, match=match):
        relay.reply(mb, "manager", "C01", text)
    assert (mb / "to-w1.md").read_bytes() == before  # refused whole, never trimmed
    relay.reply(mb, "manager", "C01", " ".join(["word"] * 25))  # 25 is allowed


def _fill(notes: Path, room: int) -> None:
    """Make ``notes`` a file with ``room`` bytes left under the bound (one long unreadable line)."""
    with notes.open("wb") as f:
        f.truncate(NOTES_MAX_BYTES - room - 1)
        f.seek(0, os.SEEK_END)
        f.write(b"\n")
    assert os.path.getsize(notes) == NOTES_MAX_BYTES - room


def test_a_note_that_would_pass_the_read_bound_is_refused_whole(mb: Path) -> None:
    notes = mb / "state" / "manager-notes.md"
    _fill(notes, 100)
    before = notes.read_bytes()
    with pytest.raises(LimitExceeded, match=r"manager-notes\.md after this line") as e:
        relay.note(mb, "manager", "x" * 200)
    assert "16 MiB" in e.value.message or str(NOTES_MAX_BYTES) in e.value.message
    assert notes.read_bytes() == before
    relay.note(mb, "manager", "fits")  # a shorter one still fits
    assert os.path.getsize(notes) <= NOTES_MAX_BYTES
    stats(mb)  # and the file is still one stats reads


def test_the_cli_refuses_it_with_exit_1(mb: Path) -> None:
    _fill(mb / "state" / "w1-notes.md", 10)
    r = CliRunner().invoke(cli, ["--root", str(mb), "--as", "w1", "relay", "note", "y" * 50])
    assert r.exit_code == 1, (r.output, r.exception)
    assert r.stderr.startswith("mailslot: error:") and "w1-notes.md" in r.stderr


def test_serve_refuses_its_seen_line_rather_than_overfill(mb: Path) -> None:
    notes = mb / "state" / "manager-notes.md"
    _fill(notes, 10)
    before = notes.read_bytes()
    relay.ask(mb, "w1", "when?", wait=False)
    with pytest.raises(LimitExceeded):
        relay.serve(mb, "manager", timeout=1)
    assert notes.read_bytes() == before


def _snapshot(mb: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(mb.rglob("*.md"))}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a NUL\x00byte", "NUL"),
        ("clear \x1b[2J screen", "U+001B"),
        ("bell\x07", "U+0007"),
        ("del\x7f", "U+007F"),
        ("csi\x9b31m", "U+009B"),
    ],
)
def test_control_characters_are_refused_in_notes_and_turns(mb: Path, text: str, named: str) -> None:
    """As ``exchange send`` refuses a NUL: refused whole with a clear error, nothing written."""
    before = _snapshot(mb)
    with pytest.raises(InvalidValue, match=re.escape(f"note holds a control character ({named})")):
        relay.note(mb, "manager", text)
    with pytest.raises(InvalidValue, match=re.escape(f"say holds a control character ({named})")):
        relay.ask(mb, "w1", text, wait=False)
    with pytest.raises(InvalidValue, match=r"control character"):
        relay.post(relay.open_relay(mb), "w1", f"- [13:00] (w1) id=C01 T0=1722868950123 say={text}")
    with pytest.raises(InvalidValue, match=r"control character"):
        relay.stop(mb, "w1", text)
    assert _snapshot(mb) == before


def test_tabs_and_line_breaks_stay_legal_where_they_were(mb: Path) -> None:
    with pytest.raises(InvalidValue, match=r"\(U\+000B\)"):  # a line break only to some
        relay.note(mb, "manager", "vertical\x0btab")
    notes = relay.note(mb, "manager", "took\t14 s\r\nthe human paused")
    assert notes.read_text().endswith("note: took\t14 s\n  the human paused\n")
    relay.ask(mb, "w1", "a\ttabbed question", wait=False)
    assert "say=a\ttabbed question" in (mb / "to-manager.md").read_text()


def test_the_cli_refuses_a_control_character_on_stdin_with_exit_1(mb: Path) -> None:
    r = CliRunner().invoke(
        cli, ["--root", str(mb), "--as", "w1", "relay", "note"], input="nul\x00here\n"
    )
    assert r.exit_code == 1, (r.output, r.exception)
    assert r.stderr.startswith("mailslot: error: note holds a control character (NUL)")
    assert not (mb / "state" / "w1-notes.md").exists()

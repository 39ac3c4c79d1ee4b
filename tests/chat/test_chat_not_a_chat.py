"""A mistyped path is never appended to: only a chat file (empty, or starting with a block)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.cli import cli


@pytest.mark.parametrize(
    "command", [["say", "hi"], ["join"], ["status"], ["read"], ["wait", "--timeout", "0"]]
)
def test_commands_refuse_a_file_that_is_not_a_chat(tmp_path: Path, command: list[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello world\n")
    verb, *rest = command
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", verb, str(notes), *rest])
    assert r.exit_code == 1, r.output
    assert "not a chat file" in r.stderr
    assert notes.read_text() == "hello world\n"


def test_an_empty_file_is_a_chat_to_join(tmp_path: Path) -> None:
    chat = tmp_path / "chat-2026-11-30-000000.txt"
    chat.touch()  # seed 002's creator touches the file before writing its opening message
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "say", str(chat), "hello"])
    assert r.exit_code == 0, r.stderr
    assert "---MSG---" in chat.read_text()

from pathlib import Path

import pytest

from mailslot.core.cursor import ByteCursor, CursorStore, SeenSet, state_dir
from mailslot.core.errors import FormatError


def test_state_dir_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_dir() == tmp_path / "mailslot"
    monkeypatch.setenv("MAILSLOT_STATE_DIR", str(tmp_path / "x"))
    assert state_dir() == tmp_path / "x"


def test_missing_cursor_means_nothing_seen() -> None:
    store = CursorStore("chat")
    assert store.load_bytes("/tmp/chat.txt") == ByteCursor(0, None)
    assert store.load_seen("olu").keys == set()


def test_cursors_round_trip_and_live_outside_the_data(tmp_path: Path) -> None:
    store = CursorStore("chat")
    key = str(tmp_path / "chat-1.txt") + "#kiran-1"
    store.save_bytes(key, ByteCursor(42, 7))
    assert store.load_bytes(key) == ByteCursor(42, 7)
    assert not str(store.path_for(key)).startswith(str(tmp_path))
    store.save_seen("x", SeenSet({"b", "a"}))
    assert store.load_seen("x").unseen(["a", "c", "b", "d"]) == ["c", "d"]


def test_byte_cursor_notices_a_replaced_or_shrunk_file(tmp_path: Path) -> None:
    f = tmp_path / "log"
    f.write_text("hello\n")
    c = ByteCursor.at_end(f)
    assert c.valid_for(f)
    f.write_text("hi\n")  # same inode, shorter
    assert not c.valid_for(f)
    f.unlink()
    assert not c.valid_for(f)


def test_corrupt_cursor_is_an_error_not_a_silent_reset() -> None:
    store = CursorStore("x")
    store.save("k", {"offset": 1})
    store.path_for("k").write_text("{nope")
    with pytest.raises(FormatError, match="corrupt cursor"):
        store.load("k")

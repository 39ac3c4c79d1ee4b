"""sync_file and the non-durable state write (cursors on a hot path)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from mailslot.core.cursor import ByteCursor, CursorStore
from mailslot.core.durable import sync_file
from mailslot.core.fsio import atomic_write, file_lock, locked_append


def test_sync_file_after_the_lock_is_released(tmp_path: Path) -> None:
    log = tmp_path / "log"
    locked_append(log, "one\n")
    with file_lock(log, shared=True, blocking=False):  # nobody holds it during the sync
        assert sync_file(log) is True
    assert log.read_text() == "one\n"
    assert sync_file(tmp_path / "missing") is False


def test_sync_file_never_blocks_on_a_fifo_swapped_in_after_the_write(tmp_path: Path) -> None:
    chat = tmp_path / "chat.txt"
    locked_append(chat, "---MSG---\n")
    chat.unlink()
    os.mkfifo(chat)  # the other side put a FIFO under the name after our append
    got: list[bool] = []
    syncer = threading.Thread(target=lambda: got.append(sync_file(chat)), daemon=True)
    syncer.start()
    syncer.join(30)
    if syncer.is_alive():  # blocked in open(): give it a writer so the thread ends
        os.close(os.open(chat, os.O_WRONLY | os.O_NONBLOCK))
        syncer.join(5)
    assert got == [False], "sync_file blocked on the FIFO"


def test_non_durable_write_is_still_atomic_and_leaves_no_temp(tmp_path: Path) -> None:
    p = tmp_path / "state.json"
    atomic_write(p, "old")
    atomic_write(p, "new", durable=False)
    assert p.read_text() == "new"
    assert os.listdir(tmp_path) == ["state.json"]


def test_cursor_store_saves_without_fsync_when_asked(tmp_path: Path) -> None:
    store = CursorStore("chat", tmp_path)
    store.save_bytes("k", ByteCursor(42, 7), durable=False)
    assert store.load_bytes("k") == ByteCursor(42, 7)
    assert json.loads(store.path_for("k").read_text())["offset"] == 42

import json
import os
import time
from pathlib import Path

import pytest

from mailslot.core.cursor import COMPACT_BYTES, ByteCursor, CursorStore, SeenSet, state_dir
from mailslot.core.errors import FormatError, NoSpace


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


def test_a_take_appends_its_keys_and_another_reader_reads_only_what_was_appended(
    tmp_path: Path,
) -> None:
    store = CursorStore("w", tmp_path)
    mine, theirs = store.seen_log("olu"), store.seen_log("olu")
    mine.load()
    mine.add(["t/0001-a"])  # a first take writes the whole set
    ino = store.path_for("olu").stat().st_ino
    for n in range(2, 6):
        mine.load()
        mine.add([f"t/{n:04d}-a"])
    assert store.path_for("olu").stat().st_ino == ino  # appended, never replaced
    assert theirs.load().keys == {f"t/{n:04d}-a" for n in range(1, 6)}
    mine.load()
    mine.add(["t/0006-a"])
    assert theirs.load().keys == {f"t/{n:04d}-a" for n in range(1, 7)}
    assert store.load_seen("olu").keys == theirs.seen.keys  # a cold read agrees


def test_a_seen_mark_rewritten_by_another_process_is_read_whole(tmp_path: Path) -> None:
    store = CursorStore("w", tmp_path)
    log = store.seen_log("olu")
    log.load()
    log.add(["t/0001-a", "t/0002-a"])
    store.save_seen("olu", SeenSet({"u/0001-b"}))  # replaced under the same name
    assert log.load().keys == {"u/0001-b"}


def test_a_line_cut_short_by_a_crash_re_delivers_and_the_next_take_still_counts(
    tmp_path: Path,
) -> None:
    store = CursorStore("w", tmp_path)
    log = store.seen_log("olu")
    log.load()
    log.add(["t/0001-a"])
    log.load()
    log.add(["t/0002-a"])
    with open(store.path_for("olu"), "ab") as f:
        f.write(b'{"add": ["t/0003')  # the writer died here
    assert store.load_seen("olu").keys == {"t/0001-a", "t/0002-a"}  # 0003: delivered again
    log.load()
    log.add(["t/0004-a"])
    assert store.load_seen("olu").keys == {"t/0001-a", "t/0002-a", "t/0004-a"}


def test_appended_lines_are_folded_back_so_the_file_stays_near_the_set(tmp_path: Path) -> None:
    store = CursorStore("w", tmp_path)
    log = store.seen_log("olu")
    for n in range(1, 2001):
        log.load()
        log.add([f"t/{n:04d}-a"])
    size = store.path_for("olu").stat().st_size
    one_line = len(f'"t/{2000:04d}-a", ')
    assert size < 3 * 2000 * one_line + 1000
    assert store.load_seen("olu").keys == {f"t/{n:04d}-a" for n in range(1, 2001)}


def test_a_cursor_saved_without_fsync_is_appended_and_the_newest_line_wins(
    tmp_path: Path,
) -> None:
    store = CursorStore("chat", tmp_path)
    store.save_bytes("k", ByteCursor(10, 7))  # durable: one line, replaced atomically
    for offset in range(11, 400):
        store.save_bytes("k", ByteCursor(offset, 7), durable=False)
        assert store.load_bytes("k") == ByteCursor(offset, 7)
    assert store.path_for("k").stat().st_size <= 2 * COMPACT_BYTES  # folded back as it grows
    with open(store.path_for("k"), "ab") as f:
        f.write(b'{"inode": 7, "offset": 9')  # cut short by a crash: ignored
    assert store.load_bytes("k") == ByteCursor(399, 7)


def test_a_seen_mark_as_a_single_json_document_still_reads(tmp_path: Path) -> None:
    store = CursorStore("w", tmp_path)
    store.dir.mkdir(parents=True)
    store.path_for("olu").write_text(json.dumps({"key": "olu", "seen": ["t/0001-a"]}))
    log = store.seen_log("olu")
    assert log.load().keys == {"t/0001-a"}
    log.add(["t/0002-a"])
    assert store.load_seen("olu").keys == {"t/0001-a", "t/0002-a"}


# Cursor files are read back from a state directory anything running as the user can write.
_DAMAGED_BYTE_CURSORS = [
    b'{"offset": "abc"}\n',
    b'{"offset": -50}\n',
    b'{"offset": 1e999}\n',
    b'{"offset": [1]}\n',
    b'{"offset": true}\n',
    b'{"offset": 3, "inode": "x"}\n',
    b"[" * 200_000 + b"\n",
]


@pytest.mark.parametrize("raw", _DAMAGED_BYTE_CURSORS, ids=lambda r: repr(r[:20]))
def test_a_damaged_byte_cursor_is_a_format_error_naming_its_file(
    tmp_path: Path, raw: bytes
) -> None:
    store = CursorStore("chat", tmp_path)
    store.save_bytes("k", ByteCursor(1, 2))
    store.path_for("k").write_bytes(raw)
    with pytest.raises(FormatError, match="corrupt cursor") as e:
        store.load_bytes("k")
    assert e.value.path == store.path_for("k")


def test_a_seen_mark_nested_past_the_stack_is_a_format_error_and_the_next_take_rewrites_it(
    tmp_path: Path,
) -> None:
    store = CursorStore("w", tmp_path)
    log = store.seen_log("olu")
    log.load()
    log.add(["t/0001-a"])
    with open(store.path_for("olu"), "ab") as f:
        f.write(b'{"add": ' + b"[" * 200_000 + b"\n" + b'{"add": "t/0002-a"}\n')
    with pytest.raises(FormatError, match="corrupt cursor"):
        log.load()  # the same reader, reading only what was appended
    with pytest.raises(FormatError, match="corrupt cursor"):
        store.load_seen("olu")  # a new reader, reading it whole
    log.seen.keys.clear()  # what the exchange watch does: a fresh reader
    log.add(["t/0003-a"])
    assert store.load_seen("olu").keys == {"t/0003-a"}


def test_a_cursor_saved_after_a_line_cut_short_stands_on_its_own_line(tmp_path: Path) -> None:
    store = CursorStore("chat", tmp_path)
    store.dir.mkdir(parents=True)
    store.path_for("k").write_bytes(b'{"inode": 7, "off')  # the only line, cut by a kill
    store.save_bytes("k", ByteCursor(12, 7), durable=False)
    assert store.load_bytes("k") == ByteCursor(12, 7)


def test_a_save_without_fsync_makes_a_state_dir_that_is_not_there(tmp_path: Path) -> None:
    store = CursorStore("chat", tmp_path / "state" / "not-made-yet")
    store.save_bytes("room@/x", ByteCursor(7, 42), durable=False)
    assert store.load_bytes("room@/x") == ByteCursor(7, 42)
    store.save_bytes("room@/x", ByteCursor(9, 42), durable=False)
    assert store.load_bytes("room@/x") == ByteCursor(9, 42)


def test_a_seen_mark_whose_directory_was_removed_makes_it_again(tmp_path: Path) -> None:
    import shutil

    store = CursorStore("exchange-watch", tmp_path / "state")
    log = store.seen_log("olu@/ex")
    log.load()
    log.add(["t/0001-claude"])
    log.load()
    shutil.rmtree(tmp_path / "state")
    log.add(["t/0002-claude"])  # no error: the directory is made again and the mark written
    assert store.path_for("olu@/ex").read_bytes().endswith(b'{"add": ["t/0002-claude"]}\n')


def test_a_full_state_disk_is_no_space_naming_the_state_dir_and_a_saved_cursor_stands(
    small_disk: Path, fill_disk
) -> None:
    store = CursorStore("chat", small_disk)
    store.save_bytes("k", ByteCursor(1, 2))
    fill_disk(small_disk)
    with pytest.raises(NoSpace) as e:
        for offset in range(2, 1000):  # appends fill the file's page, then the disk refuses
            store.save_bytes("k", ByteCursor(offset, 2), durable=False)
    assert e.value.path == store.dir
    saved = store.load_bytes("k")
    assert saved.inode == 2 and 1 <= saved.offset < offset  # an older position: re-delivers


def test_a_rewrite_removes_what_a_writer_killed_mid_rewrite_left(tmp_path: Path) -> None:
    store = CursorStore("w", tmp_path)
    store.save_seen("olu", SeenSet({"t/0001-a"}))
    final = store.path_for("olu").name
    left = store.dir / f".{final}.4242.0badf00d.tmp"  # a killed rewrite's temp, hours old
    fresh = store.dir / f".{final}.4243.0badf00e.tmp"  # a rewrite that may still be running
    left.write_text('{"seen": []}\n')
    fresh.write_text('{"seen": []}\n')
    os.utime(left, (time.time() - 2 * 3600,) * 2)
    store.save_seen("olu", SeenSet({"t/0001-a", "t/0002-a"}))
    assert not left.exists() and fresh.exists()
    for offset in range(200):  # a cursor's appended lines folded back: the same sweep
        store.save_bytes("k", ByteCursor(offset, 7), durable=False)
    assert fresh.exists() and store.load_seen("olu").keys == {"t/0001-a", "t/0002-a"}


def test_a_value_file_grown_past_its_bound_is_refused_unread_and_junk_lines_are_not_all_tried(
    tmp_path: Path,
) -> None:
    from mailslot.core.cursor import VALUE_LINES_TRIED, VALUE_MAX_BYTES

    store = CursorStore("chat", tmp_path)
    store.save_bytes("k", ByteCursor(5, 7))
    path = store.path_for("k")
    with open(path, "ab") as f:
        f.write(b"x\n" * (VALUE_MAX_BYTES // 2 + 1))
    with pytest.raises(OSError, match="larger than"):
        store.load_bytes("k")
    store.save_bytes("k", ByteCursor(5, 7))
    with open(path, "ab") as f:
        f.write(b"x\n" * (VALUE_LINES_TRIED - 1) + b'{"inode": 7, "off')
    assert store.load_bytes("k") == ByteCursor(5, 7)  # among the last lines: found
    with open(path, "ab") as f:
        f.write(b"\n")
    with pytest.raises(FormatError, match="no line"):
        store.load_bytes("k")  # buried under more junk than a crash leaves: damage


def test_a_seen_mark_buried_in_junk_lines_is_damage_and_a_few_cut_lines_are_not(
    tmp_path: Path,
) -> None:
    from mailslot.core.cursor import DAMAGED_LINES_MAX

    store = CursorStore("w", tmp_path)
    store.save_seen("olu", SeenSet({"t/0001-a"}))
    with open(store.path_for("olu"), "ab") as f:
        f.write(b'{"add": ["t/00\n' * DAMAGED_LINES_MAX + b'{"add": ["t/0002-a"]}\n')
    assert store.load_seen("olu").keys == {"t/0001-a", "t/0002-a"}  # one cut line per kill
    with open(store.path_for("olu"), "ab") as f:
        f.write(b"x\n" + b'{"add": ["t/0003-a"]}\n')
    with pytest.raises(FormatError, match="lines do not read"):
        store.load_seen("olu")  # more junk than kills leave: a fresh reader, re-delivered


def test_a_save_whose_fold_finds_no_room_still_stored_its_value(
    small_disk: Path, fill_disk
) -> None:
    store = CursorStore("chat", small_disk)
    store.save_bytes("k", ByteCursor(0, 7))
    path = store.path_for("k")
    line = path.read_bytes()
    with open(path, "ab") as f:  # one line short of the fold, on a page of its own
        f.write(line * ((COMPACT_BYTES - len(line)) // len(line)))
    fill_disk(small_disk, 1)  # room for the append's next page, none for the fold's temp
    store.save_bytes("k", ByteCursor(1, 7), durable=False)
    assert path.stat().st_size > COMPACT_BYTES  # not folded: no room
    assert store.load_bytes("k") == ByteCursor(1, 7)


# -- ValueLog: a value saved again and again on a descriptor kept open ----------------------


def test_a_value_log_appends_what_the_store_reads_and_follows_a_fold_by_another(
    tmp_path: Path,
) -> None:
    store = CursorStore("chat")
    log = store.value_log("k")
    try:
        log.save({"offset": 1, "inode": 9})
        log.save({"offset": 2, "inode": 9})
        assert store.load("k") == {"key": "k", "offset": 2, "inode": 9}
        line = store.path_for("k").read_bytes().splitlines()[-1]
        assert json.loads(line) == {"inode": 9, "key": "k", "offset": 2}
        assert line == json.dumps(json.loads(line), sort_keys=True).encode()  # the store's form
        store.save("k", {"offset": 3, "inode": 9}, durable=True)  # another process replaces it
        log.save({"offset": 4, "inode": 9})
        assert store.load("k") == {"key": "k", "offset": 4, "inode": 9}
    finally:
        log.close()


def test_a_value_logs_line_form_writes_the_stores_line_for_any_key(tmp_path: Path) -> None:
    store = CursorStore("chat")
    key = '/chats/100% "é".txt\0bob'  # a percent sign, a quote and a letter JSON escapes
    log = store.value_log(key)
    try:
        form = log.line_form(("before", "inode", "offset"))
        log.save_line(form % (7, 9, 120))
        assert store.load(key) == {"key": key, "before": 7, "inode": 9, "offset": 120}
        line = store.path_for(key).read_bytes().splitlines()[-1]
        assert line == json.dumps(json.loads(line), sort_keys=True).encode()  # the store's form
        with pytest.raises(ValueError, match="sorted"):
            log.line_form(("offset", "inode"))  # values would land in the wrong fields
        with pytest.raises(ValueError):
            log.line_form(("inode", "key"))
    finally:
        log.close()


def test_a_value_log_ends_a_line_another_writer_cut_short(tmp_path: Path) -> None:
    store = CursorStore("chat")
    log = store.value_log("k")
    try:
        log.save({"offset": 1})
        with open(store.path_for("k"), "ab") as f:
            f.write(b'{"key": "k", "off')  # a writer killed mid-append
        log.save({"offset": 5})
        assert store.load("k") == {"key": "k", "offset": 5}
    finally:
        log.close()


@pytest.mark.parametrize("when", ["before prepare", "after prepare"])
def test_a_prepared_value_log_ends_a_line_cut_short_before_or_after_it_looked(
    tmp_path: Path, when: str
) -> None:
    """``prepare`` looks at how the file ends ahead of the save: a line a killed writer left
    cut short is ended first whether it was there when it looked or came after."""
    store = CursorStore("chat")
    store.save("k", {"offset": 1}, durable=False)
    log = store.value_log("k")
    cut = b'{"key": "k", "off'  # a writer killed mid-append
    try:
        if when == "before prepare":
            with open(store.path_for("k"), "ab") as f:
                f.write(cut)
        log.prepare()
        if when == "after prepare":
            with open(store.path_for("k"), "ab") as f:
                f.write(cut)
        log.save({"offset": 5})
        assert store.load("k") == {"key": "k", "offset": 5}
        assert store.path_for("k").read_bytes().endswith(cut + b'\n{"key": "k", "offset": 5}\n')
    finally:
        log.close()


def test_a_value_log_folds_back_to_its_newest_line(tmp_path: Path) -> None:
    store = CursorStore("chat")
    log = store.value_log("k")
    try:
        for _ in range(COMPACT_BYTES // 20):
            log.save({"offset": 7})
        assert log.path.stat().st_size > COMPACT_BYTES
        log.fold()
        assert store.path_for("k").read_bytes().count(b"\n") == 1
        log.save({"offset": 8})
        assert store.load("k") == {"key": "k", "offset": 8}
    finally:
        log.close()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_something_not_a_file_at_a_cursor_name_is_an_os_error_naming_it(kind: str) -> None:
    store = CursorStore("chat")
    path = store.path_for("k")
    path.parent.mkdir(parents=True)
    path.mkdir() if kind == "directory" else os.mkfifo(path)
    with pytest.raises(OSError) as e:
        store.load("k")
    assert e.value.filename == str(path)
    saves = [
        lambda: store.save("k", {"offset": 1}, durable=False),
        lambda: store.value_log("k").save({"offset": 1}),
    ]
    if kind == "directory":  # a FIFO is replaced by a durable save's rename
        saves.append(lambda: store.save("k", {"offset": 1}))
    for save in saves:
        with pytest.raises(OSError) as e:
            save()
        assert e.value.filename == str(path) and ".tmp" not in str(e.value)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp left


def _open_on(path: Path) -> int:
    """How many of this process's descriptors are open on ``path``."""
    fds = Path("/proc/self/fd")
    n = 0
    for fd in os.listdir(fds):
        try:
            n += os.readlink(fds / fd) == str(path)
        except OSError:
            continue
    return n


def test_a_seen_log_held_open_follows_what_others_do_to_its_file(tmp_path: Path) -> None:
    """A reader that takes again and again keeps its seen-mark open, yet sees what another
    process appended, a rewrite under the same name and a removal, as one that opens it
    each time does; ``close`` lets the file go."""
    store = CursorStore("w", tmp_path)
    path = store.path_for("olu")
    mine, theirs = store.seen_log("olu"), store.seen_log("olu")
    mine.hold = True
    mine.load()
    mine.add(["t/0001-a"])
    mine.load()
    mine.add(["t/0002-a"])
    assert _open_on(path) == 1  # held between takes
    theirs.load()
    theirs.add(["t/0003-a"])  # appended by another process acting as the same reader
    assert mine.load().keys == {"t/0001-a", "t/0002-a", "t/0003-a"}
    mine.add(["t/0004-a"])
    assert theirs.load().keys == {"t/0001-a", "t/0002-a", "t/0003-a", "t/0004-a"}
    store.save_seen("olu", SeenSet({"u/0001-b"}))  # replaced under the same name
    assert mine.load().keys == {"u/0001-b"}
    mine.add(["u/0002-b"])
    assert store.load_seen("olu").keys == {"u/0001-b", "u/0002-b"}
    mine.load()
    path.unlink()  # removed between a load and the add: the add goes to the name
    mine.add(["u/0003-b"])
    assert path.read_bytes().endswith(b'{"add": ["u/0003-b"]}\n')
    mine.load()
    mine.close()
    assert _open_on(path) == 0


def test_a_take_checked_as_read_writes_what_add_writes_and_a_failed_write_marks_nothing(
    tmp_path: Path,
) -> None:
    """``add_as_read`` (after ``held_as_read`` said true) leaves the file byte for byte as
    ``add`` does, folding back when ``add`` would; a line removed under it goes to the name; a
    write that fails keeps nothing of it in memory and the next load reads the file whole."""
    fast, slow = CursorStore("w", tmp_path / "fast"), CursorStore("w", tmp_path / "slow")
    a, b = fast.seen_log("olu"), slow.seen_log("olu")
    a.hold = b.hold = True
    for log in (a, b):
        log.load()
        log.add(["t/0000-a"], {"marked_ns": 1})
    for n in range(1, 600):  # past COMPACT_KEYS: folded back at the same takes
        a.load()
        assert a.held_as_read()
        a.add_as_read([f"t/{n:04d}-a", f"t/{n:04d}-a@3.4"], n)
        b.load()
        b.add([f"t/{n:04d}-a", f"t/{n:04d}-a@3.4"], {"marked_ns": n})
        assert fast.path_for("olu").read_bytes() == slow.path_for("olu").read_bytes(), n
        assert a.seen.keys == b.seen.keys and a.meta == b.meta
    a.load()
    assert a.held_as_read()
    fast.path_for("olu").unlink()
    a.add_as_read(["u/0001-b"], 7)
    assert fast.path_for("olu").read_bytes() == b'{"add": ["u/0001-b"], "meta": {"marked_ns": 7}}\n'
    a.load()
    assert a.held_as_read()
    before, size = set(a.seen.keys), fast.path_for("olu").stat().st_size
    ro = os.open(fast.path_for("olu"), os.O_RDONLY)
    os.dup2(ro, a._fd)  # the held file now refuses the write (EBADF)
    os.close(ro)
    with pytest.raises(OSError):
        a.add_as_read(["u/0002-b"], 8)
    assert a.seen.keys == before and a.meta.get("marked_ns") != 8
    assert fast.path_for("olu").stat().st_size == size
    assert "u/0002-b" not in a.load().keys

"""Reading a file someone else may have planted is refused at once, never waited on or read whole.

``read_regular`` refuses what could block or mislead (a FIFO, a symlink, a file over its bound);
``read_from`` and ``locked_append`` refuse a FIFO named like a log without blocking, and a huge
sparse file with an error that names the limit (a bounded slice of it still reads). A
``HeldReader`` that reads as far as its caller saw and a page more still reads to the end, and
refuses past its limit, whatever the file did since its caller looked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mailslot.core.errors import FormatError, LimitExceeded
from mailslot.core.fsio import (
    READ_FROM_MAX,
    HeldReader,
    append_unsynced,
    locked_append,
    read_from,
)
from shared_helpers import in_thread


def test_read_regular_refuses_what_could_block_or_mislead(tmp_path: Path) -> None:
    from mailslot.core.fsio import read_regular

    ok = tmp_path / "0001-olu.md"
    ok.write_bytes(b"x" * 10)
    assert read_regular(ok, 10) == b"x" * 10
    with pytest.raises(OSError, match="larger than 9 bytes"):
        read_regular(ok, 9)
    fifo = tmp_path / "0002-olu.md"
    os.mkfifo(fifo)  # a plain open() would block here forever
    with pytest.raises(OSError, match="not a regular file"):
        read_regular(fifo, 100)
    link = tmp_path / "0003-olu.md"
    link.symlink_to(ok)
    with pytest.raises(OSError):
        read_regular(link, 100)


def _refused_at_once(call) -> BaseException:
    """What ``call`` raised, within 10 s: it must neither block nor succeed."""
    t, box = in_thread(call)
    t.join(10)
    assert not t.is_alive(), "blocked on the file instead of refusing it"
    assert "error" in box, "read a file it should have refused"
    return box["error"]


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "LOG.md"
    os.mkfifo(fifo)
    e = _refused_at_once(lambda: read_from(fifo))
    assert isinstance(e, FormatError) and "not a regular file" in str(e)
    e = _refused_at_once(lambda: locked_append(fifo, "line\n"))
    assert isinstance(e, OSError | FormatError)
    # a cursor's unsynced append, whether or not anyone holds the FIFO open for reading
    e = _refused_at_once(lambda: append_unsynced(fifo, b"{}\n"))
    assert isinstance(e, OSError)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        e = _refused_at_once(lambda: append_unsynced(fifo, b"{}\n"))
        assert isinstance(e, OSError) and "not a regular file" in str(e)
        assert os.read(reader, 10) == b""  # nothing was written into it
    finally:
        os.close(reader)


def test_a_huge_file_is_refused_naming_the_limit(tmp_path: Path) -> None:
    huge = tmp_path / "LOG.md"
    with huge.open("wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GB that cost nothing
    e = _refused_at_once(lambda: read_from(huge))
    assert isinstance(e, LimitExceeded) and e.limit == READ_FROM_MAX
    assert f"at most {READ_FROM_MAX} bytes" in str(e)
    assert read_from(huge, (3 << 30) - 10) == b"\0" * 10  # a bounded slice is still fine


def test_a_held_reader_reads_to_the_end_whatever_size_its_caller_saw(tmp_path: Path) -> None:
    log = tmp_path / "chat.txt"
    log.write_bytes(b"a" * 100)
    ino = log.stat().st_ino
    reader = HeldReader(log)
    try:
        assert reader.read(10, ino, 100) == b"a" * 90
        with log.open("ab") as f:  # appended after the caller looked: far more than a page
            f.write(b"b" * 50_000)
        assert reader.read(10, ino, 100) == b"a" * 90 + b"b" * 50_000
        os.truncate(log, 40)  # cut shorter than the caller saw
        assert reader.read(10, ino, 50_100) == b"a" * 30
        assert reader.read(40, ino, 40) == b""
    finally:
        reader.close()


def test_a_held_reader_refuses_more_than_its_limit_naming_the_size(tmp_path: Path) -> None:
    log = tmp_path / "chat.txt"
    log.write_bytes(b"a" * 500)
    ino = log.stat().st_ino
    reader = HeldReader(log)
    try:
        assert reader.read(0, ino, 500, limit=1000) == b"a" * 500
        with log.open("ab") as f:  # grown past the limit since the caller looked
            f.write(b"b" * 4500)
        with pytest.raises(LimitExceeded) as e:
            reader.read(0, ino, 500, limit=1000)
        assert (e.value.limit, e.value.actual) == (1000, 5000)
        assert reader.read(4100, ino, 500, limit=1000) == b"b" * 900  # a bounded slice reads
    finally:
        reader.close()

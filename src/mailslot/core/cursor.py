"""Reader cursors, kept in the reader's own state directory.

A reader may not be allowed to write where it reads (an agent reads an inbox the other side
writes), so cursors live under ``$XDG_STATE_HOME/mailslot`` (or ``$MAILSLOT_STATE_DIR``), never
next to the data. A reader that never read has seen nothing: a missing cursor means "deliver
everything pending", so an offline recipient loses nothing. A reader writes one only after its
output is out.

Two shapes: ``ByteCursor`` for append-only files (an offset plus the file's identity, so a file
replaced under the same name is noticed) and ``SeenSet`` for directories of immutable entries.

On disk a cursor is JSON lines. A durable save replaces the file atomically (temp + fsync +
rename) with one line; a save without fsync -- wait cursors, seen-marks, on the hot path of every
delivery -- appends a line (``fsio.append_unsynced``: a few microseconds, where a temp + rename
waits on the filesystem journal under load), and the file is rewritten with one line once it
grows past ``COMPACT_BYTES``. For a value the newest whole line wins; a seen-set is its first
line (``{"seen": [...]}``) plus every ``{"add": [...]}`` after it, so a take appends only its own
keys, and ``SeenLog`` re-reads only what was appended since it last looked. A line cut short by a
crash is ignored and a save without fsync may come back older after a power cut: both only
re-deliver, never lose. A file with no whole line that reads is ``FormatError`` (a single JSON
document without a newline is read as one line); a value is looked for only among the last
``VALUE_LINES_TRIED`` lines of a file of at most ``VALUE_MAX_BYTES``.

A reader that saves again and again (a waiter) keeps its value's file open (``ValueLog``): a save
is one ``os.write`` on an ``O_APPEND`` descriptor, after a ``fstat`` that notices the file was
replaced (reopened) or written by another process (a line it cut short is ended first); the fold
back to one line is done before the reader blocks, never between its wake and its return.

Something other than a regular file at a cursor's name (a directory, a FIFO, a symlink) is an
``OSError`` naming that name -- never a temp file -- which a reader reports as a warning and
reads as "nothing seen" (re-delivery). Values whose key names something gone are removed by
``sweep``, and only once their file has been left alone for a while.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from mailslot.core.errors import FormatError, NoSpace
from mailslot.core.fsio import (
    append_unsynced,
    atomic_write,
    read_regular,
    sweep_temps,
    write_all,
)
from mailslot.core.record import FrozenRecord, Record

__all__ = ["ByteCursor", "CursorStore", "SeenLog", "SeenSet", "ValueLog", "state_dir"]


def state_dir() -> Path:
    """The per-user state directory mailslot writes cursors and local settings into."""
    explicit = os.environ.get("MAILSLOT_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "mailslot"


class ByteCursor(FrozenRecord):
    """A position in an append-only file: ``offset`` bytes consumed of the file ``inode``;
    ``before``, when known, the CRC-32 of the bytes just before ``offset`` as they were read (a
    file rewritten in place under the same inode differs there).

    A ``core.record`` record, not a dataclass: every blocking command loads this module."""

    __match_args__ = ("offset", "inode", "before")
    __slots__ = ("before", "inode", "offset")
    offset: int
    inode: int | None
    before: int | None

    def __init__(
        self, offset: int = 0, inode: int | None = None, before: int | None = None
    ) -> None:
        init = object.__setattr__
        init(self, "offset", offset)
        init(self, "inode", inode)
        init(self, "before", before)

    def valid_for(self, path: Path) -> bool:
        """Whether this cursor still points into ``path`` (same file, not shorter than offset)."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return False
        if self.inode is not None and st.st_ino != self.inode:
            return False
        return st.st_size >= self.offset

    def may_hold_in(self, path: Path) -> bool:
        """Whether this cursor's place may stand in ``path``: ``valid_for``, or the file was
        replaced (another inode, as an editor's save makes) but is not shorter than the offset
        and the bytes before the offset can be checked against ``before`` by the reader."""
        if self.valid_for(path):
            return True
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return False
        return self.before is not None and size >= self.offset

    @classmethod
    def from_value(cls, value: dict[str, Any], path: Path) -> ByteCursor:
        """The cursor a stored value holds; ``FormatError`` naming ``path`` when its offset is
        not a whole number of bytes from 0 or its inode not a whole number."""
        offset, inode, before = value.get("offset", 0), value.get("inode"), value.get("before")
        if type(offset) is not int or offset < 0:
            raise FormatError("corrupt cursor: 'offset' is not a byte count", path=path)
        if inode is not None and type(inode) is not int:
            raise FormatError("corrupt cursor: 'inode' is not a number", path=path)
        if before is not None and type(before) is not int:
            raise FormatError("corrupt cursor: 'before' is not a number", path=path)
        return cls(offset, inode, before)

    @classmethod
    def at_end(cls, path: Path) -> ByteCursor:
        """A cursor past everything currently in ``path``."""
        st = path.stat()
        return cls(st.st_size, st.st_ino)


class SeenSet(Record):
    """The keys of directory entries a reader has already taken."""

    __match_args__ = ("keys",)
    __slots__ = ("keys",)
    keys: set[str]

    def __init__(self, keys: set[str]) -> None:
        self.keys = keys

    def unseen(self, keys: list[str]) -> list[str]:
        """``keys`` not yet seen, order kept."""
        return [k for k in keys if k not in self.keys]


def _sha256_hex(data: bytes) -> str:
    try:  # CPython's own SHA-256: hashlib would load OpenSSL first (4-6 ms measured here)
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:
        from hashlib import sha256
    return str(sha256(data).hexdigest())


@lru_cache(maxsize=256)  # asked again on every save and load of a waiter's cursor
def _slug(key: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[-60:].strip("._") or "key"
    return f"{readable}.{_sha256_hex(key.encode())[:16]}"


# Past this size a value's file is rewritten with its newest line alone (about a hundred saves).
COMPACT_BYTES = 4096
# A seen-set is rewritten as one line once its appended lines hold this many keys and more than
# its first line does: the file stays within about twice the set.
COMPACT_KEYS = 256
# The most a cursor file is read: a seen-set of a million keys; anything larger is damage.
CURSOR_MAX_BYTES = 64 << 20
# A value's file is folded back to one line past ``COMPACT_BYTES``, and its newest whole line is
# one of its last few: a file larger, or with no readable line among its last lines, is damage
# (read whole and tried line by line, 64 MB of junk lines cost minutes and gigabytes).
VALUE_MAX_BYTES = 1 << 20
# Lines of a seen-set cut by kills mid-append before the file was folded back: more is damage.
DAMAGED_LINES_MAX = 64
VALUE_LINES_TRIED = 16


def _lines(raw: bytes, path: Path) -> list[bytes]:
    """The whole lines of a cursor file (a last line without its newline was cut short); a
    file with no newline at all is one line. ``FormatError`` for an empty file."""
    if not raw:
        raise FormatError("corrupt cursor: empty", path=path)
    if b"\n" not in raw:
        return [raw]
    return raw.split(b"\n")[:-1]


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the stack
        return None
    return value if isinstance(value, dict) else None


def _records(lines: list[bytes], path: Path) -> Iterator[dict[str, Any]]:
    """The records among appended ``lines``, skipping lines a crash cut (each kill mid-append
    leaves one); ``FormatError`` past ``DAMAGED_LINES_MAX`` of them: that is damage, and trying
    millions of junk lines as JSON would hold the reader for minutes."""
    damaged = 0
    for line in lines:
        record = _record(line)
        if record is not None:
            yield record
            continue
        damaged += 1
        if damaged > DAMAGED_LINES_MAX:
            raise FormatError(
                f"corrupt cursor: more than {DAMAGED_LINES_MAX} lines do not read", path=path
            )


def _pread(fd: int, length: int, offset: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        length -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _read(path: Path) -> bytes | None:
    try:
        return read_regular(path, VALUE_MAX_BYTES)
    except FileNotFoundError:
        return None


def _newest_lines(raw: bytes, path: Path) -> list[bytes]:
    """The last ``VALUE_LINES_TRIED`` whole lines of a value's file, newest first."""
    if not raw:
        raise FormatError("corrupt cursor: empty", path=path)
    end = raw.rfind(b"\n")
    if end < 0:
        return [raw]
    lines = raw[:end].rsplit(b"\n", VALUE_LINES_TRIED)
    if len(lines) > VALUE_LINES_TRIED:
        del lines[0]  # the older lines, still joined: never split
    return lines[::-1]


def _replace(path: Path, data: bytes, *, durable: bool) -> None:
    """``atomic_write`` whose failure names ``path``, never the temp it wrote first: a directory
    or a FIFO at a cursor's name is the user's to remove, and only its name tells them which."""
    try:
        atomic_write(path, data, durable=durable)
    except NoSpace:
        raise
    except OSError as e:
        kind = "" if stat.S_ISREG(_mode(path)) else " (not a regular file)"
        raise OSError(e.errno, f"{e.strerror}{kind}", str(path)) from None


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return stat.S_IFREG


def _idle_file(path: Path, cutoff: float) -> bool:
    """Whether ``path`` is a regular file last written before ``cutoff`` (epoch seconds)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff


def _sweep(directory: Path) -> None:
    """Remove the temps of rewrites whose writer was killed before the rename (each as large as
    the set it held): a rewrite is rare enough to pay for the listing."""
    try:
        sweep_temps(directory)
    except OSError:
        pass  # a later rewrite tries again


def _seen_keys(record: dict[str, Any], field: str, path: Path) -> list[str]:
    keys = record.get(field, [])
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise FormatError(f"corrupt cursor: {field!r} is not a list of keys", path=path)
    return keys


def _meta(record: dict[str, Any], path: Path) -> dict[str, Any]:
    meta = record.get("meta", {})
    if not isinstance(meta, dict):
        raise FormatError("corrupt cursor: 'meta' is not an object", path=path)
    return meta


class SeenLog:
    """One reader's seen-set on disk, kept current by reading only what was appended.

    ``load`` returns the set (the same object every time, updated in place); ``add`` appends the
    keys just taken; ``rewrite`` replaces the file with one line holding the set (after keys were
    dropped). Writers for one reader serialise themselves (the exchange watch holds a lock);
    a rewrite by another process is noticed by the file's identity and read whole.

    With ``hold`` (a reader that takes again and again), the file stays open between calls
    (``close`` lets it go): a ``load`` is then one ``lstat`` of its name while nobody else
    wrote, and an ``add`` one ``write`` and one ``fstat``.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self._where = str(path)  # ``path`` for the ``lstat`` of every load: no ``pathlib`` call
        self.key = key
        self.seen = SeenSet(set())
        self.meta: dict[str, Any] = {}  # the caller's notes kept with the set (first line "meta")
        self._at: tuple[int, int] | None = None  # (inode, bytes read) of what ``seen`` holds
        self._added = 0  # keys in appended lines, against those in the first line
        self._first = 0
        self._end = 0  # the file's size at the last look: past ``_at``, a line cut short
        # How many times ``seen`` was read whole or emptied (keys may have gone from it): a
        # caller that keeps what it found unseen looks at everything again when this moves
        self.resets = 0
        self.hold = False
        self._fd = -1  # the file held open (``hold``), appending, and its inode
        self._ino = -1

    def close(self) -> None:
        """Let the file held open go (the next ``load`` opens it again)."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._ino = -1, -1

    def _held_current(self) -> bool:
        """Whether the file held open is still the one at the name and nothing but what was
        read is in it; if more was appended, that is read (``FormatError`` if it does not)."""
        try:
            st = os.lstat(self._where)
        except OSError:
            return False
        at = self._at
        if (
            at is None
            or st.st_ino != self._ino
            or at[0] != st.st_ino
            or not stat.S_ISREG(st.st_mode)
            or not at[1] <= st.st_size <= CURSOR_MAX_BYTES
        ):
            return False
        self._end = st.st_size
        if st.st_size > at[1]:
            try:
                self._append(_pread(self._fd, st.st_size - at[1], at[1]), st)
            except FormatError:
                self._at = None
                raise
        return True

    def held_as_read(self) -> bool:
        """Whether the file is held open, is still the one at the name, and holds what was
        read and no more (one ``lstat``): the set in memory is the file's, as ``load`` would
        find it, and an ``add`` is one ``write``."""
        if self._fd < 0:
            return False
        try:
            st = os.lstat(self._where)
        except OSError:
            return False
        at = self._at
        return (
            at is not None
            and st.st_ino == self._ino == at[0]
            and st.st_size == at[1] == self._end
            and stat.S_ISREG(st.st_mode)
        )

    def load(self) -> SeenSet:
        """The seen-set as the file says now; ``FormatError`` if it does not read."""
        if self._fd >= 0:
            if self._held_current():
                return self.seen
            self.close()
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        held = self.hold
        try:
            try:
                fd = os.open(self.path, flags | (os.O_RDWR | os.O_APPEND if held else 0))
            except PermissionError:
                if not held:
                    raise
                held = False
                fd = os.open(self.path, flags)  # read-only: read it, never held
        except FileNotFoundError:
            self.resets += 1
            self.seen.keys.clear()
            self.meta = {}
            self._at, self._added, self._first = None, 0, 0
            return self.seen
        read = False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > CURSOR_MAX_BYTES:
                raise FormatError(
                    "corrupt cursor: not a regular file of bounded size", path=self.path
                )
            at = self._at
            self._end = st.st_size
            if at is not None and at[0] == st.st_ino and st.st_size >= at[1]:
                if st.st_size > at[1]:
                    self._append(_pread(fd, st.st_size - at[1], at[1]), st)
            else:
                self._whole(_pread(fd, st.st_size, 0), st)
            read = True
        except FormatError:
            self._at = None  # the next add rewrites the file whole, without the damage
            raise
        finally:
            if held and read and self._at is not None:
                self._fd, self._ino = fd, self._at[0]
            else:
                os.close(fd)
        return self.seen

    def _whole(self, raw: bytes, st: os.stat_result) -> None:
        self.resets += 1
        self._at = None
        self.seen.keys.clear()  # a file that does not read is a fresh reader's
        self.meta = {}
        lines = _lines(raw, self.path)
        first = _record(lines[0])
        if first is None:
            raise FormatError("corrupt cursor: the first line is not a JSON object", path=self.path)
        keys = set(_seen_keys(first, "seen", self.path))
        meta = _meta(first, self.path)
        self._first, self._added = len(keys), 0
        for more in _records(lines[1:], self.path):
            added = _seen_keys(more, "add", self.path)
            keys.update(added)
            meta.update(_meta(more, self.path))
            self._added += len(added)
        self.seen.keys.update(keys)
        self.meta = meta
        if raw.endswith(b"\n"):  # else a line is still being written: read whole next time
            self._at = (st.st_ino, len(raw))

    def _append(self, tail: bytes, st: os.stat_result) -> None:
        assert self._at is not None
        cut = tail.rfind(b"\n") + 1  # a line still being written waits for the next look
        for more in _records(tail[:cut].split(b"\n")[:-1], self.path):
            added = _seen_keys(more, "add", self.path)
            self.seen.keys.update(added)
            self.meta.update(_meta(more, self.path))
            self._added += len(added)
        self._at = (st.st_ino, self._at[1] + cut)

    def add(self, keys: list[str], meta: dict[str, Any] | None = None) -> None:
        """Record ``keys`` as seen, and ``meta`` over the notes (appended, no fsync; the set is
        rewritten when the appended lines outgrow it). Call right after ``load``, under the
        caller's lock."""
        if not keys and not meta:
            return
        new = [k for k in keys if k not in self.seen.keys]
        meta_before = dict(self.meta)
        self.seen.keys.update(keys)
        self.meta.update(meta or {})
        try:
            self._add(keys, meta)
        except BaseException:  # not written (a full state dir): not seen, here either
            self.seen.keys.difference_update(new)
            self.meta = meta_before
            self._unwritten()
            raise

    def add_as_read(self, keys: list[str], marked_ns: int) -> None:
        """``add(keys, {"marked_ns": marked_ns})`` right after ``held_as_read`` said true under
        the caller's lock: the file held open holds what was read and no more, so the line goes
        through it as it stands (one ``write``, one ``fstat``) unless the set is due a rewrite;
        anything unusual goes through ``add``."""
        if self._added + len(keys) > max(COMPACT_KEYS, self._first):
            self.add(keys, {"marked_ns": marked_ns})
            return
        line = _marked_line(keys, marked_ns).encode()
        try:
            size = self._append_held(line)
        except BaseException:  # not written: nothing changed in memory either
            self._unwritten()
            raise
        if size < 0:  # removed since it was looked at: the line goes by the name
            self.add(keys, {"marked_ns": marked_ns})
            return
        self.seen.keys.update(keys)
        self.meta["marked_ns"] = marked_ns
        self._appended(size, len(line), len(keys))

    def _unwritten(self) -> None:
        """After a write that failed: the file is no longer known to be what this set last
        read or wrote, so the next ``load`` reads it whole."""
        self.close()
        self._at = None

    def _add(self, keys: list[str], meta: dict[str, Any] | None) -> None:
        if self._at is None or self._added + len(keys) > max(COMPACT_KEYS, self._first):
            self.rewrite()
            return
        line = _add_line(keys, meta).encode() + b"\n"
        if self._end > self._at[1]:  # end the line a crash cut short, so this one stands alone
            line = b"\n" + line
        size = self._append_held(line) if self._fd >= 0 and self._ino == self._at[0] else -1
        if size < 0:
            try:  # the directory is there: the set was read from it
                size = append_unsynced(self.path, line)
            except FileNotFoundError:  # removed since: made again
                self.path.parent.mkdir(parents=True, exist_ok=True)
                size = append_unsynced(self.path, line)
        self._appended(size, len(line), len(keys))

    def _appended(self, size: int, length: int, count: int) -> None:
        """After a line of ``length`` bytes adding ``count`` keys was appended, leaving the file
        ``size`` bytes long: the set held is the file's as read plus that line, unless someone
        else wrote too (then it is read whole next time)."""
        at = self._at
        if at is None or size != self._end + length:  # someone else wrote too: read it whole
            self._at = None
            return
        self._at = at[0], size
        self._end = size
        self._added += count

    def _append_held(self, line: bytes) -> int:
        """``line`` appended through the file held open: the size after it, or -1 when that
        file is no longer at its name (removed since: the line goes by the name instead)."""
        try:
            n = os.write(self._fd, line)
            if n != len(line):  # nearly always all of it at once
                write_all(self._fd, line[n:])
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                msg = f"no space left to write {self.path.name}"
                raise NoSpace(msg, path=self.path.parent) from None
            raise
        st = os.fstat(self._fd)
        if not st.st_nlink:
            self.close()
            return -1
        return st.st_size

    def rewrite(self) -> None:
        """Replace the file with one line holding the set (atomically, without fsync)."""
        self.close()  # a new file takes the name: the next load opens that one
        record: dict[str, Any] = {"key": self.key, "seen": sorted(self.seen.keys)}
        if self.meta:
            record["meta"] = self.meta
        data = json.dumps(record, ensure_ascii=False)
        line = data.encode() + b"\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _replace(self.path, line, durable=False)
        except BaseException:
            self._unwritten()
            raise
        _sweep(self.path.parent)
        self._at = os.stat(self.path).st_ino, len(line)
        self._end = len(line)
        self._first, self._added = len(self.seen.keys), 0


# ``json.dumps(..., ensure_ascii=False)`` made once: ``dumps`` builds an encoder per call
_encode = json.JSONEncoder(ensure_ascii=False).encode
_quote = json.encoder.encode_basestring  # a str as JSON, as ``_encode`` writes it


def _add_line(keys: list[str], meta: dict[str, Any] | None) -> str:
    """A ``SeenLog`` line adding ``keys`` (and ``meta``): ``_encode`` of ``{"add": keys,
    "meta": meta}``, spelled out for the common line (string keys, no notes or one integer
    ``marked_ns``), which each take writes."""
    if all(type(k) is str for k in keys):
        if not meta:
            return f'{{"add": [{", ".join(map(_quote, keys))}]}}'
        marked = meta.get("marked_ns")
        if len(meta) == 1 and type(marked) is int:
            return _marked_line(keys, marked)[:-1]
    record: dict[str, Any] = {"add": keys}
    if meta:
        record["meta"] = meta
    return _encode(record)


def _marked_line(keys: list[str], marked_ns: int) -> str:
    """The ``SeenLog`` line, with its newline, adding ``keys`` (strings) with the one note
    ``marked_ns``: the line each take writes."""
    return f'{{"add": [{", ".join(map(_quote, keys))}], "meta": {{"marked_ns": {marked_ns}}}}}\n'


@lru_cache(maxsize=64)  # one form per reader and set of fields
def _line_form(key_json: str, fields: tuple[str, ...]) -> bytes:
    """The ``%`` template of a ``ValueLog`` line: the integer ``fields`` (sorted) and the key in
    sorted order, as ``CursorStore.save`` writes them (``sort_keys``), so one formatting step
    with the values in the order of ``fields`` makes it."""
    key = key_json.replace("%", "%%")  # ASCII: ``json.dumps`` escapes the rest

    def part(name: str) -> str:
        literal = json.dumps(name).replace("%", "%%")
        return f"{literal}: {key}" if name == "key" else f"{literal}: %d"

    return ("{" + ", ".join(part(n) for n in sorted({"key", *fields})) + "}\n").encode()


class ValueLog:
    """One key's value file held open by a reader that saves again and again (a waiter).

    ``save`` appends one line with one ``os.write`` on an ``O_APPEND`` descriptor, without fsync
    (the loss of one only re-delivers); a reader that saves the same fields each time makes
    their line's template once (``line_form``) and saves the line it fills in (``save_line``),
    one formatting step. Before the write, a ``fstat``: a file no longer linked (replaced
    by a fold of another process acting as the same reader, or removed) is opened again by its
    name, and one another process appended to since this one wrote is checked for a line cut
    short, which is ended first. ``fold`` rewrites the file as its newest line once it outgrows
    ``COMPACT_BYTES``; a caller runs it where a little latency costs nothing (before blocking).
    A save that lands in a file replaced between the ``stat`` and the write is lost (another
    re-delivery, never a loss). ``OSError`` names the cursor's own path: something other than a
    regular file there, or a state dir that cannot be written; ``NoSpace`` for a full disk.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        self._key_json = json.dumps(key)
        self._fd = -1
        self._ino = -1
        self._end = -1  # the file's size once the last write of this log landed
        self._line = b""  # the newest line this log wrote
        self._known: tuple[int, int] | None = None  # (inode, size) as this log last left it

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_ino, st.st_size

    def mark_read(self) -> None:
        """Note the file as it is now: the value in it is known to the caller."""
        self._known = self._stamp()

    def changed(self) -> bool:
        """Whether the file differs from how this log last wrote it or ``mark_read`` found it
        (another process acting as the same reader saved a value since)."""
        return self._stamp() != self._known

    def open(self, *, create: bool = True) -> None:
        """Open (or reopen) the file for appending, creating it and its directory if missing
        (``create=False``: ``FileNotFoundError`` instead: an empty file is no value)."""
        self.close()
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        flags |= os.O_CREAT if create else 0
        try:
            try:
                fd = os.open(self.path, flags, 0o666)
            except FileNotFoundError:
                if not create:
                    raise
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, flags, 0o666)
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(self.path)) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file", str(self.path))
        self._fd, self._ino, self._end = fd, st.st_ino, -1

    def prepare(self) -> None:
        """Open the file, if it exists, ahead of a save that must be quick (before a wait
        blocks), and look at how it ends now, so that save is one ``fstat`` and one ``write``
        unless another process writes meanwhile; a failure here is left for that save to meet
        and report. Never creates it: a process killed before its first save must not leave
        an empty file behind."""
        if self._fd < 0:
            with contextlib.suppress(OSError):
                self.open(create=False)
        if self._fd >= 0 and self._end < 0:
            with contextlib.suppress(OSError):
                size = os.fstat(self._fd).st_size
                if not size or os.pread(self._fd, 1, size - 1) == b"\n":
                    self._end = size  # ends in a whole line: the next line goes straight on

    def line_form(self, fields: tuple[str, ...]) -> bytes:
        """The ``%`` template of this key's line holding the integer ``fields`` (sorted, distinct,
        not ``key``): ``form % values``, the values in the order of ``fields``, is a line for
        ``save_line`` (made once by a reader that saves again and again; ``ValueError`` for
        fields out of order)."""
        if list(fields) != sorted(set(fields)) or "key" in fields:
            raise ValueError(f"fields must be sorted, distinct and not 'key': {fields}")
        return _line_form(self._key_json, fields)

    def save(self, value: dict[str, int]) -> None:
        """Append ``value`` (with the key; its fields are integers, as a byte cursor's are) as
        the newest line; see the class for the failures."""
        fields = tuple(sorted(value))
        self.save_line(self.line_form(fields) % tuple(value[f] for f in fields))

    def save_line(self, line: bytes) -> None:
        """Append ``line``, made from ``line_form``, as the newest; see the class for the
        failures."""
        data = line
        st = os.fstat(self._fd) if self._fd >= 0 else None
        if st is None or not st.st_nlink or st.st_size != self._end:
            data = self._settle(st) + line  # not as this log left it
        try:
            n = os.write(self._fd, data)
            if n != len(data):  # nearly always all of it at once
                write_all(self._fd, data[n:])
        except OSError as e:
            self.close()  # the next save looks at the file afresh
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                msg = f"no space left to write {self.path.name}"
                raise NoSpace(msg, path=self.path.parent) from None
            raise OSError(e.errno, e.strerror, str(self.path)) from None
        self._end += len(data)
        self._line = line
        self._known = (self._ino, self._end)

    def _settle(self, st: os.stat_result | None) -> bytes:
        """Ready the file for a save when it is not as this log left it (its status ``st``;
        ``None``: not open): opened again when it is no longer at its name (replaced by a fold
        of another process acting as the same reader, or removed), and looked at where it
        ends; the bytes that end a line another writer cut short (a newline), else none."""
        if st is None or not st.st_nlink:
            self.open()
        fd = self._fd
        size = os.fstat(fd).st_size
        self._end = size
        return b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""

    def fold(self) -> None:
        """Rewrite the file as this log's newest line if it has grown past ``COMPACT_BYTES``
        (atomically, without fsync); a fold that fails leaves the file as it was."""
        if not self._line or self._end <= COMPACT_BYTES:
            return
        try:
            _replace(self.path, self._line, durable=False)
        except (NoSpace, OSError):
            return  # the value is stored already: the file is folded on a later try
        self.close()
        self.mark_read()
        _sweep(self.path.parent)

    def close(self) -> None:
        """Release the descriptor (the next save opens the file again)."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._ino, self._end = -1, -1, -1


class CursorStore:
    """Cursors for one namespace (``chat``, ``exchange``...), one small file per key."""

    def __init__(self, namespace: str, base: Path | None = None) -> None:
        self.dir = (base or state_dir()) / "cursors" / namespace

    def path_for(self, key: str) -> Path:
        """Where the cursor for ``key`` lives (the key may be any string, such as a path)."""
        return self.dir / f"{_slug(key)}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        """The stored value for ``key`` (its newest whole line), or ``None`` if this reader
        never stored one; ``FormatError`` if no line reads."""
        path = self.path_for(key)
        raw = _read(path)
        if raw is None:
            return None
        for line in _newest_lines(raw, path):
            value = _record(line)
            if value is not None:
                return value
        raise FormatError("corrupt cursor: no line is a JSON object", path=path)

    def save(self, key: str, value: dict[str, Any], *, durable: bool = True) -> None:
        """Store ``value`` for ``key``: durable, the file is replaced atomically and fsync'd;
        ``durable=False``, a line is appended (the file is rewritten when it grows long)."""
        line = json.dumps({"key": key, **value}, sort_keys=True).encode() + b"\n"
        path = self.path_for(key)
        if durable:
            self.dir.mkdir(parents=True, exist_ok=True)
            _replace(path, line, durable=True)
            return
        try:  # the directory is made when the append finds it missing, not before every save
            size = append_unsynced(path, line, fresh_line=True)
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True)
            size = append_unsynced(path, line, fresh_line=True)
        if size > COMPACT_BYTES:
            try:  # the value is stored already: a fold that finds no room waits for later
                _replace(path, line, durable=False)
            except (NoSpace, OSError):
                return
            _sweep(self.dir)

    def forget(self, key: str) -> None:
        """Drop the value stored for ``key`` (nothing if there is none)."""
        self.path_for(key).unlink(missing_ok=True)

    def value_log(self, key: str) -> ValueLog:
        """The value of ``key`` as a ``ValueLog`` (for a reader that saves again and again)."""
        return ValueLog(self.path_for(key), key)

    def sweep(self, keep: Callable[[str], bool], idle: float) -> list[Path]:
        """Remove the values whose key ``keep`` rejects, among the files nobody wrote for
        ``idle`` seconds; return the paths removed. A file that does not read, or whose name is
        not its key's, stays: it is not known to be unwanted. Reads only the idle files, and a
        file ``keep`` wants is touched (its mtime), so each is read once per ``idle`` seconds,
        not by every sweep, and goes ``idle`` seconds after it was last written or wanted."""
        removed: list[Path] = []
        cutoff = time.time() - idle
        try:
            entries = list(os.scandir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return removed
        for entry in entries:
            if not entry.name.endswith(".json"):
                continue
            path = Path(entry.path)
            if not _idle_file(path, cutoff):
                continue
            try:
                raw = read_regular(path, VALUE_MAX_BYTES)
                value = next(filter(None, map(_record, _newest_lines(raw, path))), None)
            except (FormatError, OSError):
                continue
            key = value.get("key") if value is not None else None
            if not isinstance(key, str) or entry.name != f"{_slug(key)}.json":
                continue
            if keep(key):
                with contextlib.suppress(OSError):  # not ours to touch: read again next time
                    os.utime(path)
                continue
            if _idle_file(path, cutoff):  # a save since the read keeps it
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path)
        return removed

    def load_bytes(self, key: str) -> ByteCursor:
        """The byte cursor for ``key``; offset 0 if none was stored."""
        value = self.load(key)
        if value is None:
            return ByteCursor()
        return ByteCursor.from_value(value, self.path_for(key))

    def save_bytes(self, key: str, cursor: ByteCursor, *, durable: bool = True) -> None:
        """Store a byte cursor."""
        self.save(key, {"offset": cursor.offset, "inode": cursor.inode}, durable=durable)

    def seen_log(self, key: str) -> SeenLog:
        """The seen-set of ``key`` as a ``SeenLog`` (for a reader that takes again and again)."""
        return SeenLog(self.path_for(key), key)

    def load_seen(self, key: str) -> SeenSet:
        """The seen-set for ``key``; empty if none was stored; ``FormatError`` if it does not
        read as lists of keys."""
        return self.seen_log(key).load()

    def save_seen(self, key: str, seen: SeenSet) -> None:
        """Store a seen-set whole, atomically, without fsync: a mark lost in a crash or a
        power cut only re-delivers (the safe direction)."""
        log = self.seen_log(key)
        log.seen = SeenSet(set(seen.keys))
        log.rewrite()

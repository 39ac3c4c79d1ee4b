"""The search index of one root: an SQLite FTS5 database in the reader's state directory.

Invariants:

* Never the source of truth. The files are; the index is a copy made from them by the channels'
  own readers. Deleting it loses nothing: the next search (or ``--reindex``) builds it again. A
  database that does not open, is corrupt or has another schema version is removed and rebuilt,
  never repaired in place.
* Private: it holds copies of messages, so it lives under the state directory (``0700``) in a
  file created ``0600`` (SQLite gives its ``-wal``/``-shm`` files the same mode), one per root,
  named after the root's real path. A database file that is a symlink is refused, not followed.
* Consistent: a refresh runs in one write transaction (``BEGIN IMMEDIATE``), so two refreshers of
  one root take turns and the second finds the first's work done; searches read in WAL mode and
  never wait for a refresh or see half of one.
* What is searched is plain text: control characters a face uses (NUL, and the two highlight
  markers) are blanked before indexing, and undecodable bytes are already U+FFFD.

What this cannot do: a refresh that is not told which topics changed does not notice an entry
edited in place, once whole, without its directory changing (mailslot never edits one; a hand
editor that saves by rename changes the directory) until ``--reindex``; a follower, told by
file events, does.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from mailslot.core.clock import epoch_ms, parse_time
from mailslot.core.cursor import state_dir
from mailslot.core.errors import CannotOpen, FormatError, LimitExceeded, LockBusy, NoSpace
from mailslot.search.hit import Doc, Hit
from mailslot.search.query import Query

__all__ = ["SCHEMA_VERSION", "Index", "SourceState", "index_path", "sqlite_errors"]

log = logging.getLogger(__name__)

# Bumped whenever the tables or the tokenizer change: an index of another version is rebuilt.
SCHEMA_VERSION = 3
# A refresh holds the write lock for as long as it reads new files; another refresher of the
# same root waits this long for it (a first index of 100,000 messages takes seconds).
BUSY_TIMEOUT_MS = 60_000
# Highlight markers inside FTS5's snippet(): control characters no indexed text contains.
_MARK_ON, _MARK_OFF = "\x02", "\x03"
_BLANKED = str.maketrans({"\x00": " ", _MARK_ON: " ", _MARK_OFF: " "})
_ONE_LINE = str.maketrans("\n\r\t\v\f", "     ")
# How many of a query's newest matches are ranked. bm25 costs a pass over every match: a word in
# half of 100,000 messages took 40 ms of CPU to rank and a 2-letter prefix a second. Past this
# many matches, the best of the most recently indexed RANK_WINDOW are returned: the messages
# people search for are mostly recent, and ranking 3,000 takes a few milliseconds.
RANK_WINDOW = 3000
# The most one query of one index may take, wall clock. Ranking is bounded by RANK_WINDOW, but
# a query built to be expensive (32 common prefixes, 31 common exclusions) costs in the posting
# lists it merges: stopped here and refused with a clear error, not left to run.
QUERY_SECONDS = 3.0
# SQLite virtual-machine steps between two looks at the clock (about a millisecond of work).
PROGRESS_STEPS = 10_000
_INTERRUPT = 9  # SQLITE_INTERRUPT: the progress handler stopped the statement
# Words of context FTS5 keeps around a match in a snippet (its maximum is 64).
SNIPPET_TOKENS = 16

_SCHEMA = f"""
CREATE TABLE source(
    id INTEGER PRIMARY KEY,
    key TEXT UNIQUE NOT NULL,
    sig TEXT NOT NULL,
    pos INTEGER NOT NULL DEFAULT 0,
    lines INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE msg(
    id INTEGER PRIMARY KEY,
    source INTEGER NOT NULL,
    name TEXT NOT NULL,
    channel TEXT NOT NULL,
    thread TEXT NOT NULL,
    sender TEXT,
    at TEXT,
    path TEXT NOT NULL,
    anchor TEXT NOT NULL,
    fsig TEXT NOT NULL DEFAULT '',
    UNIQUE(source, name)
);
CREATE VIRTUAL TABLE fts USING fts5(
    title, body, channel, sender,
    tokenize = 'porter unicode61 remove_diacritics 2', prefix = '2 3 4'
);
INSERT INTO fts(fts, rank) VALUES('rank', 'bm25(4.0, 1.0, 0.0, 0.0)');
PRAGMA user_version = {SCHEMA_VERSION};
"""


class SourceState(NamedTuple):
    """What the index remembers of one source (a topic directory, a chat file, LOG.md, ...)."""

    id: int
    sig: str  # the source's identity and change signature when it was last read
    pos: int  # bytes consumed (append-only files)
    lines: int  # lines consumed (LOG.md)


class _Unusable(Exception):
    """An index that opened but is not one this version can use (rebuilt, never raised on)."""


# SQLite's answers for a file that is not a database or is damaged: rebuild from the files.
_BROKEN = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


# SQLite's primary result codes this module names (the low byte of an extended code).
_BUSY, _LOCKED, _FULL = 5, 6, 13


@contextlib.contextmanager
def sqlite_errors(path: Path) -> Iterator[None]:
    """Turn what SQLite raises into the error tree: a refresh another process holds past the
    busy timeout is ``LockBusy``, a full disk ``NoSpace`` (the transaction was rolled back:
    nothing half-written), anything else about the database ``CannotOpen``."""
    try:
        yield
    except sqlite3.Error as e:
        code = getattr(e, "sqlite_errorcode", 0) & 0xFF
        if code in (_BUSY, _LOCKED):
            raise LockBusy(
                "another process is still refreshing this search index; try again", path=path
            ) from e
        if code == _FULL:
            raise NoSpace("no space left to update the search index", path=path.parent) from e
        raise CannotOpen(
            f"search index: {e} (delete it or run `mailslot search --reindex`)", path=path
        ) from e


def _file_name(root: Path) -> str:
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", root.name)[-40:].strip("._") or "root"
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
    return f"{readable}.{digest}.sqlite"


def index_path(root: Path, base: Path | None = None) -> Path:
    """Where the index of ``root`` lives: ``STATE/search/<name>.<hash of its real path>.sqlite``."""
    real = Path(os.path.realpath(root))
    return (base or state_dir()) / "search" / _file_name(real)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _clean(text: str) -> str:
    """``text`` as UTF-8-safe plain text without the characters the index reserves."""
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> '?'
    return text.translate(_BLANKED)


def _marks(snippet: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet without its markers, and the spans they enclosed."""
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    start = -1
    for part in re.split(f"([{_MARK_ON}{_MARK_OFF}])", snippet):
        if part == _MARK_ON:
            start = at
        elif part == _MARK_OFF:
            if start >= 0 and at > start:
                spans.append((start, at))
            start = -1
        else:
            plain.append(part)
            at += len(part)
    # one line of text: line breaks and tabs become spaces (same length, so spans hold)
    text = "".join(plain).translate(_ONE_LINE)
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    kept = tuple((max(0, a - lead), min(len(text), b - lead)) for a, b in spans if b - lead > 0)
    return text, tuple((a, b) for a, b in kept if a < b)


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


class Index:
    """The FTS5 index of one root; use as a context manager (closes the connection)."""

    def __init__(self, root: Path, *, base: Path | None = None) -> None:
        self.root = Path(root).absolute()
        self.path = index_path(self.root, base)
        self._next_id: dict[int, int] = {}  # epoch ms -> the next row id to try
        self.db = self._open()

    # -- opening -------------------------------------------------------------------------------
    def _create_file(self) -> None:
        """Create the database file ``0600`` in a ``0700`` directory; ``CannotOpen`` if its name
        is a symlink or not a regular file (an index is never written through one)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(self.path.parent)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise CannotOpen("the search index directory is not a directory", path=self.path.parent)
        if st.st_mode & 0o077 and st.st_uid == os.getuid():
            os.chmod(self.path.parent, 0o700)  # made by hand, or by an older version: private now
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if os.path.islink(self.path):
                raise CannotOpen(
                    "the search index is a symlink; not followed", path=self.path
                ) from e
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise CannotOpen("the search index is not a regular file", path=self.path)
            if st.st_mode & 0o077:
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        self._create_file()
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")  # a copy: losing the last commit re-reads
            if db.execute("PRAGMA user_version").fetchone()[0] == 0:
                with self._transaction(db):  # two first openers: one creates, one finds it made
                    if db.execute("PRAGMA user_version").fetchone()[0] == 0:
                        for statement in _SCHEMA.split(";"):
                            if statement.strip():
                                db.execute(statement)
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise _Unusable(f"schema version {version}, not {SCHEMA_VERSION}")
            db.execute("SELECT count(*) FROM source").fetchone()
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except (sqlite3.DatabaseError, _Unusable) as e:
            if isinstance(e, sqlite3.DatabaseError) and e.sqlite_errorcode not in _BROKEN:
                raise  # busy, locked, read-only: not the index's fault, nothing to rebuild
            log.warning("search index %s unusable (%s): rebuilding it", self.path, e)
            _remove_db(self.path)
            return self._connect()

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------
    @staticmethod
    @contextlib.contextmanager
    def _transaction(db: sqlite3.Connection) -> Iterator[None]:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction (``BEGIN IMMEDIATE``): committed whole, or rolled back."""
        return self._transaction(self.db)

    def sources(self, prefix: str) -> dict[str, SourceState]:
        """Every source whose key starts with ``prefix``, by key."""
        rows = self.db.execute(
            "SELECT key, id, sig, pos, lines FROM source WHERE key >= ? AND key < ?",
            (prefix, prefix + "\U0010ffff"),
        )
        return {k: SourceState(i, s, p, n) for k, i, s, p, n in rows}

    def names(self, source: SourceState) -> dict[str, str]:
        """The messages indexed from ``source``: name -> file signature."""
        rows = self.db.execute("SELECT name, fsig FROM msg WHERE source = ?", (source.id,))
        return dict(rows.fetchall())

    def set_source(self, key: str, sig: str, pos: int = 0, lines: int = 0) -> SourceState:
        """Record ``key``'s new signature and position (creating the source if new)."""
        self.db.execute(
            "INSERT INTO source(key, sig, pos, lines) VALUES(?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET sig = excluded.sig, pos = excluded.pos, "
            "lines = excluded.lines",
            (key, sig, pos, lines),
        )
        row = self.db.execute("SELECT id FROM source WHERE key = ?", (key,)).fetchone()
        return SourceState(int(row[0]), sig, pos, lines)

    def _time_id(self, at: str | None) -> int:
        """A free row id that sorts by the message's time: its epoch milliseconds times 1,024,
        plus the next free slot (a time in the future, or none, counts as now)."""
        now_ms = epoch_ms()
        try:
            ms = int(parse_time(at).timestamp() * 1000) if at else now_ms
        except FormatError:
            ms = now_ms
        ms = max(0, min(ms, now_ms))
        nxt = self._next_id.get(ms)
        if nxt is None:
            row = self.db.execute(
                "SELECT max(id) FROM msg WHERE id >= ? AND id < ?", (ms << 10, (ms + 1) << 10)
            ).fetchone()
            nxt = (ms << 10) if row[0] is None else row[0] + 1
        while self.db.execute("SELECT 1 FROM msg WHERE id = ?", (nxt,)).fetchone():
            nxt += 1  # a full millisecond spills into the next one's slots
        self._next_id[ms] = nxt + 1
        return nxt

    def add(self, source: SourceState, docs: Iterable[Doc]) -> int:
        """Index ``docs`` under ``source`` (a doc already there by name is replaced); how many.

        Row ids follow the messages' own times, whatever order they are indexed in, so "the
        newest matches" (``RANK_WINDOW``) means the newest messages, on a first index too.
        """
        n = 0
        for d in docs:
            self.drop(source, [d.name])
            sender = None if d.sender is None else _clean(d.sender)
            rowid = self._time_id(d.at)
            self.db.execute(
                "INSERT INTO msg(id, source, name, channel, thread, sender, at, path, anchor, "
                "fsig) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rowid,
                    source.id,
                    d.name,
                    d.channel,
                    _clean(d.thread),
                    sender,
                    d.at,
                    _clean(d.path),
                    _clean(d.anchor),
                    d.fsig,
                ),
            )
            self.db.execute(
                "INSERT INTO fts(rowid, title, body, channel, sender) VALUES(?, ?, ?, ?, ?)",
                (rowid, _clean(d.title), _clean(d.body), d.channel, sender or ""),
            )
            n += 1
        return n

    def drop(self, source: SourceState, names: Iterable[str] | None = None) -> int:
        """Remove the named messages of ``source`` (all of them when ``names`` is None)."""
        if names is None:
            ids = [
                r[0] for r in self.db.execute("SELECT id FROM msg WHERE source = ?", (source.id,))
            ]
        else:
            ids = []
            for name in names:
                row = self.db.execute(
                    "SELECT id FROM msg WHERE source = ? AND name = ?", (source.id, name)
                ).fetchone()
                if row is not None:
                    ids.append(row[0])
        for i in ids:
            self.db.execute("DELETE FROM fts WHERE rowid = ?", (i,))
            self.db.execute("DELETE FROM msg WHERE id = ?", (i,))
        return len(ids)

    def forget(self, source: SourceState) -> int:
        """Remove a source that no longer exists, with its messages; how many messages."""
        n = self.drop(source)
        self.db.execute("DELETE FROM source WHERE id = ?", (source.id,))
        return n

    # -- reading ---------------------------------------------------------------------------------
    def count(self) -> int:
        """How many messages the index holds."""
        return int(self.db.execute("SELECT count(*) FROM msg").fetchone()[0])

    def query(self, q: Query, limit: int) -> list[Hit]:
        """``_query`` under the ``QUERY_SECONDS`` budget; ``LimitExceeded`` past it."""
        deadline = time.monotonic() + QUERY_SECONDS
        self.db.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            return self._query(q, limit)
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorcode", 0) & 0xFF != _INTERRUPT:
                raise
            raise LimitExceeded(
                "this search (rarer words, or fewer prefixes and exclusions, cost less)",
                round(QUERY_SECONDS),
                round(QUERY_SECONDS),
                "seconds",
                unread=True,
            ) from None
        finally:
            self.db.set_progress_handler(None, 0)

    def _query(self, q: Query, limit: int) -> list[Hit]:
        """The best ``limit`` matches of ``q`` (bm25, title weighted up), best first.

        Bounded work: at most ``RANK_WINDOW`` matches are ranked (the newest), and snippets are
        made for the ``limit`` best only (a snippet costs a pass over the message's text; building
        one for each of 50,000 matches of a common word before sorting is what made such a
        search take seconds).
        """
        # The user's words search the text columns only; in:/from: narrow by the channel and
        # sender columns inside FTS5 (cheap: one more posting list), and are then checked
        # exactly against the message's own fields.
        match = f"{{title body}} : ({q.match})"
        where = ["fts MATCH ?"]
        args: list[object] = []
        if q.senders:
            match += f" AND sender : ({' OR '.join(_quoted(x) for x in q.senders)})"
            where.append(f"m.sender COLLATE NOCASE IN ({','.join('?' * len(q.senders))})")
            args += q.senders
        if q.channels:
            match += f" AND channel : ({' OR '.join(_quoted(x) for x in q.channels)})"
            where.append(f"m.channel IN ({','.join('?' * len(q.channels))})")
            args += q.channels
        args.insert(0, match)
        join = "JOIN msg m ON m.id = fts.rowid " if len(where) > 1 else ""
        cond = " AND ".join(where)
        # built from constants and placeholders only: every value is a bound parameter
        edge = self.db.execute(
            f"SELECT fts.rowid FROM fts {join}WHERE {cond} "  # noqa: S608
            "ORDER BY fts.rowid DESC LIMIT 1 OFFSET ?",
            [*args, RANK_WINDOW - 1],
        ).fetchone()
        if edge is not None:  # more matches than the window: rank the newest of them
            cond += " AND fts.rowid >= ?"
            args.append(edge[0])
        ranked = self.db.execute(
            f"SELECT fts.rowid, rank FROM fts {join}WHERE {cond} "  # noqa: S608
            "ORDER BY rank LIMIT ?",
            [*args, limit],
        ).fetchall()
        one = (
            "SELECT m.channel, m.thread, m.name, m.sender, m.at, m.path, m.anchor, "  # noqa: S608
            f"snippet(fts, 1, char(2), char(3), '…', {SNIPPET_TOKENS}) "
            "FROM fts JOIN msg m ON m.id = fts.rowid WHERE fts MATCH ? AND fts.rowid = ?"
        )
        out = []
        root = str(self.root)
        for rowid, rank in ranked:
            row = self.db.execute(one, (match, rowid)).fetchone()
            if row is None:
                continue
            channel, thread, name, sender, at, path, anchor, snip = row
            text, marks = _marks(snip or "")
            out.append(
                Hit(channel, root, thread, name, sender, at, text, marks, f"{path}#{anchor}", rank)
            )
        return out

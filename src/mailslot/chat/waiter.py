"""Waiting in a chat: block until another participant writes after the caller's cursor.

Invariants and why:

* Armed before it checks: the kernel watch on the chat file is set before the first look, so a
  message written at any moment after the cursor is found. A ``Waiter`` keeps its watch, its
  place in the file and its cursor file open across waits, so a wake costs a ``stat``, a read of
  what was appended since its place, and one ``write`` of the cursor; ``wait`` is one wait of a
  fresh ``Waiter``.
* Nothing is marked read that was not returned: the cursor moves past a batch only once ``show``
  wrote it out (``core.handover``); output that fails, or a caller that gave up (``keep_cursor``),
  leaves the batch for the next wait, in this ``Waiter`` and in any other process acting as the
  same name. A kill between the output and the cursor only re-delivers.
* A torn message is never returned as whole: bytes are read under the shared lock and past a dead
  writer's fragment (``read_from``), and a block still being written (a hand-run ``cat >>``) is
  held back by the parser until it ends.
* Only what was appended is read, and only while the file holds the place: not shorter, and
  the bytes just before the place unchanged (the stored cursor keeps their CRC, so a wait in a
  new process checks them too) -- so a byte-identical editor's save (a new inode, the same
  bytes) keeps the place. A file cut shorter (a ``>`` meant as ``>>``), or rewritten or replaced
  with other bytes before the place, is read again from its start -- seen messages again, the
  safe direction, never a skip of a block cut in half.
* A stored cursor that is not a file (a directory at its name) is a warning, and the reader is a
  fresh one (everything is delivered again); a cursor that cannot be stored is a warning too: the
  messages were shown, the next wait shows them again. A damaged cursor file is refused, naming
  it (``FormatError``): removing it is the user's decision.
* A removed chat file ends a wait with ``Gone`` (exit 4) once its name has held nothing for
  ``REAPPEAR_SECONDS`` (an editor's save moves the file away before it creates the new one);
  so does waiting on an ended chat. A path this state dir never saw as a chat is ``NotFound``
  (exit 1).
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from mailslot.chat.format import HANDSHAKE_KINDS, ChatMessage, parse_messages, parse_one
from mailslot.chat.identity import ChatRef, NameBook
from mailslot.chat.room import (
    DEFAULT_WAIT_SECONDS,
    Batch,
    _check_cursor,
    _cursor_key,
    _load_cursor,
    _no_chat,
    _quick_status,
    _require_chat,
)
from mailslot.core.cursor import ByteCursor, CursorStore, ValueLog
from mailslot.core.errors import Gone, NoSpace, NotFound, WaitTimeout
from mailslot.core.fsio import HeldReader, read_from
from mailslot.core.handover import show_then_record

__all__ = ["TAIL_BYTES", "Waiter", "wait"]

# The bytes just before a reader's place that must be unchanged for the place to stand: a file
# rewritten in place (same inode, no shorter) differs there unless the rewrite kept them.
TAIL_BYTES = 64
_GONE = "the chat file was removed: the conversation is over"
# How long a chat file's name may be missing before a wait says the chat is gone: an editor's
# save that keeps a backup renames the file away and only then creates the new one.
REAPPEAR_SECONDS = 0.25


class _Place(NamedTuple):
    """A reader's place: ``offset`` bytes into the file and the bytes just before it (``tail``,
    at most ``TAIL_BYTES``; ``None`` while not read)."""

    offset: int
    tail: bytes | None


# Bound once: a process just woken pays for every look-up on its way from the wake to the return.
_crc32 = zlib.crc32
# ``_Place(offset, tail)`` without the Python-level ``__new__`` of a ``NamedTuple``: the place
# taken on every wake is made by this one C call.
_new_place = tuple.__new__


def _has_handshake(messages: list[ChatMessage]) -> bool:
    """Whether any of ``messages`` can change whether the chat has ended (every marker starts
    with ``---``: a body without one is talk, told without working out its kind)."""
    return any("---" in m.body and m.kind in HANDSHAKE_KINDS for m in messages)


class Waiter:
    """One reader (``name``) waiting in one chat again and again; close it when done.

    ``cursor`` starts at that byte offset and stores nothing; otherwise the cursor stored for
    (file, name) -- shared by every process acting as ``name`` -- is read once here and moved
    past what each wait returns. Raises ``NotFound`` for a path that was never a chat here,
    ``Gone`` for a chat this state dir knew that was removed, ``FormatError`` for a file that is
    no chat or a damaged stored cursor. Not for use by two threads at once.
    """

    def __init__(
        self,
        path: Path | str,
        name: str | None = None,
        *,
        cursor: int | None = None,
        state: Path | None = None,
    ) -> None:
        ref = ChatRef.of(path)
        self.path = ref.path
        self.who = NameBook(state).resolve(ref, name)
        self.warnings: list[str] = []
        # Whether a wait reads the common wake in one pass
        # (``_quick``); False: every wake is read by ``_check`` (the tests compare the two).
        self.quick = True
        self._spath = str(self.path)
        store = CursorStore("chat", state)
        if cursor is not None:
            _check_cursor(cursor, "cursor", self.path)
        if not self.path.exists():
            known = bool(cursor) or self._stored(store, ref, warn=False) is not None
            if not known and NameBook(state).recall(ref) is None:
                raise _no_chat(self.path)  # never joined, waited on or given a cursor
            raise Gone(_GONE, path=self.path)
        self._ref, self._store = ref, store
        self._before: int | None = None  # the stored CRC of the bytes before the place
        self._log: ValueLog | None = None
        self._checked_form = self._place_form = b""
        if cursor is None:
            self._log = store.value_log(_cursor_key(self.path, self.who))
            # The two lines a save writes, made once: a place whose bytes before it are known
            # (their CRC goes with it), and one not read yet.
            self._checked_form = self._log.line_form(("before", "inode", "offset"))
            self._place_form = self._log.line_form(("inode", "offset"))
            self._log.mark_read()
            stored = self._stored(store, ref, warn=True)
            if stored is not None and stored.may_hold_in(self.path):
                cursor, self._before = stored.offset, stored.before
            else:
                cursor = 0
        try:
            data = read_from(self.path, 0)
            self._ino = os.stat(self._spath).st_ino
        except (FileNotFoundError, NotFound):
            raise Gone(_GONE, path=self.path) from None
        self._ended: bool | None = _quick_status(_require_chat(data, self.path)).ended
        self._pos = cursor
        self._tail: bytes | None = None  # the bytes before ``_pos`` (unknown until read)
        self._shown = _Place(cursor, None)  # after what the caller had
        self._armed = -1  # the inode the watch follows
        from mailslot.core.wait import Watch  # kernel file events: only a waiter needs them

        self._watch = Watch(reuse=True)  # a Waiter per wait (``wait``) pays no slow close
        self._reader = HeldReader(self.path)

    def _stored(self, store: CursorStore, ref: ChatRef, *, warn: bool) -> ByteCursor | None:
        try:
            return _load_cursor(store, ref, self.who)
        except OSError as e:
            if warn:
                self._warn(
                    f"cursor {e.filename} does not read ({e.strerror}); reading as a fresh "
                    "reader: every message from the start is delivered again"
                )
            return ByteCursor()

    def _warn(self, text: str) -> None:
        if text not in self.warnings:  # once per Waiter, however often it recurs
            self.warnings.append(text)

    def _adopt(self) -> None:
        """Take the cursor another process acting as this name stored since (what it was
        given, this one does not give again)."""
        assert self._log is not None
        self._log.mark_read()
        stored = self._stored(self._store, self._ref, warn=True)
        if stored is not None and stored.may_hold_in(self.path) and stored.offset != self._pos:
            self._pos, self._tail, self._before = stored.offset, None, stored.before
            self._ino = stored.inode if stored.inode is not None else self._ino
            self._shown = _Place(self._pos, None)

    def _restart(self, ino: int) -> None:
        """The file is not the one the place was taken in: read it from its start."""
        self._ino, self._pos, self._tail, self._ended = ino, 0, b"", None
        self._before = None
        self._shown = _Place(0, b"")

    def _read(self, size: int) -> bytes:
        """What follows ``_pos`` in the file found ``size`` bytes long, once the bytes before it
        are found unchanged."""
        back = min(self._pos, TAIL_BYTES)
        try:
            data = self._reader.read(self._pos - back, self._ino, size)
        except NotFound:
            raise Gone(_GONE, path=self.path) from None
        if self._reader.ino != self._ino:  # replaced again since it was looked at
            self._restart(self._reader.ino)
            return self._read(size)
        head = data[:back]
        if self._tail is None and self._before is not None:
            unchanged = zlib.crc32(head) == self._before
        else:
            unchanged = self._tail is None or head == self._tail
        if not unchanged:
            self._restart(self._ino)  # rewritten in place: every byte is in doubt
            return self._read(size)
        self._tail, self._before = head, None
        return data[back:]

    def _reappeared(self) -> os.stat_result:
        """The status of the chat file found missing at its name, once it is back; ``Gone``
        once its name has been missing for ``REAPPEAR_SECONDS`` (not at once: an editor's save
        has no file at the name for a moment)."""
        deadline = None
        while True:
            try:
                return os.stat(self._spath)
            except FileNotFoundError:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + REAPPEAR_SECONDS
                elif now >= deadline:
                    raise Gone(_GONE, path=self.path) from None
                time.sleep(0.005)

    def _check(self) -> list[ChatMessage] | None:
        try:
            st = os.stat(self._spath)
        except FileNotFoundError:
            st = self._reappeared()
        ino, size = st.st_ino, st.st_size
        if ino != self._armed:
            self._watch.add(self.path)  # armed on this file before it is read
            self._armed = ino
        if size < self._pos:
            self._restart(ino)  # cut shorter than the place
        elif ino != self._ino:
            # Replaced (an editor's save): the place stands if the bytes before it are the
            # same in the new file (``_read`` checks them), else it is read from its start.
            if self._tail is None and self._before is None and self._pos:
                self._restart(ino)
            else:
                self._ino = ino
        elif size == self._pos and self._tail is not None:
            return None  # nothing appended (a wake for a write already read)
        data = self._read(size)
        pos = self._pos
        messages, end = parse_messages(data, pos)
        if end > pos:
            if end - pos >= TAIL_BYTES:  # not the whole of a long read joined to the old tail
                self._tail = data[end - pos - TAIL_BYTES : end - pos]
            else:
                self._tail = ((self._tail or b"") + data[: end - pos])[-min(end, TAIL_BYTES) :]
            self._pos = end
        others = [m for m in messages if m.sender != self.who]
        if others:
            return others
        self._shown = _Place(self._pos, self._tail)
        if self._is_ended(messages):
            raise Gone("the chat has ended by mutual agreement", path=self.path)
        return None

    def _quick(self) -> ChatMessage | None:
        """The common wake, read in one pass: the file the place was taken in (its inode armed
        and held, the bytes before the place known) grown by exactly one whole block as
        ``render_message`` writes it (``parse_one``), from another participant, its body holding
        no ``---`` (no marker: the chat's end is not in question); read with the same reader
        under the same checks as ``_check``. That message, the place moved past it as
        ``_check`` moves it.

        ``None``, having changed nothing, for anything else -- the name missing or holding
        another file, nothing appended, the bytes before the place changed, two blocks, a
        partial one, a block the general parser reads, the caller's own, a possible marker --
        and ``_check`` then reads it as it reads any wake."""
        try:
            st = os.stat(self._spath)
        except OSError:
            return None
        ino, pos, tail = st.st_ino, self._pos, self._tail
        if (
            tail is None
            or st.st_size <= pos
            or ino != self._ino
            or ino != self._armed
            or ino != self._reader.ino
        ):
            return None
        back = pos if pos < TAIL_BYTES else TAIL_BYTES
        try:
            data = self._reader.read(pos - back, ino, st.st_size)
        except NotFound:
            return None
        if self._reader.ino != ino or data[:back] != tail:
            return None
        m = parse_one(data[back:], pos)
        if m is None or m.sender == self.who or "---" in m.body:
            return None
        self._pos, self._tail = m.end, data[-TAIL_BYTES:]
        return m

    def _is_ended(self, messages: list[ChatMessage]) -> bool:
        """Whether the chat has ended, read from the whole file only when it may have changed."""
        if self._ended is None or self._ended or _has_handshake(messages):
            try:
                data = read_from(self.path, 0)
            except (FileNotFoundError, NotFound):
                raise Gone(_GONE, path=self.path) from None
            self._ended = _quick_status(_require_chat(data, self.path)).ended
        return self._ended

    def _save(self, place: _Place) -> None:
        """Store ``place`` as the cursor (no fsync: a lost one re-delivers); a cursor that
        cannot be stored is a warning."""
        self._shown = place
        log = self._log
        if log is None:
            return
        if place.tail is None:
            line = self._place_form % (self._ino, place.offset)
        else:
            line = self._checked_form % (_crc32(place.tail), self._ino, place.offset)
        try:
            log.save_line(line)
        except (OSError, NoSpace) as e:
            why = getattr(e, "strerror", None) or str(e)
            self._warn(
                f"cursor {log.path} cannot be stored ({why}); the next wait delivers these "
                "messages again"
            )

    def _back(self) -> None:
        """Return to the place after what the caller has had (a batch it was not given)."""
        self._pos, self._tail = self._shown
        if self._tail is not None:
            self._before = None

    def wait(
        self,
        timeout: float | None = DEFAULT_WAIT_SECONDS,
        *,
        keep_cursor: Callable[[], bool] | None = None,
        show: Callable[[Batch], None] | None = None,
    ) -> Batch:
        """Block until another participant writes after the place; return those messages.

        ``show`` writes the batch out before the cursor moves: if it raises (a closed pipe,
        Ctrl-C in a stalled write) the cursor stays before those messages (``core.handover``).
        ``keep_cursor`` is asked just before the cursor is stored: False leaves it where it
        was (a caller that gave up on this wait, such as an MCP call the host cancelled, must
        not skip what it was never shown). Raises ``WaitTimeout`` (exit 3) after ``timeout``
        seconds with nothing new and ``Gone`` (exit 4) when the chat file is removed or the
        chat has ended. A cursor that cannot be stored is added to ``warnings`` (and to the
        batch's), not raised.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        quick = self.quick
        one = None  # the message ``_quick`` read
        if self._log is not None:
            self._log.fold()  # here, not between a wake and the return
            if self._log.changed():
                self._adopt()
            self._log.prepare()
        try:
            while True:
                found = self._check()
                if found is not None:
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout(f"no message from another participant within {timeout:g}s")
                self._watch.wait(left)
                if quick and (one := self._quick()) is not None:
                    found = [one]
                    break
        except Gone:
            raise
        except WaitTimeout as e:
            self._save(self._shown)
            e.payload = {"messages": [], "cursor": self._shown.offset, "ended": False}
            if self.warnings:
                e.payload["warnings"] = list(self.warnings)
            raise
        except BaseException:
            self._back()
            self._save(self._shown)
            raise
        ended = one is None and _has_handshake(found) and self._is_ended(found)
        before, place = self._shown, _new_place(_Place, (self._pos, self._tail))
        if show is None:  # returned is shown: nothing to hold signals around
            try:
                if keep_cursor is None:
                    self._save(place)
                else:
                    self._record(place, keep_cursor)
            except BaseException:
                if self._shown == place:
                    self._save(before)  # interrupted before the caller had it: not taken
                self._back()  # not shown: the next wait delivers it
                raise
            return Batch(found, place.offset, ended, self.warnings[:] if self.warnings else [])
        batch = Batch(found, place.offset, ended, list(self.warnings))
        try:
            show_then_record(lambda: show(batch), lambda: self._record(place, keep_cursor))
        except BaseException:
            self._back()  # not shown: the next wait delivers it
            raise
        batch.warnings = list(self.warnings)
        return batch

    def _record(self, place: _Place, keep: Callable[[], bool] | None) -> None:
        if keep is None or keep():
            self._save(place)
        else:
            self._back()

    def close(self) -> None:
        """Release the watch and the cursor file."""
        self._watch.close()
        self._reader.close()
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait(
    path: Path | str,
    name: str | None = None,
    *,
    timeout: float | None = DEFAULT_WAIT_SECONDS,
    cursor: int | None = None,
    state: Path | None = None,
    keep_cursor: Callable[[], bool] | None = None,
    show: Callable[[Batch], None] | None = None,
) -> Batch:
    """Block until another participant writes after the caller's cursor; return those messages.

    One wait of a fresh ``Waiter`` (see it and ``Waiter.wait`` for the cursor, ``show``,
    ``keep_cursor`` and the errors: ``NotFound``, ``WaitTimeout``, ``Gone``). A caller that
    waits again and again keeps a ``Waiter`` instead: its watch stays armed between waits.

    The ``Waiter`` is closed by the next call in this process (or left to the process's end),
    not on the way out: closing and freeing it cost about as much as the rest of the way from
    the wake to the return, and there nobody waits on them. Its cursor is stored before the
    return all the same; what it holds until then is its descriptors (the chat file, the
    cursor file; its watch's is kept for reuse either way).
    """
    _close_finished()
    w = Waiter(path, name, cursor=cursor, state=state)
    try:
        return w.wait(timeout, keep_cursor=keep_cursor, show=show)
    finally:
        with _finished_lock:
            _finished.append(w)


_finished: list[Waiter] = []  # made by ``wait`` and done with, closed by the next call
_finished_lock = threading.Lock()


def _close_finished() -> None:
    with _finished_lock:
        done = _finished[:]
        del _finished[:]
    for w in done:
        w.close()


def _forget_finished() -> None:
    """In a forked child the finished waiters are the parent's (closing one here would hand the
    parent's inotify instance to this process for reuse): dropped, never closed."""
    del _finished[:]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_finished)

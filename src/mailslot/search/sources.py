"""Bringing a root's index up to date from its files, through the channels' own readers.

What a root holds is found by its shape, and several may share one root:

* an exchange (``.mailslot/config``): every entry of every topic, live and archived, read by
  ``exchange.entries.parse_entry`` and named by transport (``check_sender``);
* chats (``chat-*.txt`` in the root): every message, by ``chat.parse_messages``;
* a bus (``LOG.md``): every line, by ``bus.log.parse_line``;
* a peer inbox (``peer/inbox/`` and its ``processed/``): every message, by ``web.peer``.

Incremental, and cheap when nothing changed: a directory (a topic, an inbox) is re-listed only
when its signature (path, inode, mtime) moved, and within it only new or changed files are read;
an append-only file (a chat, LOG.md) is read only past the offset already indexed, after checking
that the bytes just before that offset are still the ones indexed (a file cut back or rewritten is
indexed again from the start). A directory whose mtime is younger than ``RACY_NS`` is listed again
next time: a file added within the same clock tick as the listing would not move the mtime.

Only whole entries are indexed, by the rule the exchange watcher delivers by
(``core.wait.settled``): an entry a hand writer is still writing in place (``cat > NNNN-x.md``,
held open for writing, or changed too recently to tell) is held back -- left out if new, kept
as last indexed if not -- and its topic is listed again on every refresh until it is whole;
``Refreshed.held`` names it and ``Refreshed.again`` says when to look (a follower wakes then).
A file unchanged for ``OPEN_SETTLE`` is taken as whole without asking (as the exchange's scan
does): a writer that paused that long mid-entry is indexed part-way, and its later change is
indexed when the topic is next listed. A refresh told which topics had events lists each of
them, whatever its directory signature: an entry written in place changes no directory, so a
follower (told by its events) indexes such a change at once.

Bounded: entries and peer messages are read by their channels' bounded readers (regular files,
never through a symlink, refused past their size limit); a chat or LOG.md is read at most
``APPEND_READ_MAX`` bytes at a time (more is reported as a problem, never read whole), and one
that is a symlink or not a regular file is skipped and reported. What cannot be read is said in
``Refreshed.problems``; it never stops the rest of the root from being indexed.
"""

from __future__ import annotations

import functools
import os
import stat
import time
import zlib
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from mailslot.core.clock import format_time, parse_time
from mailslot.core.errors import FormatError, LimitExceeded, MailslotError, NotFound
from mailslot.core.fsio import read_from
from mailslot.core.wait import OPEN_SETTLE, settled
from mailslot.defaults import peer_inbox
from mailslot.search.hit import Doc
from mailslot.search.quick import quick_entry
from mailslot.search.store import Index, SourceState

if TYPE_CHECKING:
    from mailslot.exchange.layout import Exchange

__all__ = ["APPEND_READ_MAX", "RACY_NS", "Refreshed", "channels_at", "refresh_index"]

# A directory modified this recently may still gain a file inside the same mtime tick (coarse
# clocks tick every 4 ms; network filesystems round to seconds): list it again next time.
RACY_NS = 2_000_000_000
# The most read from one chat or LOG.md in one refresh: a conversation is far smaller, and a file
# that grew by more than this between two searches is not one (it is reported, not indexed).
APPEND_READ_MAX = 64 << 20
# Bytes before an indexed offset that must still match for the file to count as only appended to.
TAIL_CHECK = 64

EXCHANGE, CHAT, LOG, PEER = "exchange", "chat", "log", "peer"
_LOG_NAME = "LOG.md"
_PEER_DIR = peer_inbox(Path())
# The tick of a directory signature taken within RACY_NS of its change: never matches.
_RACY = "|racy"
# The key prefix of each channel's sources in the index.
_PREFIX = {EXCHANGE: "ex:", CHAT: "chat:", LOG: "log:", PEER: "peer:"}


class Refreshed(NamedTuple):
    """What one refresh of one root did."""

    root: str
    added: int  # messages indexed (new, or re-read because their file changed)
    removed: int  # messages dropped (their file or source is gone)
    total: int  # messages in the index afterwards
    channels: tuple[str, ...]  # what was found at the root
    problems: tuple[str, ...]  # what could not be indexed, one line each
    held: tuple[str, ...] = ()  # entries still being written, not indexed as they stand yet
    again: float | None = None  # when (``time.time()``) to look at ``held`` again


def _lstat(path: Path | str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _open_dir(path: Path) -> int | None:
    """A descriptor of the directory ``path`` (never through a symlink), or ``None``."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None


def _lstat_at(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=fd)
    except OSError:
        return None


def channels_at(root: Path) -> tuple[str, ...]:
    """Which channels ``root`` holds (``exchange``, ``chat``, ``log``, ``peer``); ``NotFound`` if
    it is not a directory or holds none of them."""
    st = _lstat(root)
    if st is None or not stat.S_ISDIR(os.stat(root).st_mode):
        raise NotFound("no such directory to search", path=root)
    found = []
    if (root / ".mailslot" / "config").is_file():
        found.append(EXCHANGE)
    if _chat_files(root):
        found.append(CHAT)
    if _lstat(root / _LOG_NAME) is not None:
        found.append(LOG)
    if (root / _PEER_DIR).is_dir():
        found.append(PEER)
    if not found:
        raise NotFound(
            "nothing to search here: not an exchange, a bus (LOG.md), a directory of chats "
            "(chat-*.txt) or a peer inbox (peer/inbox/)",
            path=root,
        )
    return tuple(found)


def _chat_files(root: Path) -> list[str]:
    try:
        with os.scandir(root) as it:
            return [e.name for e in it if e.name.startswith("chat-") and e.name.endswith(".txt")]
    except OSError:
        return []


def _entry_doc(
    ex: Exchange, directory: Path, writer: str, topic: str, rel: str, name: str, fsig: str
) -> Doc:
    """The entry file ``name`` in a topic directory, read and named by transport: the quick
    reading for the plainest shape, else the exchange's own strict parser."""
    from mailslot.exchange.entries import ENTRY_RE, check_sender, members, parse_entry
    from mailslot.exchange.safeio import read_regular

    path = directory / name
    quick = None
    try:
        quick = quick_entry(read_regular(path))
    except OSError:
        pass  # the strict reader says why, as an entry with an error
    if quick is not None:
        at_value, body = quick
        m = ENTRY_RE.match(name)
        sender = m.group(2) if m else writer
        shown = sender if sender in members(ex, writer) else writer  # Entry.shown_sender's rule
        at = _parsed_time(at_value)
    else:
        e = check_sender(ex, parse_entry(path, writer, topic))
        shown, at, body = e.shown_sender, e.at, e.body
    return Doc(
        name=name,
        channel=EXCHANGE,
        thread=topic,
        sender=shown,
        at=format_time(at) if at else None,
        title=topic,
        body=body,
        path=f"{rel}/{name}",
        anchor=name.removesuffix(".md"),
        fsig=fsig,
    )


def _parsed_time(value: str | None) -> datetime | None:
    try:
        return parse_time(value, field="at")
    except FormatError:
        return None


class _Run:
    """One refresh of one root inside one write transaction."""

    def __init__(self, index: Index, root: Path) -> None:
        self.index = index
        self.root = root
        self.now_ns = time.time_ns()
        self.added = 0
        self.removed = 0
        self.problems: list[str] = []
        self.held: list[str] = []
        self.again: float | None = None

    # -- shared --------------------------------------------------------------------------------
    def _dir_sig(self, rel: str, st: os.stat_result) -> str:
        """A directory's signature; a racy one (changed just now) never matches, so the
        directory is listed again next time."""
        changed = max(st.st_mtime_ns, st.st_ctime_ns)
        tick = _RACY[1:] if self.now_ns - changed < RACY_NS else str(changed)
        return f"{rel}|{st.st_ino}|{tick}"

    def _forget_unseen(
        self, prefix: str, seen: set[str], stored: dict[str, SourceState] | None = None
    ) -> None:
        """Drop the sources under ``prefix`` (as ``stored`` lists them) not ``seen`` now."""
        for key, src in (self.index.sources(prefix) if stored is None else stored).items():
            if key not in seen:
                self.removed += self.index.forget(src)

    def _sync_dir(
        self,
        key: str,
        old: SourceState | None,
        sig: str,
        names: dict[str, str],
        read: Callable[[str, str], Doc],
        held: Collection[str] = (),
    ) -> None:
        """Make the source ``key`` hold exactly ``names`` (name -> file signature): read the
        new and changed ones, drop the gone ones. A source that moved is read afresh. The
        ``held`` names (not whole yet) are left as they are: kept as indexed, or not added."""
        moved = old is None or old.sig.rsplit("|", 1)[0] != sig.rsplit("|", 1)[0]
        src = self.index.set_source(key, sig)
        have = {} if old is None else self.index.names(old)
        if moved and have:
            self.removed += self.index.drop(src)
            have = {}
        gone = [n for n in have if n not in names and n not in held]
        self.removed += self.index.drop(src, gone)
        fresh = [n for n, fsig in names.items() if have.get(n) != fsig]
        self.added += self.index.add(src, (read(n, names[n]) for n in sorted(fresh)))

    # -- exchange --------------------------------------------------------------------------------
    def exchange(self, topics: Collection[str] | None = None) -> None:
        """Index the exchange's topics (``topics``: only these, by name; None: every one, and
        forget the topics gone)."""
        from mailslot.core.names import TOPIC_RE
        from mailslot.exchange.layout import DONE, load_exchange
        from mailslot.exchange.listing import linked, real_dir, topic_names

        ex = load_exchange(self.root)
        if topics is None:
            stored = self.index.sources("ex:")
        else:  # a prefix each: "ex:side:topic" may also match a longer topic name (dropped)
            stored = {}
            for key in (f"ex:{side}:{t}" for side in ex.sides for t in topics):
                if (known := self.index.sources(key).get(key)) is not None:
                    stored[key] = known
        seen: set[str] = set()
        for side in ex.sides:
            inbox = ex.inbox(side)
            # a live copy wins over a stale one in done/ (as list_topics decides)
            if topics is None:
                where = dict.fromkeys(topic_names(inbox / DONE), f"to-{side}/{DONE}")
                where.update(dict.fromkeys(topic_names(inbox), f"to-{side}"))
            else:  # the named ones only, each looked at as the listing would see it
                valid = [t for t in topics if TOPIC_RE.fullmatch(t)]
                where = {}
                for folder in (inbox / DONE, inbox):
                    if linked(folder) is None:
                        rel = str(folder.relative_to(ex.root))
                        where.update((t, rel) for t in valid if real_dir(folder / t))
            parents = {p: _open_dir(ex.root / p) for p in set(where.values())}
            try:
                for topic, parent in where.items():
                    key = f"ex:{side}:{topic}"
                    seen.add(key)
                    fd = parents[parent]
                    # the path taken when nothing changed: one lstat, relative to its parent
                    st = _lstat_at(fd, topic) if fd is not None else None
                    if st is None:
                        continue  # moved while we looked (archived): found in its new place
                    rel = f"{parent}/{topic}"
                    sig = self._dir_sig(rel, st)
                    old = stored.get(key)
                    unchanged = old is not None and old.sig == sig and not sig.endswith(_RACY)
                    if unchanged and topics is None:
                        continue  # (a topic named by its events is listed: see the docstring)
                    directory = ex.root / rel
                    names, held = self._whole_entries(directory, rel)
                    if held:  # listed again next time, until every entry is whole
                        sig = f"{sig.rsplit('|', 1)[0]}{_RACY}"
                    writer = ex.writer_of(side)
                    read = functools.partial(_entry_doc, ex, directory, writer, topic, rel)
                    self._sync_dir(key, old, sig, names, read, held)
            finally:
                for fd in parents.values():
                    if fd is not None:
                        os.close(fd)
        self._forget_unseen("ex:", seen, stored)  # with ``topics``, only theirs are stored

    def _whole_entries(self, directory: Path, rel: str) -> tuple[dict[str, str], list[str]]:
        """The entries of a topic directory that may be read as whole (name -> file
        signature), and the names held back as still being written (``core.wait.settled``,
        asked only of files changed within ``OPEN_SETTLE``: older ones are whole by its rule)."""
        from mailslot.exchange.entries import entry_names

        names: dict[str, str] = {}
        held: list[str] = []
        now = self.now_ns / 1e9
        recent = self.now_ns - int(OPEN_SETTLE * 1e9)
        for _, _, name in entry_names(directory):
            fst = _lstat(directory / name)
            if fst is None:
                continue
            if fst.st_ctime_ns >= recent and stat.S_ISREG(fst.st_mode):
                verdict = settled(directory / name, fst, None, now)
                if not verdict.whole:
                    held.append(name)
                    self.held.append(f"{rel}/{name}")
                    if verdict.again is not None:
                        self.again = min(self.again or verdict.again, verdict.again)
                    continue
            names[name] = f"{fst.st_ino}:{fst.st_size}:{fst.st_mtime_ns}"
        return names, held

    # -- peer inbox --------------------------------------------------------------------------------
    def peer(self) -> None:
        from mailslot.web.peer import PROCESSED, is_message_name, read_message

        stored = self.index.sources("peer:")
        seen: set[str] = set()
        inbox = self.root / _PEER_DIR
        for thread, directory in (("inbox", inbox), (PROCESSED, inbox / PROCESSED)):
            st = _lstat(directory)
            if st is None or not stat.S_ISDIR(st.st_mode):
                continue
            key = f"peer:{thread}"
            seen.add(key)
            rel = str(directory.relative_to(self.root))
            sig = self._dir_sig(rel, st)
            old = stored.get(key)
            if old is not None and old.sig == sig and not sig.endswith(_RACY):
                continue
            try:
                listed = os.listdir(directory)
            except OSError as e:
                self.problems.append(f"{rel}: {e.strerror}")
                continue
            names = {n: "" for n in listed if is_message_name(n)}

            def read(name: str, fsig: str, d: Path = directory, t: str = thread) -> Doc:
                m = read_message(d / name)
                return Doc(
                    name=name,
                    channel=PEER,
                    thread=t,
                    sender=None if m.error else m.sender,
                    at=m.received_at or None,
                    title=m.subject or "",
                    body=m.body,
                    path=f"{self.rel(d)}/{name}",
                    anchor=m.id,
                )

            self._sync_dir(key, old, sig, names, read)
        self._forget_unseen("peer:", seen)

    def rel(self, path: Path) -> str:
        """``path`` relative to the root."""
        return str(path.relative_to(self.root))

    # -- append-only files -------------------------------------------------------------------------
    def _appended(
        self, key: str, path: Path, parse: Callable[[bytes, int, int], tuple[list[Doc], int, int]]
    ) -> None:
        """Index what was appended to ``path`` since the last refresh. ``parse(data, offset,
        lines)`` turns bytes read from ``offset`` (``lines`` lines before it) into docs, the
        offset consumed to and the lines consumed to."""
        rel = self.rel(path)
        st = _lstat(path)
        if st is None:
            return
        if not stat.S_ISREG(st.st_mode):
            self.problems.append(f"{rel}: not a regular file (a symlink?); not indexed")
            return
        old = self.index.sources(key).get(key)
        ino = str(st.st_ino)
        same_file = old is not None and old.sig.split(":", 1)[0] == ino and st.st_size >= old.pos
        if same_file and old is not None and st.st_size == old.pos:
            return  # nothing appended
        start = max(0, old.pos - TAIL_CHECK) if same_file and old is not None else 0
        try:
            data = read_from(path, start, limit=APPEND_READ_MAX)
            if same_file and old is not None:
                kept = data[: old.pos - start]
                if old.sig != f"{ino}:{zlib.crc32(kept)}":
                    same_file = False  # rewritten, not appended to: index it again whole
                    data = read_from(path, 0, limit=APPEND_READ_MAX)
                    start = 0
        except (LimitExceeded, FormatError, NotFound) as e:
            self.problems.append(f"{rel}: {e}")
            return
        src = self.index.set_source(key, old.sig if old else "", old.pos if old else 0)
        pos, lines = (old.pos, old.lines) if same_file and old is not None else (0, 0)
        if not same_file and old is not None:
            self.removed += self.index.drop(src)
        docs, end, lines = parse(data[pos - start :], pos, lines)
        self.added += self.index.add(src, docs)
        tail = data[max(0, end - TAIL_CHECK) - start : end - start]
        self.index.set_source(key, f"{ino}:{zlib.crc32(tail)}", end, lines)

    def chats(self) -> None:
        from mailslot.chat.format import parse_messages

        seen: set[str] = set()

        def parse(data: bytes, offset: int, lines: int) -> tuple[list[Doc], int, int]:
            if offset == 0:
                first = next((ln for ln in data[:4096].splitlines() if ln.strip()), b"")
                if first and first.strip() != b"---MSG---":
                    raise FormatError("not a chat file (no ---MSG--- first)")
            messages, end = parse_messages(data, offset)
            docs = [
                Doc(
                    name=str(m.offset),
                    channel=CHAT,
                    thread=name,
                    sender=m.sender,
                    at=format_time(at) if (at := m.at) is not None else None,
                    title="",
                    body=m.body,
                    path=name,
                    anchor=str(m.offset),
                )
                for m in messages
            ]
            return docs, end, lines

        for name in sorted(_chat_files(self.root)):
            key = f"chat:{name}"
            seen.add(key)
            try:
                self._appended(key, self.root / name, parse)
            except FormatError as e:
                self.problems.append(f"{name}: {e.message}")
        self._forget_unseen("chat:", seen)

    def log(self) -> None:
        from mailslot.bus.log import parse_line

        def parse(data: bytes, offset: int, lines: int) -> tuple[list[Doc], int, int]:
            whole = data[: data.rfind(b"\n") + 1]  # a line still being written waits
            docs = []
            for raw in whole.decode("utf-8", errors="replace").split("\n")[:-1]:
                lines += 1
                e = parse_line(lines, raw.rstrip("\r"))
                if e is None:
                    continue
                docs.append(
                    Doc(
                        name=str(lines),
                        channel=LOG,
                        thread=_LOG_NAME,
                        sender=e.agent,
                        at=e.at,
                        title="",
                        body=e.text,
                        path=_LOG_NAME,
                        anchor=f"L{lines}",
                    )
                )
            return docs, offset + len(whole), lines

        self._appended(f"log:{_LOG_NAME}", self.root / _LOG_NAME, parse)


def refresh_index(
    index: Index,
    channels: Iterable[str] | None = None,
    *,
    topics: Collection[str] | None = None,
) -> Refreshed:
    """Bring ``index`` up to date with its root's files, in one transaction; ``NotFound`` if
    the root holds nothing to search. Problems with single files are reported, not raised.

    ``topics``: of the exchange, look only at these topics (by name; the others are taken as
    unchanged, as a caller that knows from file events which changed can say), each listed
    whatever its directory's signature (an entry written in place changes none); the other
    channels are brought up to date whole, as they cost little when nothing changed."""
    root = index.root
    found = channels_at(root) if channels is None else tuple(channels)
    run = _Run(index, root)
    with index.writing():
        steps = (
            (EXCHANGE, functools.partial(run.exchange, topics)),
            (PEER, run.peer),
            (CHAT, run.chats),
            (LOG, run.log),
        )
        for channel, step in steps:
            if channel not in found:
                run._forget_unseen(_PREFIX[channel], set())
                continue
            try:
                step()
            except MailslotError as e:
                run.problems.append(f"{channel}: {e}")
        total = index.count()
    return Refreshed(
        str(root),
        run.added,
        run.removed,
        total,
        found,
        tuple(run.problems),
        tuple(run.held),
        run.again,
    )

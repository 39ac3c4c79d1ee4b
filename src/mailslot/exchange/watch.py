"""``exchange watch``: block until something addressed to the caller arrives that it has not seen.

A watcher that diffs the directories it already knows misses brand-new topics.
Here nothing is diffed: every round arms the inbox, its ``done/`` and every live topic directory
*before* looking, then asks one question -- which entries in ``to-<my side>/`` (live or archived)
are not in my seen-set? -- so a new topic, a new entry, a rename from a bridge and an entry archived
before it was read all answer it the same way. Waiting is on kernel file events (``core.wait``);
the only timers are the deadline and the bounds on a file still being written.

An entry is delivered only once whole (``core.wait.settled``): renamed into place or closed by its
writer, by the file events on its name; else not held open for writing, by the kernel; else left
alone a while. A hand writer's ``cat > NNNN-x.md`` is therefore shown when it closes the file,
never half. One still open past ``OPEN_SETTLE``, or that ends part-way through a line (a writer
killed mid-write), or that does not parse, is shown as it stands, flagged, and marked seen under
a key that carries its size and mtime, so a later change to it is delivered again. So is a live
entry already shown whose mtime is past when the round that marked it began (an append, a rename
over it): each mark notes that time (``marked_ns``).

A long-lived watcher keeps what its last look found (``_View``): each live topic's listing, and per
topic the entries it had not seen. A wake whose events all carry names inside listed live topics
looks again only at those names and at the topics with entries still unseen, so a wake costs the
names that changed, not the entries in the inbox; the common wake (new entries renamed into one
such topic, nothing else unseen) is looked at in one pass (``_placed``). A writer's dot-named temp
wakes nobody: its events are passed over before any is built. An archived topic is told changed by
its directory's own ``stat`` (``done/<topic>`` is not watched, and writing into it leaves
``done/``'s mtime as it was), by each round that found nothing to show, before it blocks: an entry
put there is found at the wake after it, or at once by the next wait after a round that returned
something (a round with something to show returns it without that look). Everything is looked at
again at the first round, after lost events (a full kernel queue), an event on the inbox, ``done/``
or a topic directory itself, and whenever keys may have gone from the seen-set (another process
rewrote it, it was removed, a prune dropped keys).

The seen-set is the caller's own cursor (``CursorStore``, keyed by exchange root + caller) in its
own state dir, never in the exchange, since an agent may not write the other side's folder. Keys
are ``<topic>/<NNNN>-<from>``, unchanged by archive moves or a bridge's renames. A missing cursor
means nothing was seen: everything pending is delivered; so does an unreadable one (a warning,
never a crash). ``peek`` never writes anything. A HELD.md in the caller's inbox is delivered
once too (keyed by its mtime), because a hold is the tick asking this side to re-read.

Shown, then marked (``core.handover``): under a lock on the cursor, what is unseen is handed to
``show`` (the CLI writes and flushes it), and only once that returned is it marked seen, with
SIGINT/SIGTERM held until the mark is written. Output that fails (a closed pipe) or is interrupted
marks nothing; a kill between the two re-delivers. The lock makes two watchers for one caller never
both take an entry; a long-lived watcher keeps its file open between takes (``fsio.HeldLock``,
which follows the name if the file is replaced or removed). The mark is written atomically without
fsync: a power cut may re-deliver, never lose. Each mark drops the keys of topics that are neither
live nor in ``done/`` and of holds no longer in place, so the set stays as large as the inbox, no
larger.
"""

from __future__ import annotations

import bisect
import os
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time
from mailslot.core.cursor import CursorStore, SeenSet
from mailslot.core.errors import FormatError, Gone, InvalidName, NoSpace, NotFound, WaitTimeout
from mailslot.core.fsio import HeldLock
from mailslot.core.handover import show_then_record
from mailslot.core.record import FrozenRecord, Record
from mailslot.core.wait import (
    APPEARED,
    CLOSED,
    GONE,
    WRITING,
    Change,
    Changes,
    Settled,
    Watch,
    settled,
)
from mailslot.exchange.entries import Entry, check_sender, members
from mailslot.exchange.holds import hold_sig, is_trusted, load_holds
from mailslot.exchange.inbox import InboxItem, plain_head, read_entry
from mailslot.exchange.layout import DONE, HELD_NAME, Exchange
from mailslot.exchange.listing import (
    ENTRY_RE,
    TopicDir,
    list_dir,
    relisted,
    topic_entries,
    topic_names,
)
from mailslot.exchange.safeio import read_regular
from mailslot.exchange.tree import stray_kind

__all__ = [
    "SCOPES",
    "WATCH_NAMESPACE",
    "Delivered",
    "Show",
    "WatchResult",
    "Watcher",
    "ack",
    "cursor_key",
    "mark_all_seen",
    "watch",
]

WATCH_NAMESPACE = "exchange-watch"
SCOPES = ("any", "required")
# What the events for a file said last, kept until it is delivered or gone
_KEPT_STATES = (APPEARED, WRITING, CLOSED)
CUT_SHORT = "ends part-way through a line: its writer may have stopped before the end"
CHANGED = "changed after it was shown (an entry is never edited): shown again as it now stands"
# An archived topic's listing is kept while its directory's own inode, mtime and ctime are what
# they were when it was listed, once those times are this far behind the clock of the listing: a
# change within one tick of the file system's clock can leave a directory's times as they were
SETTLED_DIR_NS = 2_000_000_000

# The largest entry the common wake reads in its one pass (one read); a larger one, up to
# ``safeio.MAX_FILE_BYTES``, is read by the general path
QUICK_BYTES = 64 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WHOLE = Settled(True)  # ``settled``'s word on a file its events say was closed or renamed in
# (key, entry) of each entry of one topic directory that was not seen when it was looked at
Unseen = list[tuple[str, InboxItem]]


def cursor_key(ex: Exchange, agent: str) -> str:
    """The cursor key of ``agent`` reading ``ex`` (agent names cannot contain ``@``)."""
    return f"{agent}@{ex.root}"


class Delivered(FrozenRecord):
    """One thing delivered: an ``entry`` addressed to the caller, a ``held`` notice the tick
    placed, or a ``stray`` file in a topic (delivered once, marked, never as an entry or hold)."""

    __match_args__ = ("kind", "key", "topic", "path", "archived", "entry", "text", "why", "partial")
    kind: str
    key: str
    topic: str
    path: Path
    archived: bool
    entry: Entry | None
    text: str | None  # HELD.md text
    why: str | None  # what is wrong with a stray file
    # why an entry may not be whole (its writer still holds it open past the bound, or it ends
    # part-way through a line); such an entry, like one that does not parse, is marked seen as
    # it stands (its key carries its size and mtime), so it is delivered again if it changes
    partial: str | None

    def __init__(
        self,
        kind: str,
        key: str,
        topic: str,
        path: Path,
        archived: bool = False,
        entry: Entry | None = None,
        text: str | None = None,
        why: str | None = None,
        partial: str | None = None,
    ) -> None:
        self.__dict__.update(
            kind=kind,
            key=key,
            topic=topic,
            path=path,
            archived=archived,
            entry=entry,
            text=text,
            why=why,
            partial=partial,
        )

    def to_json(self, root: Path) -> dict[str, Any]:
        """A JSON-ready dict (paths relative to ``root``)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "key": self.key,
            "topic": self.topic,
            "path": str(self.path.relative_to(root)),
            "archived": self.archived,
        }
        if self.entry is not None:
            e = self.entry
            out.update(
                {
                    "number": e.number,
                    "from": e.sender,  # as in 'exchange read --json'
                    "sender": e.shown_sender,  # from the transport
                    "verified": e.verified,
                    "warning": e.warning,
                    "at": format_time(e.at) if e.at else None,
                    "action": e.action,
                    "meta": {k: _plain(v) for k, v in e.meta.items()},
                    "body": e.body,
                    "error": e.error,
                }
            )
        if self.text is not None:
            out["text"] = self.text
        if self.why is not None:
            out["why"] = self.why
        if self.partial is not None:
            out["partial"] = self.partial
        return out


class WatchResult(Record):
    """What one watch delivered (in arrival order) and whether the cursor moved."""

    __match_args__ = ("agent", "side", "items", "peek", "warnings")
    agent: str
    side: str
    items: list[Delivered]
    peek: bool
    warnings: list[str]  # an unreadable seen-mark, read as fresh

    def __init__(
        self,
        agent: str,
        side: str,
        items: list[Delivered] | None = None,
        peek: bool = False,
        warnings: list[str] | None = None,
    ) -> None:
        self.agent = agent
        self.side = side
        self.items = [] if items is None else items
        self.peek = peek
        self.warnings = [] if warnings is None else warnings

    def to_json(self, root: Path) -> dict[str, Any]:
        """A JSON-ready dict: ``{"agent", "side", "peek", "items": [...]}``, and ``"warnings"``
        when there are any."""
        out: dict[str, Any] = {
            "agent": self.agent,
            "side": self.side,
            "peek": self.peek,
            "items": [i.to_json(root) for i in self.items],
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


# Writes (and flushes) what a watch found; raising means it was not shown, so nothing is marked.
Show = Callable[[WatchResult], None]


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _stray_why(path: str) -> str:
    """What a stray in a topic directory is, told by ``tree.stray_kind`` from its ``lstat``."""
    try:
        why = stray_kind(os.path.basename(path), os.lstat(path).st_mode)
    except OSError as e:
        why = e.strerror
    return why or "not a regular file"


def _not_a_file(path: Path) -> str | None:
    """What sits at ``path`` when it is there and not a regular file (``a directory``)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def _entry_name(name: str) -> tuple[int, str, str] | None:
    """``(number, from, name)`` when ``name`` is an entry's file name."""
    m = ENTRY_RE.match(name)
    return None if m is None else (int(m.group(1)), m.group(2), name)


class _View(Record):
    """The last look at every topic, kept while each event since carried names in a listed live
    topic (nothing made, moved or replaced): a round then looks again only at those names, at
    each archived topic's own ``stat``, and at the topics whose entries were not all seen."""

    __match_args__ = ("resets", "waiting", "flagged")
    __slots__ = ("flagged", "resets", "waiting")
    resets: tuple[int, int]  # ``Watcher._resets`` when it was made: keys dropped since redo it
    waiting: dict[str, None]  # the topic directories (live or archived) with entries unseen
    flagged: dict[str, None]  # the live topic directories with strays or a HELD.md

    def __init__(
        self, resets: tuple[int, int], waiting: dict[str, None], flagged: dict[str, None]
    ) -> None:
        self.resets = resets
        self.waiting = waiting
        self.flagged = flagged


def _first_of_each(lists: list[Unseen]) -> list[InboxItem]:
    """The entries of ``lists``, live ones first, each key once (a topic both live and in
    ``done/`` is damage: its live copy is the one shown)."""
    if len(lists) == 1:  # one directory's: each key once already, all live or all archived
        return [item for _, item in lists[0]]
    out = []
    taken: set[str] = set()
    for archived in (False, True):
        for found in lists:
            for key, item in found:
                if item.archived is archived and key not in taken:
                    taken.add(key)
                    out.append(item)
    return out


# ``base / name`` for an entry's file name (``ENTRY_RE``'s: no separator, never "." or ".."):
# pathlib's own constructor of a child from a name it need not parse, the one ``iterdir`` uses,
# where this Python has it (3.11, 3.12); else the join
_make_child = getattr(Path, "_make_child_relpath", None)


def _child(base: Path, name: str) -> Path:
    return base / name if _make_child is None else _make_child(base, name)


def _inserted(entries: tuple[Any, ...], i: int, e: Any) -> tuple[Any, ...]:
    """``entries`` with ``e`` at index ``i``, a new tuple in one copy: concatenated, since
    ``(*entries, e)`` goes through a list, twice the copying."""
    return entries[:i] + (e,) + entries[i:] if i < len(entries) else entries + (e,)  # noqa: RUF005


def _filler(cls: type, given: tuple[str, ...]) -> dict[str, Any] | None:
    """The defaults of the ``__init__`` parameters of the record ``cls`` other than ``given``,
    for making one by filling its instance ``__dict__`` with them and the ``given`` values, when
    ``cls`` keeps its fields there (no ``__slots__`` of its own), its ``__init__`` takes exactly
    its fields, and every parameter not given has a default; else ``None``, and the constructor
    is called. That such a fill is what ``__init__`` makes (it stores what it is given, and the
    defaults as they are) is held by a test for each record filled. For the common wake: one
    ``dict.update`` in place of an ``__init__`` call."""
    if "__slots__" in cls.__dict__ or not hasattr(cls, "__match_args__"):
        return None
    init: Any = getattr(cls, "__init__", None)
    code = getattr(init, "__code__", None)
    if code is None or code.co_kwonlyargcount or code.co_flags & 0x0C:  # no *args, **kwargs
        return None
    names = code.co_varnames[1 : code.co_argcount]
    if set(names) != set(cls.__match_args__) or not set(given) <= set(names):
        return None
    defaults = init.__defaults__ or ()
    with_default = dict(zip(names[len(names) - len(defaults) :], defaults, strict=True))
    rest = {}
    for name in names:
        if name not in given:
            if name not in with_default:
                return None
            rest[name] = with_default[name]
    return rest


_ENTRY_REST = _filler(
    Entry,
    ("number", "sender", "side", "topic", "path", "at", "action", "body", "meta", "arrived_ns"),
)
_DELIVERED_REST = _filler(Delivered, ("kind", "key", "topic", "path", "archived", "entry"))
_RESULT_REST = _filler(WatchResult, ("agent", "side", "items", "peek", "warnings"))
_new = object.__new__


def _result(agent: str, side: str, found: list[Delivered], warnings: list[str]) -> WatchResult:
    """``WatchResult(agent, side, found, False, list(warnings))``, filled as its ``__init__``
    fills it where ``_filler`` allows."""
    if _RESULT_REST is None:
        return WatchResult(agent, side, found, False, list(warnings))
    r = _new(WatchResult)
    r.__dict__.update(agent=agent, side=side, items=found, peek=False, warnings=list(warnings))
    return r


def _sort_key(d: Delivered) -> tuple[str, str, str]:
    when = format_time(d.entry.at) if d.entry is not None and d.entry.at else "~"
    return (when, d.topic, d.key)


class Watcher:
    """Finds what ``agent`` has not seen in its inbox; ``watch`` blocks on it."""

    def __init__(
        self,
        ex: Exchange,
        agent: str,
        *,
        action: str = "any",
        store: CursorStore | None = None,
    ) -> None:
        if action not in SCOPES:
            raise InvalidName("action scope", action, "required or any")
        self.ex = ex
        self.agent = agent
        self.side = ex.side_of(agent)
        self.inbox = ex.inbox(self.side)
        self._writer = ex.writer_of(self.side)  # the side whose entries land in the inbox
        self._members = frozenset(members(ex, self._writer))  # who may write them
        self.action = action
        self.store = store if store is not None else CursorStore(WATCH_NAMESPACE)
        self.key = cursor_key(ex, agent)
        self._lock_path = Path(str(self.store.path_for(self.key)) + ".lock")
        self._lock = HeldLock(self._lock_path)  # the cursor's lock, kept open between takes
        self.warnings: list[str] = []
        self._log = self.store.seen_log(self.key)
        self._log.hold = True  # taken again and again: the seen-mark stays open (``close``)
        self._kept: set[str] = set()  # what was taken while the seen-mark cannot be written
        self._dropped = 0  # how many times this watcher dropped keys from its seen-set
        self.seen = self._load_seen()
        self._cache: dict[str, tuple[tuple[int, int], Entry]] = {}
        # entry file -> what its events said last (APPEARED, WRITING, CLOSED), while not taken
        self._states: dict[str, str] = {}
        # live topic directory -> (what it was when armed, its listing), kept up to date from
        # the names its events carry: a wake looks again only at the names that changed
        self._listings: dict[str, tuple[tuple[int, int], TopicDir]] = {}
        self.defer_until: float | None = None  # monotonic time to look again at a half-written
        self._recheck = False  # an entry was taken as whole while its events said only APPEARED
        # Which live entries already seen to look at for a change since they were shown: all
        # (None) on the first round and after lost events, else the names the events carried
        self._look_all = True
        # topic directory -> the listing and ``_resets`` its unseen entries were found against,
        # and those entries (``Unseen``): found again only for a listing that changed
        self._unseen: dict[str, tuple[TopicDir, tuple[int, int], Unseen]] = {}
        # archived topic -> its directory's (inode, mtime, ctime) when listed (None: too recent
        # to go by) and its listing; done/<topic> is not watched, so it is told by its own stat
        self._done: dict[str, tuple[tuple[int, int, int] | None, TopicDir]] = {}
        self._view: _View | None = None
        # ``_listed()`` as the last take found it, kept while no event came on the inbox or
        # done/ (a topic can leave both only by changing one of them): None, look again
        self._listed_now: list[int] | None = None
        self._paths: dict[str, Path] = {}  # topic directory -> it as a Path (``_dir_path``)
        self._round_ns = 0  # time.time_ns() when the last round began: marked with what it found
        self._also: dict[str, str] = {}  # key -> its as-it-stands key, for entries written then
        self._looked: dict[str, os.stat_result] = {}  # this round's lstat of a file, by path
        self._watch: Watch | None = None
        # Whether the next round arms every path again: after an event on anything but a listed
        # topic (the inbox, done/, a topic directory itself), or when events are not known
        self._rearm = True
        # Whether the last check consumed such an event: a topic made since the paths were
        # armed is not armed yet, so the next round arms and checks before it waits
        self._again = False
        # the live and the archived topics' names, kept while no event on anything but a
        # listed topic arrives
        self._names: tuple[list[str], list[str]] | None = None
        self._state_dir_made = False

    def close(self) -> None:
        """Release the kernel watches (slow: inotify's close waits for an RCU grace period) and
        the seen-mark held open."""
        self._log.close()
        self._lock.close()
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def paths(self) -> list[Path]:
        """What to arm: the inbox, ``done/``, every live topic directory.

        A path not there yet is fine: ``Watch`` arms its nearest existing parent.
        """
        return [self.inbox, self.inbox / DONE, *(Path(e.path) for e in topic_entries(self.inbox))]

    def _arm(self) -> Watch:
        """The Watcher's one ``Watch``, with every current path armed before the next check.

        ``Watch.add`` re-arms a path that now names a different directory (a topic moved away
        and another put in its place), so re-adding every path keeps it hearing. That is done
        whenever the inbox, ``done/`` or a topic directory itself had an event (a topic made,
        moved or removed) or events were lost; a round after events only inside listed topic
        directories keeps the watches as they are, since nothing can have been made or replaced.
        """
        if self._watch is None:
            self._watch = Watch(dot_names=False)  # temps and editors' files are never entries
        elif not self._rearm:
            return self._watch
        self._rearm = False
        for p in self.paths():
            self._watch.add(p)
        return self._watch

    def _entry(self, path: Path, topic: str) -> tuple[Entry, os.stat_result, str | None] | None:
        """The entry at ``path`` with its ``lstat`` and why it may not be whole, once it may be
        read as whole (``core.wait.settled``); ``None`` while its writer is still at it (and
        ``defer_until`` says when to look again) or when it is gone."""
        where = str(path)
        st = self._looked.pop(where, None)  # made moments ago by this round's relisting
        try:
            st = os.lstat(where) if st is None else st
        except FileNotFoundError:
            return None
        state = self._states.get(where)
        now = 0.0
        if state == CLOSED:  # closed by its writer or renamed into place: whole
            verdict = _WHOLE
        else:
            now = time.time()
            verdict = settled(where, st, state, now)
        if not verdict.whole:
            if verdict.again is not None:
                again = time.monotonic() + max(0.0, verdict.again - now)
                self.defer_until = min(self.defer_until or again, again)
            return None
        sig = (st.st_size, st.st_mtime_ns)
        hit = self._cache.get(where)
        if hit is not None and hit[0] == sig:
            entry = hit[1]
        else:
            entry = read_entry(path, self._writer, topic, arrived_ns=st.st_ctime_ns)
            claimed = entry.meta.get("from")
            if entry.sender not in self._members or (
                claimed is not None and str(claimed) != entry.sender
            ):
                entry = check_sender(self.ex, entry)  # what it flags; else it returns entry
            self._cache[where] = (sig, entry)
        if state == APPEARED:  # created or linked in, no more known: the events once more first
            self._recheck = True
        note = verdict.note
        if note is None and entry.error is None and entry.body and entry.body[-1] != "\n":
            note = CUT_SHORT
        return entry, st, note

    def _note_changes(self, path: str, changes: dict[str, Change]) -> None:
        """Keep what the events said last about each file in ``path``."""
        states = self._states
        for name, c in changes.items():
            if c.state in _KEPT_STATES:
                states[f"{path}/{name}"] = c.state
            elif c.state == GONE:
                states.pop(f"{path}/{name}", None)

    def _shown_then_changed(
        self, live: list[TopicDir], seen: SeenSet, look: dict[str, set[str]] | None
    ) -> list[tuple[InboxItem, str]]:
        """Live entries marked seen that were written since the round that marked them (an
        append, a rename over one): each with ``CHANGED``, unless seen as they now stand.

        Their mtime is past ``marked_ns``, noted with every mark (when the marking round began),
        so a ``chmod`` is no change; ``look`` names the entries to look at (``None``: all, one
        ``lstat`` each; else the names the events carried, per directory).
        """
        marked = self._log.meta.get("marked_ns")
        if seen is not self.seen or not isinstance(marked, int) or not seen.keys:
            return []
        out = []
        for d in live:
            names = None if look is None else look.get(d.dir)
            if look is not None and names is None:
                continue
            prefix = d.topic + "/"
            if names is None:
                found = d.entries
            else:  # the few names the events carried, not every entry of the topic
                found = tuple(e for n in names if (e := _entry_name(n)) is not None)
            for number, sender, name in found:
                key = prefix + name[:-3]
                if key not in seen.keys:
                    continue
                try:
                    st = os.lstat(d.file(name))
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue  # shown as a stray, if anything
                if st.st_mtime_ns > marked and f"{key}@{st.st_size}.{st.st_mtime_ns}" not in (
                    seen.keys
                ):
                    item = InboxItem(d.topic, number, sender, Path(d.file(name)), d.archived)
                    out.append((item, CHANGED))
        return out

    def _list_live(self, path: str, topic: str, archived: bool) -> TopicDir:
        """A live topic's listing, reused while it is known to be current: armed before it was
        listed, as the same directory, not re-armed since, and updated by ``pending`` with
        every name its events carried since."""
        armed = self._watch.armed_as(path) if self._watch is not None else None
        hit = self._listings.get(path)
        if armed is not None and hit is not None and hit[0] == armed:
            return hit[1]
        listing = list_dir(path, topic, archived)
        if armed is not None:
            self._listings[path] = (armed, listing)
        return listing

    def _resets(self) -> tuple[int, int]:
        """How many times keys may have gone from the seen-set: read whole or emptied by the
        seen-mark's log, or dropped here (a prune, an unreadable seen-mark)."""
        return self._log.resets, self._dropped

    def _list_done(self, names: list[str], *, every: bool = True) -> list[TopicDir]:
        """The archived topics ``names``, each listed again only when its directory's own
        ``stat`` (inode, mtime, ctime; relative to an open ``done/``) differs from its listing's
        or was too recent to go by (``SETTLED_DIR_NS``); without ``every``, only those listed
        again (the others are as the last call returned them)."""
        done = f"{self.inbox}/{DONE}"
        kept = self._done
        out = []
        fd = -1
        if names:
            try:
                fd = os.open(done, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                fd = -1
        look = os.stat
        try:
            for t in names:
                sig: tuple[int, int, int] | None = None
                if fd >= 0:
                    try:
                        st = look(t, dir_fd=fd, follow_symlinks=False)
                        sig = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
                    except OSError:
                        sig = None
                hit = kept.get(t)
                if sig is not None and hit is not None and hit[0] == sig:
                    if every:
                        out.append(hit[1])
                    continue
                listed_ns = time.time_ns()
                listing = list_dir(f"{done}/{t}", t, True)
                if sig is not None and max(sig[1], sig[2]) > listed_ns - SETTLED_DIR_NS:
                    sig = None  # changed as recently as a clock tick might hide: not kept
                kept[t] = (sig, listing)
                out.append(listing)
        finally:
            if fd >= 0:
                os.close(fd)
        if every and len(kept) > len(names):
            for gone in kept.keys() - set(names):
                del kept[gone]
        return out

    def _dir_path(self, where: str) -> Path:
        """A topic directory as a ``Path``, made once (an entry's is joined to it)."""
        path = self._paths.get(where)
        if path is None:
            path = self._paths[where] = Path(where)
        return path

    def _unseen_in(self, d: TopicDir, seen: SeenSet, resets: tuple[int, int]) -> Unseen:
        """The entries of ``d`` not in ``seen``: those found for this very listing since no key
        went from the seen-set, still unseen; else found anew (each entry's key looked up)."""
        hit = self._unseen.get(d.dir) if seen is self.seen else None
        keys = seen.keys
        if hit is not None and hit[0] is d and hit[1] == resets:
            found = [u for u in hit[2] if u[0] not in keys] if hit[2] else hit[2]
        else:
            prefix = d.topic + "/"
            topic, archived, base = d.topic, d.archived, self._dir_path(d.dir)
            # the name is NNNN-<from>.md: the key's own spelling; most are seen, so those are
            # dropped in one comprehension before anything is built for the rest
            fresh = [e for e in d.entries if prefix + e[2][:-3] not in keys]
            found = [
                (
                    prefix + name[:-3],
                    InboxItem(topic, number, sender, base / name, archived),
                )
                for number, sender, name in fresh
            ]
        if seen is self.seen:
            self._unseen[d.dir] = (d, resets, found)
        return found

    def _unseen_after(
        self,
        before: TopicDir,
        d: TopicDir,
        names: Iterable[str],
        seen: SeenSet,
        resets: tuple[int, int],
    ) -> Unseen:
        """``_unseen_in`` for ``d``, the listing ``before`` updated from ``names``: what was
        unseen in ``before`` but for those names, and those of them that are entries of ``d``
        not in ``seen`` (found by ``bisect``); anew when nothing was kept for ``before``."""
        hit = self._unseen.get(d.dir)
        if hit is None or hit[0] is not before or hit[1] != resets or seen is not self.seen:
            return self._unseen_in(d, seen, resets)
        keys = seen.keys
        prefix = d.topic + "/"
        named = [e for n in names if (e := _entry_name(n)) is not None]
        gone = {prefix + e[2][:-3] for e in named}
        found = [u for u in hit[2] if u[0] not in gone and u[0] not in keys]
        entries = d.entries
        for e in named:
            key = prefix + e[2][:-3]
            i = bisect.bisect_left(entries, e)
            if i < len(entries) and entries[i] == e and key not in keys:
                path = self._dir_path(d.dir) / e[2]
                found.append((key, InboxItem(d.topic, e[0], e[1], path, d.archived)))
        self._unseen[d.dir] = (d, resets, found)
        return found

    def _look_everywhere(
        self, seen: SeenSet
    ) -> tuple[list[InboxItem], list[TopicDir], list[TopicDir]]:
        """Every topic looked at (a listing kept from before where it is still current): the
        entries not in ``seen`` (live, then archived; a topic both live and in ``done/``, which
        is damage, yields each key once), the live topics, and those with strays or a HELD.md.
        For the watcher's own seen-set, what was found is kept as the ``_View`` the next rounds
        update from their events."""
        inbox = str(self.inbox)
        if self._names is not None:
            live_names, done_names = self._names
        else:
            live_names, done_names = topic_names(inbox), topic_names(f"{inbox}/{DONE}")
        resets = self._resets()
        live = [self._list_live(f"{inbox}/{t}", t, False) for t in live_names]
        done = self._list_done(done_names)
        waiting: dict[str, None] = {}
        items = _first_of_each([self._unseen_in(d, seen, resets) for d in (*live, *done)])
        if seen is self.seen:
            for d in (*live, *done):
                if self._unseen[d.dir][2]:
                    waiting[d.dir] = None
            listed = {d.dir for d in (*live, *done)}
            for gone in self._unseen.keys() - listed:
                del self._unseen[gone]
            for gone in self._paths.keys() - listed:
                del self._paths[gone]
        flagged = [d for d in live if d.strays or d.held]
        # kept only while every live topic is listed under a watch of its own: one that is not
        # (not armed yet) would not tell a later round that it changed
        if seen is self.seen and all(d.dir in self._listings for d in live):
            self._view = _View(resets, waiting, {d.dir: None for d in flagged})
        else:
            self._view = None
        return items, live, flagged

    def _look_again(
        self,
        view: _View,
        touched: dict[str, tuple[TopicDir, TopicDir, dict[str, Change]]],
        seen: SeenSet,
    ) -> tuple[list[InboxItem], list[TopicDir], list[TopicDir]]:
        """``_look_everywhere`` brought up to date from the events: the live topics in
        ``touched`` (listings updated from their events' names) are looked at again, the rest
        as they were (the archived topics by ``_look_archived``). The live topics returned are
        the touched ones (all that can hold a seen entry written since)."""
        resets = view.resets
        for where, (before, d, names) in touched.items():
            found = self._unseen_after(before, d, names, seen, resets)
            if found:
                view.waiting[where] = None
            else:
                view.waiting.pop(where, None)
            if d.strays or d.held:
                view.flagged[where] = None
            else:
                view.flagged.pop(where, None)
        lists = []
        for where in list(view.waiting):
            hit = self._unseen.get(where)
            found = [] if hit is None else [u for u in hit[2] if u[0] not in seen.keys]
            if found:
                lists.append(found)
                if hit is not None and len(found) < len(hit[2]):
                    self._unseen[where] = (hit[0], hit[1], found)
            else:
                del view.waiting[where]
        flagged = [self._listings[w][1] for w in view.flagged if w in self._listings]
        return _first_of_each(lists), [t[1] for t in touched.values()], flagged

    def _look_archived(self, view: _View, seen: SeenSet) -> list[InboxItem]:
        """The entries not in ``seen`` of each archived topic whose own ``stat`` changed since
        it was listed (no event tells: ``done/<topic>`` is not watched), listed again."""
        lists = []
        if self._names is not None and self._names[1]:
            for d in self._list_done(self._names[1], every=False):
                found = self._unseen_in(d, seen, view.resets)
                if found:
                    view.waiting[d.dir] = None
                    lists.append(found)
                else:
                    view.waiting.pop(d.dir, None)
        return _first_of_each(lists)

    def _deliverable(
        self, found: list[tuple[InboxItem, str | None]], seen: SeenSet, out: list[Delivered]
    ) -> None:
        """Each entry of ``found`` (with why it is shown again, if it is) that is whole and in
        scope, appended to ``out`` as delivered, keyed as it stands when it may not be whole,
        does not read or was shown before (unless ``seen`` has that key)."""
        for item, note in found:
            found_entry = self._entry(item.path, item.topic)
            if found_entry is None:
                continue
            entry, st, partial = found_entry
            if note is not None:
                partial = note if partial is None else f"{note}; {partial}"
            elif partial is None and entry.error is None and st.st_mtime_ns >= self._round_ns:
                # written while this round looked: the next one must not take it as changed
                self._also[item.key] = f"{item.key}@{st.st_size}.{st.st_mtime_ns}"
            if self.action == "required" and entry.action not in ("required", None):
                continue  # fyi; an unreadable action stays visible
            key = item.key
            if partial is not None or entry.error is not None or note is not None:
                # marked as it stands: a later change to it is delivered again
                key = f"{key}@{st.st_size}.{st.st_mtime_ns}"
                if key in seen.keys:
                    continue
            if partial is not None:
                warning = partial if entry.warning is None else f"{entry.warning}; {partial}"
                entry = entry.replace(warning=warning)
            out.append(
                Delivered(
                    "entry", key, item.topic, item.path, item.archived, entry, partial=partial
                )
            )

    def _placed(self, changed: Changes, seen: SeenSet) -> list[InboxItem] | None:
        """The common wake's round, in one pass: every name the events carried is a new entry
        renamed (or closed) into one listed live topic, not seen, while the last look found
        nothing unseen elsewhere and no stray or hold; those entries, with the listing, what is
        unseen and the view brought up to date as ``_look`` would leave them. ``None``, having
        changed nothing, for any other wake (``_look`` then makes it)."""
        view = self._view
        if (
            view is None
            or len(view.waiting) > 1
            or view.flagged
            or self._look_all
            or self._names is None
            or seen is not self.seen
            or len(changed) != 1
            or view.resets != self._resets()
        ):
            return None
        ((p, names),) = changed.items()
        if not names:
            return None
        where = str(p)
        hit = self._listings.get(where)
        unseen = self._unseen.get(where)
        if hit is None or unseen is None or (view.waiting and where not in view.waiting):
            return None
        before = hit[1]
        keys = seen.keys
        if unseen[0] is not before or unseen[1] != view.resets:
            return None
        if any(u[0] not in keys for u in unseen[2]):  # found before and not seen since
            return None
        if before.strays or before.held or before.archived:
            return None
        entries = before.entries  # a new tuple with each name added: one copy, not three
        prefix = before.topic + "/"
        new: list[tuple[str, tuple[int, str, str], str, os.stat_result]] = []
        for name, change in names.items():
            m = ENTRY_RE.match(name) if change.state == CLOSED else None
            if m is None:
                return None
            e = (int(m.group(1)), m.group(2), name)
            i = bisect.bisect_left(entries, e)
            key = prefix + name[:-3]
            if (i < len(entries) and entries[i] == e) or key in keys:
                return None  # listed or seen before: whether it changed is ``_look``'s to tell
            path = f"{where}/{name}"
            try:
                st = os.lstat(path)
            except OSError:
                return None
            if not stat.S_ISREG(st.st_mode):
                return None
            entries = _inserted(entries, i, e)
            new.append((key, e, path, st))
        listing = TopicDir(before.topic, where, False, entries, False, before.has_state, ())
        self._listings[where] = (hit[0], listing)
        base = self._dir_path(where)
        found: Unseen = []
        for key, (number, sender, name), path, st in new:
            self._states[path] = CLOSED
            self._looked[path] = st  # read next, without a second ``lstat``
            item = InboxItem(before.topic, number, sender, _child(base, name), False)
            found.append((key, item))
        self._unseen[where] = (listing, view.resets, found)
        view.waiting[where] = None
        return [item for _, item in found]

    def _ready(self) -> tuple[_View, tuple[int, int], set[str]] | None:
        """What the common wake (``_quick``) needs of the state before any event is read: the
        view, its ``resets`` and the keys seen, when the last look left nothing unseen, no stray
        or hold, nothing to look at again, and a seen-set as this watcher last read it and not
        due a prune; else ``None`` (the wake goes the general way). Made just before the wait
        blocks, since nothing else changes this state until the wake."""
        view = self._view
        if (
            view is None
            or view.flagged
            or len(view.waiting) > 1
            or self._look_all
            or self._names is None
            or self._again
            or self._rearm
            or self._kept
            or self.defer_until is not None
            or not self._state_dir_made
        ):
            return None
        resets = view.resets
        log = self._log
        listed = self._listed_now
        if (
            resets[0] != log.resets
            or resets[1] != self._dropped
            or listed is None
            or log.meta.get("pruned_at") != listed
        ):
            return None
        return view, resets, self.seen.keys

    def _quick(
        self,
        change: Change,
        show: Show | None,
        ready: tuple[_View, tuple[int, int], set[str]] | None,
    ) -> WatchResult | None:
        """The common wake, start to end: one entry renamed (or closed) into a listed live
        topic, while ``ready`` (``_ready``, made before the wait) holds; read in one pass, its
        head plain (``inbox.plain_head``), its sender a member whose body claims no one else, in
        scope and whole; shown and marked as ``take`` does, with the listing and what is unseen
        left as ``_placed`` and ``take`` leave them.

        ``None``, having changed nothing (``change`` then goes to ``_pending``), for anything
        else: any other event, a stray, a sender or claim that ``check_sender`` flags, a head
        the full parser reads, a file over ``QUICK_BYTES`` or not regular, a seen-set written by
        another process since, a key seen already; so every unusual wake reads as the general
        path reads it. A failure once it is shown (``show`` raised, the mark did not go) drops
        the view: the next round looks at everything again."""
        if ready is None:
            return None
        view, resets, keys = ready
        where = str(change.directory)
        hit = self._listings.get(where)
        unseen = self._unseen.get(where)
        if hit is None or unseen is None or (view.waiting and where not in view.waiting):
            return None
        before = hit[1]
        if unseen[0] is not before or unseen[1] != resets or before.strays or before.held:
            return None
        for u in unseen[2]:
            if u[0] not in keys:  # found before and not seen since
                return None
        name = change.name
        m = ENTRY_RE.match(name)
        if m is None or before.archived:
            return None
        number, sender = int(m.group(1)), m.group(2)
        e = (number, sender, name)
        entries = before.entries
        i = bisect.bisect_left(entries, e)
        topic = before.topic
        key = f"{topic}/{name[:-3]}"
        if (i < len(entries) and entries[i] == e) or key in keys or sender not in self._members:
            return None
        self._round_ns = round_ns = time.time_ns()
        path = f"{where}/{name}"
        try:  # looked at before it is opened: nothing but a regular file is ever opened
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size > QUICK_BYTES:
                return None
            fd = os.open(path, _READ_FLAGS)
            try:
                raw = os.read(fd, QUICK_BYTES + 1)
            finally:
                os.close(fd)
        except OSError:
            return None
        if len(raw) != st.st_size:  # changed since the ``lstat``: the general path reads it
            return None
        head = plain_head(raw)
        if head is None:
            return None
        fields, at, action, body = head
        claimed = fields.get("from")
        if (
            (claimed is not None and claimed != sender)
            or (body and body[-1] != "\n")
            or (self.action == "required" and action != "required")
        ):
            return None
        log = self._log
        with self._lock:
            if not log.held_as_read():
                return None  # written by another process since: ``take``'s to do
            item = _child(self._dir_path(where), name)
            if _ENTRY_REST is None or _DELIVERED_REST is None:
                entry = Entry(
                    number,
                    sender,
                    self._writer,
                    topic,
                    item,
                    at,
                    action,
                    body,
                    fields,
                    arrived_ns=st.st_ctime_ns,
                )
                delivered = Delivered("entry", key, topic, item, False, entry)
            else:  # as their ``__init__`` fills them (``_filler``)
                entry = _new(Entry)
                entry.__dict__.update(
                    _ENTRY_REST,
                    number=number,
                    sender=sender,
                    side=self._writer,
                    topic=topic,
                    path=item,
                    at=at,
                    action=action,
                    body=body,
                    meta=fields,
                    arrived_ns=st.st_ctime_ns,
                )
                delivered = _new(Delivered)
                delivered.__dict__.update(
                    _DELIVERED_REST,
                    kind="entry",
                    key=key,
                    topic=topic,
                    path=item,
                    archived=False,
                    entry=entry,
                )
            found = [delivered]
            marks = [key]
            if st.st_mtime_ns >= round_ns:  # written while this round looked (``_deliverable``)
                marks.append(f"{key}@{st.st_size}.{st.st_mtime_ns}")
            marked = log.meta.get("marked_ns")
            if isinstance(marked, int) and marked > round_ns:
                round_ns = marked
            listing = TopicDir(
                topic, where, False, _inserted(entries, i, e), False, before.has_state, ()
            )
            self._listings[where] = (hit[0], listing)
            self._unseen[where] = (listing, resets, [])
            view.waiting.pop(where, None)
            result = _result(self.agent, self.side, found, self.warnings)

            def mark() -> bool:  # ``_mark`` when no prune is due: one line appended, no fsync
                try:
                    log.add_as_read(marks, round_ns)
                except (OSError, NoSpace) as e:
                    if not self._keep_unmarked(self.seen, marks):
                        self._not_stored(e)
                        return False
                return True

            stored = False
            try:
                stored = mark() if show is None else show_then_record(lambda: show(result), mark)
            finally:
                if not stored:  # not known to be marked: all looked at again, this one whole
                    self._view = None
                    del self._unseen[where], self._listings[where]
                    self._states[path] = CLOSED
        if self.warnings != result.warnings:  # a warning the mark gave
            result = _result(self.agent, self.side, found, self.warnings)
        return result

    def _look(
        self, changed: Changes | None, seen: SeenSet, out: list[Delivered]
    ) -> tuple[_View | None, list[InboxItem], list[TopicDir]]:
        """A round's look from the events (``changed``; ``None``: not known, all of it): the
        listings and the view brought up to date, and what is deliverable appended to ``out``;
        returns the view (``None``: everything was looked at anew), what was unseen, and the
        live topics with strays or a HELD.md."""
        look: dict[str, set[str]] | None = {}  # seen entries to look at again (None: all)
        # listed live topics updated from their events' names: (the listing before, after, names)
        touched: dict[str, tuple[TopicDir, TopicDir, dict[str, Change]]] = {}
        if changed is None:  # not known which (events lost): every directory is listed anew
            self._listings.clear()
            self._states.clear()  # and whether a file is whole is asked of the kernel again
            self._rearm = True
            self._names = None
            self._view = None
            self._listed_now = None
            look = None
        else:
            for p, names in changed.items():
                where = str(p)
                if names is not None:
                    self._note_changes(where, names)
                    if look is not None:
                        look.setdefault(where, set()).update(names)
                elif look is not None:
                    look = None
                hit = self._listings.get(where)
                if hit is not None and names is not None:
                    # only these names in a listed topic changed: look at them, not at all of it
                    listing = relisted(hit[1], names, self._looked)
                    self._listings[where] = (hit[0], listing)
                    touched[where] = (hit[1], listing, names)
                else:  # the inbox, done/, a topic directory itself: list and arm anew
                    self._listings.pop(where, None)
                    self._rearm = self._again = True
                    self._names = None
                    self._view = None
                    self._listed_now = None
        if self._names is None and changed is not None:  # listed after both were armed
            self._names = (topic_names(self.inbox), topic_names(self.inbox / DONE))
        if self._look_all:
            look, self._look_all = None, False
        view = self._view
        if seen is not self.seen or view is None or view.resets != self._resets():
            items, live, flagged = self._look_everywhere(seen)
            view = None
        else:
            items, live, flagged = self._look_again(view, touched, seen)
        self._deliverable(
            [*((i, None) for i in items), *self._shown_then_changed(live, seen, look)], seen, out
        )
        return view, items, flagged

    def pending(self, seen: SeenSet | None = None) -> list[Delivered]:
        """Everything in scope not in ``seen`` (default: the loaded cursor), oldest first."""
        return self._pending(seen, self._watch.take_changes() if self._watch is not None else None)

    def _pending(self, seen: SeenSet | None, changed: Changes | None) -> list[Delivered]:
        """``pending`` after the events ``changed`` (``None``: not known)."""
        seen = seen if seen is not None else self.seen
        self.defer_until = None
        self._recheck = False
        self._round_ns = time.time_ns()
        self._also = {}
        self._looked = {}
        out: list[Delivered] = []
        placed = self._placed(changed, seen) if changed else None
        view: _View | None
        flagged: list[TopicDir]
        if placed is not None:  # the common wake: only new entries, renamed into one topic
            view, items, flagged = self._view, placed, []
            self._deliverable([(i, None) for i in placed], seen, out)
        else:
            view, items, flagged = self._look(changed, seen, out)
        if view is not None and not out:
            # nothing to show yet, so this round may block next: first the archived topics,
            # which no event announces (a round that found something returns it at once, and
            # the next, before it blocks, looks at them); a key found live is not taken twice
            shown = {i.key for i in items}
            later = [i for i in self._look_archived(view, seen) if i.key not in shown]
            self._deliverable([(i, None) for i in later], seen, out)
        for d in flagged:
            for name in d.strays:  # shown once, marked: never silently invisible
                key = f"{d.topic}/{name}:stray"
                if key not in seen.keys:
                    why = f"{_stray_why(d.file(name))}; not parsed"
                    out.append(Delivered("stray", key, d.topic, Path(d.file(name)), why=why))
        holds = load_holds(self.ex) if flagged and any(d.held for d in flagged) else {}
        for d in flagged:
            if not d.held:
                continue
            path = Path(d.file(HELD_NAME))
            sig = hold_sig(path)
            if sig is None:
                continue
            if not is_trusted(holds, self.side, d.topic, path):
                # not placed by the tick: a stray file, shown once as such, never as a hold
                key = f"{d.topic}/{HELD_NAME}@{sig[1]}:stray"
                if key not in seen.keys:
                    why = f"{HELD_NAME} not placed by the tick (written by the other side?)"
                    out.append(Delivered("stray", key, d.topic, path, False, why=why))
                continue
            try:
                key = f"{d.topic}/{HELD_NAME}@{sig[1]}"
                text = read_regular(path).decode("utf-8", "replace")
            except OSError:
                continue
            if key not in seen.keys:
                out.append(Delivered("held", key, d.topic, path, False, text=text))
        if len(out) > 1:
            out.sort(key=_sort_key)
        return out

    def _load_seen(self) -> SeenSet:
        """The stored seen-set; an unreadable one is a warning and reads as fresh (re-delivers).

        Something other than a file at the seen-mark's path (a directory, a FIFO) cannot be
        replaced either: the reader is fresh, keeps what it takes in memory only, and says so.
        """
        try:
            return self._log.load()
        except (FormatError, OSError) as e:
            path = self.store.path_for(self.key)
            fresh = (
                f"treating {self.agent} as a fresh reader: everything in to-{self.side}/ "
                "is delivered again"
            )
            kind = _not_a_file(path)
            if kind is not None:
                msg = (
                    f"seen-mark {path} is {kind}, not a file: {fresh}, and nothing is marked "
                    "seen until it is removed"
                )
            else:
                why = getattr(e, "strerror", None) or getattr(e, "message", None) or str(e)
                msg = f"seen-mark {path} does not read ({why}); {fresh}"
            if msg not in self.warnings:
                self.warnings.append(msg)
            self._log.seen.keys.clear()
            self._dropped += 1
            self._log.seen.keys.update(self._kept)
            return self._log.seen

    def _topics(self) -> set[str]:
        return set(topic_names(self.inbox)) | set(topic_names(self.inbox / DONE))

    def _listed(self) -> list[int]:
        """The identity and change time of the inbox and ``done/``: a topic can leave both only
        by changing one of them."""
        out = []
        inbox = str(self.inbox)
        for d in (inbox, f"{inbox}/{DONE}"):
            try:
                st = os.stat(d)
                out += [st.st_ino, st.st_mtime_ns]
            except OSError:
                out += [0, 0]
        return out

    def _prune(self, seen: SeenSet) -> bool:
        """Drop keys of topics neither live nor in ``done/`` and of holds no longer in place;
        whether anything was dropped.

        A topic is dropped only when two listings in a row miss it (an archive or reopen
        moving it between the listings of the inbox and ``done/``); a wrong drop re-delivers.
        It runs when the inbox or ``done/`` changed since the last one (noted with the set), so
        a take costs the keys it adds, not the keys it holds; a hold's key goes with the next.
        """
        listed = self._listed_now
        if listed is None:
            listed = self._listed()
            if self._watch is not None:  # its events on the inbox and done/ say when to redo it
                self._listed_now = listed
        if self._log.meta.get("pruned_at") == listed:
            return False
        self._log.meta["pruned_at"] = listed
        topics = {k.partition("/")[0] for k in seen.keys}
        gone = topics - self._topics()
        if gone:
            gone -= self._topics()
        held = f"/{HELD_NAME}@"
        keep = set()
        for k in seen.keys:
            topic = k.partition("/")[0]
            if topic in gone:
                continue
            if held in k:
                sig = hold_sig(self.inbox / topic / HELD_NAME)
                if sig is None or f"{topic}{held}{sig[1]}" != k.removesuffix(":stray"):
                    continue  # that hold is gone; a new one has a new mtime, a new key
            keep.add(k)
        if len(keep) == len(seen.keys):
            return False
        seen.keys.intersection_update(keep)
        self._dropped += 1
        return True

    def _mark(self, current: SeenSet, keys: list[str], round_ns: int) -> None:
        """Mark ``keys`` seen in ``current`` (the seen-set just loaded under the lock), noting
        ``round_ns``: appended, no fsync (a power cut re-delivers, never loses); the set is
        rewritten when a prune dropped keys. A seen-mark that is not a file keeps them in
        memory (said when it was loaded)."""
        before = list(self._log.meta.get("pruned_at") or [])
        try:
            if self._prune(current):
                new = [k for k in keys if k not in current.keys]
                current.keys.update(keys)
                self._log.meta["marked_ns"] = round_ns
                try:
                    self._log.rewrite()
                except BaseException:  # not written: not seen, here either
                    current.keys.difference_update(new)
                    raise
            else:
                after = self._log.meta.get("pruned_at")
                meta: dict[str, Any] = {"marked_ns": round_ns}
                if after != before:
                    meta["pruned_at"] = after
                self._log.add(keys, meta)
        except (OSError, NoSpace) as e:
            if not self._keep_unmarked(current, keys):
                self._not_stored(e)

    def _not_stored(self, e: OSError | NoSpace) -> None:
        """A seen-mark that could not be written (a full or failing state dir): a warning, not
        an error, since what it marks was delivered; the next watch delivers it again."""
        why = getattr(e, "strerror", None) or str(e)
        msg = (
            f"seen-mark {self.store.path_for(self.key)} cannot be stored ({why}); the next watch "
            "delivers these entries again"
        )
        if msg not in self.warnings:
            self.warnings.append(msg)

    def _keep_unmarked(self, current: SeenSet, keys: list[str]) -> bool:
        """After a mark failed: whether the seen-mark is not a file (said when it was loaded),
        and ``keys`` were then kept in memory (delivered again by the next reader)."""
        if _not_a_file(self.store.path_for(self.key)) is None:
            return False
        self._kept.update(keys)
        current.keys.update(self._kept)
        return True

    def take(self, found: list[Delivered], show: Show | None = None) -> list[Delivered]:
        """Mark ``found`` seen under the cursor lock; returns what no one else took first.

        With ``show``, what is fresh is shown first (``show`` writes and flushes it) and marked
        only once ``show`` returned; if it raises, nothing is marked.
        """
        if not self._state_dir_made:
            self.store.dir.mkdir(parents=True, exist_ok=True)
            self._state_dir_made = True
        with self._lock:
            current = self._load_seen()
            fresh = [d for d in found if d.key not in current.keys]
            self.seen = current
            if not fresh:
                return fresh

            keys = [d.key for d in fresh] + [
                self._also[d.key] for d in fresh if d.key in self._also
            ]
            marked = self._log.meta.get("marked_ns")
            round_ns = max(self._round_ns, marked if isinstance(marked, int) else 0)

            def mark() -> None:
                self._mark(current, keys, round_ns)

            if show is None:  # nothing was output: no signal to hold until the mark is written
                mark()
            else:
                result = WatchResult(self.agent, self.side, fresh, False, list(self.warnings))
                show_then_record(lambda: show(result), mark)
        for d in fresh:  # taken: read again only if it changes (its size or mtime then differ)
            where = str(d.path)
            self._states.pop(where, None)
            self._cache.pop(where, None)
        return fresh

    def watch(
        self,
        timeout: float | None,
        *,
        peek: bool = False,
        on_armed: Callable[[], None] | None = None,
        show: Show | None = None,
    ) -> WatchResult:
        """Block until something unseen is in scope; deliver it. ``WaitTimeout`` at the deadline.

        ``show`` gets the result before anything is marked seen (see ``take``); with ``peek``
        it gets it too, and nothing is marked.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        ready = None  # ``_ready`` as the wait began: the state it left stands until the wake
        while True:
            w = self._arm()
            if on_armed is not None:
                on_armed()
                on_armed = None
            one = self._watch.take_one() if self._watch is not None else None
            if one is None:
                changed = self._watch.take_changes() if self._watch is not None else None
            else:  # the common wake: one name renamed or closed into an armed directory
                if ready is None and not peek:  # a wake before the first wait
                    ready = self._ready()
                quick = None if peek else self._quick(one, show, ready)
                if quick is not None:
                    return quick
                changed = {one.directory: {one.name: one}}
            ready = None
            found = self._pending(None, changed)
            if found and self._recheck:
                # a file created in place whose first write is in it but whose IN_MODIFY was
                # not queued yet when the events were taken reads as linked in whole: the
                # events queued since say WRITING, and it is held after all
                found = self.pending()
            if found and not peek:
                found = self.take(found, show)
            elif found and show is not None:
                show(WatchResult(self.agent, self.side, found, peek, list(self.warnings)))
            if found:
                return WatchResult(self.agent, self.side, found, peek, list(self.warnings))
            if not self.ex.inbox(self.side).is_dir():  # removed under the wait: nothing can come
                raise Gone(f"to-{self.side}/ was removed while waiting", path=self.ex.root)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                scope = "entry" if self.action == "any" else "action: required entry"
                raise WaitTimeout(
                    f"no new {scope} for {self.agent} in to-{self.side}/ within {timeout:g}s",
                    payload=WatchResult(
                        self.agent, self.side, [], peek, list(self.warnings)
                    ).to_json(self.ex.root),
                )
            if self._again:  # events were taken that the paths armed then may not cover
                self._again = False
                continue
            if self.defer_until is not None:
                grace = max(0.0, self.defer_until - time.monotonic())
                left = grace if left is None else min(left, grace)
            ready = None if peek else self._ready()
            w.wait(left)


def watch(
    ex: Exchange,
    agent: str,
    *,
    timeout: float | None = None,
    peek: bool = False,
    action: str = "any",
    store: CursorStore | None = None,
    show: Show | None = None,
) -> WatchResult:
    """Block until an unseen entry (or hold) for ``agent`` exists; deliver it and advance the
    cursor unless ``peek``. ``WaitTimeout`` (exit 3) at the deadline; ``Conflict`` for a stranger;
    ``Gone`` (exit 4) when the inbox is removed while waiting.
    ``show`` writes the result out before the cursor moves (``Watcher.take``); without it, what
    is returned is marked seen as it returns.
    """
    w = Watcher(ex, agent, action=action, store=store)
    try:
        return w.watch(timeout, peek=peek, show=show)
    finally:
        w.close()  # Watch.close hands the slow inotify close to a thread


def ack(ex: Exchange, agent: str, keys: list[str], *, store: CursorStore | None = None) -> int:
    """Mark the items ``keys`` (from a ``peek``) seen; ``NotFound`` naming any key not in the inbox.

    With ``watch --peek`` this makes delivery survive a failed agent run: peek, work, then ack --
    a run that dies before acking leaves the entry to be delivered again (a failed run that
    consumed the change signal would make the message look dropped).
    """
    with Watcher(ex, agent, store=store) as w:
        everything = {d.key: d for d in w.pending(SeenSet(set()))}
        unknown = [k for k in keys if k not in everything and k not in w.seen.keys]
        if unknown:
            raise NotFound(f"not in to-{w.side}/: {', '.join(unknown)}", path=w.inbox)
        return len(w.take([everything[k] for k in keys if k in everything]))


def mark_all_seen(ex: Exchange, agent: str, *, store: CursorStore | None = None) -> int:
    """Record everything now in ``agent``'s inbox as seen (first set-up); returns how many new."""
    with Watcher(ex, agent, store=store) as w:
        return len(w.take(w.pending(SeenSet(set()))))

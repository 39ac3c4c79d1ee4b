"""Where topics are: the one lister of topic directories, live and archived, on both sides.

A topic is a ``YYYY-MM-DD-<slug>`` directory directly under ``to-<side>/`` (live) or under
``to-<side>/done/`` (archived). A new topic usually exists on one side only (the sender's outbox)
until the other side answers; that is normal, not damage. A topic live on one side and archived on
the other is half-archived (``placement`` is the one place that says so): the tick brings it back
to one state. Names that are not valid topics (and dot-names) are ignored, so a stray file or an
in-flight temp never becomes a topic.

The exchange tree holds no symlinks: one planted as ``done/`` (or an inbox, or a topic) would make
a plain ``rename`` move a topic out of the exchange, so every lister here skips it and, when asked,
reports it (the tick and ``doctor`` name it).

Listings are by name (``topic_entries``, ``topic_names``), by name with each directory's own names
(``list_dir``: entries, STATE.md, HELD.md, strays; no ``stat``, no read), and per topic across
both sides (``topic_pairs``). Wake-up and health commands run these every few minutes over
thousands of topics, so directory paths are plain strings, not ``Path`` objects.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from mailslot.core.names import TOPIC_RE
from mailslot.core.record import Record
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME

if TYPE_CHECKING:
    from mailslot.exchange.layout import Exchange

__all__ = [
    "ARCHIVED",
    "ENTRY_RE",
    "HALF_ARCHIVED",
    "LIVE",
    "EntryName",
    "Looked",
    "Named",
    "TopicDir",
    "arrivals",
    "leftover_name",
    "linked",
    "list_dir",
    "placement",
    "real_dir",
    "relisted",
    "side_dirs",
    "tell_names",
    "topic_entries",
    "topic_mtimes",
    "topic_names",
    "topic_pairs",
]

# An entry file's name: ``NNNN-<from>.md`` (the number shared by both sides, the writer's name).
ENTRY_RE = re.compile(r"^([0-9]{4})-([a-z0-9][a-z0-9_-]{0,39})\.md$")

LIVE = "live"
ARCHIVED = "archived"
HALF_ARCHIVED = "half-archived"


def placement(archived: Iterable[bool]) -> str:
    """``live``, ``archived`` or ``half-archived`` for a topic whose copies (one per side that
    has one) are archived or not: live on one side and archived on the other is half-archived;
    a topic with no live copy is archived."""
    flags = set(archived)
    if False in flags:
        return HALF_ARCHIVED if True in flags else LIVE
    return ARCHIVED


class EntryName(NamedTuple):
    """An entry file by name only: ``NNNN-<from>.md`` split into its number and sender."""

    number: int
    sender: str
    name: str


def linked(directory: Path) -> Path | None:
    """The symlink among ``directory`` and (for ``done/``) its inbox, or ``None``."""
    for path in (directory, directory.parent) if directory.name == DONE else (directory,):
        if os.path.islink(path):
            return path
    return None


def real_dir(path: Path) -> bool:
    """Whether ``path`` is a directory itself (not a symlink to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def topic_entries(directory: Path | str, links: list[str] | None = None) -> list[os.DirEntry[str]]:
    """The valid topic directories directly in ``directory`` as ``scandir`` entries (none if it
    does not exist); their ``stat(follow_symlinks=False)`` is the directory's own.

    Symlinks (``directory`` itself, its inbox for ``done/``, or an entry) are skipped and, when
    ``links`` is given, appended to it.
    """
    if _linked_away(directory, links):
        return []
    try:
        with os.scandir(directory) as it:
            return list(_topic_dirs(it, os.fspath(directory), links))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _linked_away(directory: Path | str, links: list[str] | None) -> bool:
    """Whether ``directory`` (or its inbox, for ``done/``) is a symlink, appended to ``links``."""
    bad = linked(Path(directory))
    if bad is not None and links is not None:
        links.append(str(bad))
    return bad is not None


def _topic_dirs(
    it: Iterator[os.DirEntry[str]], directory: str, links: list[str] | None
) -> Iterator[os.DirEntry[str]]:
    """The valid topic directories among ``it`` (a scandir of ``directory``); a symlink among
    them is never followed: appended to ``links`` as ``directory/name``, not listed."""
    match = TOPIC_RE.fullmatch
    for e in it:
        name = e.name
        if name[0] == "." or not match(name):
            continue
        if e.is_symlink():
            if links is not None:
                links.append(os.path.join(directory, name))
        elif e.is_dir(follow_symlinks=False):
            yield e


def topic_mtimes(directory: str, links: list[str] | None = None) -> list[tuple[str, int]]:
    """``(name, mtime_ns)`` of each directory ``topic_entries`` finds, stat'd relative to an
    open ``directory`` (the kernel then walks one name, not the whole path, for each of tens of
    thousands of topics). A topic gone between the listing and its stat is left out."""
    if _linked_away(directory, links):
        return []
    out = []
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        with os.scandir(fd) as it:
            for e in _topic_dirs(it, directory, links):
                try:
                    out.append((e.name, e.stat(follow_symlinks=False).st_mtime_ns))
                except FileNotFoundError:
                    continue  # moved away since the listing (an archive, a reopen)
    finally:
        os.close(fd)
    return out


def topic_names(directory: Path | str, links: list[str] | None = None) -> list[str]:
    """Valid topic directory names directly in ``directory`` (``topic_entries``, by name)."""
    return [e.name for e in topic_entries(directory, links)]


class TopicDir(Record):
    """One topic directory of one inbox: its entry files and which of STATE.md and HELD.md it has.

    ``dir`` is a plain string: these are made by the ten thousand, and ``pathlib`` costs more
    than the ``scandir`` that finds them. A ``core.record`` record, not a dataclass: every send
    imports this module.
    """

    __match_args__ = ("topic", "dir", "archived", "entries", "held", "has_state", "strays")
    __slots__ = ("archived", "dir", "entries", "has_state", "held", "strays", "topic")
    topic: str
    dir: str
    archived: bool
    # (number, from, file name) of each entry, by (number, from): plain tuples, unpacked where
    # read (an EntryName each would cost a listing of 100,000 entries tens of milliseconds)
    entries: tuple[tuple[int, str, str], ...]
    held: bool
    has_state: bool
    strays: tuple[str, ...]  # names that are not entries, STATE.md or HELD.md

    def __init__(
        self,
        topic: str,
        dir: str,
        archived: bool,
        entries: tuple[tuple[int, str, str], ...],
        held: bool,
        has_state: bool,
        strays: tuple[str, ...] = (),
    ) -> None:
        self.topic = topic
        self.dir = dir
        self.archived = archived
        self.entries = entries
        self.held = held
        self.has_state = has_state
        self.strays = strays

    @property
    def path(self) -> Path:
        """The directory as a ``Path``."""
        return Path(self.dir)

    def file(self, name: str) -> str:
        """The path of ``name`` in this directory."""
        return f"{self.dir}/{name}"

    def newest(self) -> tuple[int, str, str] | None:
        """``(number, from, file name)`` of the newest entry by ``(number, from)``."""
        return self.entries[-1] if self.entries else None


class Named(Protocol):
    """A name found in a directory and whether it is a regular file: an ``os.DirEntry``, or a
    ``Looked`` made from an ``lstat``."""

    @property
    def name(self) -> str: ...

    def is_file(self, *, follow_symlinks: bool = True) -> bool: ...


class Looked(NamedTuple):
    """A name looked at with ``lstat`` (``Named``, like a ``scandir`` entry)."""

    name: str
    regular: bool

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        """Whether it is a regular file (never a symlink: it was ``lstat``'d)."""
        return self.regular


def leftover_name(name: str) -> bool:
    """Whether ``name`` in a topic directory is a dot-name (an in-flight temp, a draft, an
    editor's swap file or lock) or an editor's leftover (emacs's ``#autosave#``, a ``backup~``):
    never an entry, never a stray, never committed (``gitlog.EXCLUDE``): every reader of a topic
    directory passes over it."""
    return name[:1] == "." or name[-1:] == "~" or (len(name) > 1 and name[0] == name[-1] == "#")


def tell_names(
    found: Iterable[Named],
) -> tuple[list[tuple[int, str, str]], list[str], bool, bool]:
    """The names of a topic directory told apart, in one pass: ``(entries, strays, held,
    has_state)``. Dot-names and editors' leftovers (``leftover_name``) are ignored; anything not
    a regular file is a stray, never opened, and so never a hold or a STATE either; entries are
    ``(number, from, name)``, unsorted."""
    entries = []
    strays = []
    held = has_state = False
    for e in found:
        name = e.name
        if leftover_name(name):
            continue
        if not e.is_file(follow_symlinks=False):
            strays.append(name)
        elif name[4:5] == "-" and name[:1].isdigit() and (m := ENTRY_RE.match(name)):
            entries.append((int(name[:4]), m.group(2), name))
        elif name == HELD_NAME:
            held = True
        elif name == STATE_NAME:
            has_state = True
        else:
            strays.append(name)
    return entries, strays, held, has_state


def list_dir(path: Path | str, topic: str, archived: bool) -> TopicDir:
    """The names in one topic directory (no stat, no read), told by ``tell_names`` (the file
    type comes free from ``scandir``); a missing one is empty."""
    entries: list[tuple[int, str, str]] = []
    strays: list[str] = []
    held = has_state = False
    try:
        with os.scandir(path) as it:
            entries, strays, held, has_state = tell_names(it)
    except (FileNotFoundError, NotADirectoryError):
        pass
    if len(entries) > 1:
        entries.sort()
    return TopicDir(
        topic,
        path if isinstance(path, str) else str(path),
        archived,
        tuple(entries),
        held,
        has_state,
        tuple(sorted(strays)) if strays else (),
    )


def relisted(
    d: TopicDir, names: Iterable[str], stats: dict[str, os.stat_result] | None = None
) -> TopicDir:
    """``d`` with ``names`` looked at again (one ``lstat`` each, told by ``tell_names``): what
    ``list_dir`` would now say, when only ``names`` changed since ``d`` was listed (a watcher
    knows which from its file events). Anything but a missing name that does not ``lstat``
    lists the directory again in full. ``stats``, when given, gets each ``lstat`` by path (a
    caller about to read those files need not make it again)."""
    names = tuple(names)
    placed = _entries_placed(d, names, stats)
    if placed is not None:
        return placed
    entries = {e[2]: e for e in d.entries}
    strays = set(d.strays)
    held, has_state = d.held, d.has_state
    looked = []
    for name in names:
        if name[:1] in ("", "."):
            continue
        entries.pop(name, None)
        strays.discard(name)
        if name == HELD_NAME:
            held = False
        elif name == STATE_NAME:
            has_state = False
        try:
            st = os.lstat(d.file(name))
        except FileNotFoundError:
            continue
        except OSError:
            return list_dir(d.dir, d.topic, d.archived)
        looked.append(Looked(name, stat.S_ISREG(st.st_mode)))
    new, new_strays, new_held, new_state = tell_names(looked)
    entries.update((e[2], e) for e in new)
    strays.update(new_strays)
    listed = sorted(entries.values()) if len(entries) > 1 else list(entries.values())
    return TopicDir(
        d.topic,
        d.dir,
        d.archived,
        tuple(listed),
        held or new_held,
        has_state or new_state,
        tuple(sorted(strays)),
    )


def _entries_placed(
    d: TopicDir, names: tuple[str, ...], stats: dict[str, os.stat_result] | None = None
) -> TopicDir | None:
    """``relisted`` when every name is an entry's or a dot-name (the common wake: an entry
    renamed in from its temp), each placed in or taken out of the sorted entries by ``bisect``
    rather than the whole topic rebuilt; ``None`` for any other name, or one that does not
    ``lstat`` for another reason than being gone."""
    entries = list(d.entries)
    strays = list(d.strays)
    for name in names:
        if leftover_name(name):
            continue
        m = ENTRY_RE.match(name)
        if m is None:
            return None
        path = d.file(name)
        try:
            st: os.stat_result | None = os.lstat(path)
        except FileNotFoundError:
            st = None
        except OSError:
            return None
        if st is not None and stats is not None:
            stats[path] = st
        e = (int(m.group(1)), m.group(2), name)
        i = bisect.bisect_left(entries, e)
        there = i < len(entries) and entries[i] == e
        regular = st is not None and stat.S_ISREG(st.st_mode)
        if regular and not there:
            entries.insert(i, e)
        elif there and not regular:
            del entries[i]
        if name in strays:
            strays.remove(name)
        if st is not None and not regular:
            strays.append(name)
    return TopicDir(
        d.topic,
        d.dir,
        d.archived,
        tuple(entries),
        d.held,
        d.has_state,
        tuple(sorted(strays)),
    )


def arrivals(d: TopicDir) -> list[tuple[int, int, str]]:
    """``(ctime_ns, number, name)`` of every entry in ``d``, oldest arrival first (one ``lstat``
    each; a file gone meanwhile is left out): the order debts are decided in."""
    out = []
    for number, _, name in d.entries:
        try:
            out.append((os.lstat(d.file(name)).st_ctime_ns, number, name))
        except OSError:
            continue
    out.sort()
    return out


def side_dirs(ex: Exchange, inbox_side: str, *, archived: bool = False) -> dict[str, TopicDir]:
    """Topic directories of ``to-<inbox_side>/`` by topic (live ones win over ``done/`` copies)."""
    inbox = str(ex.inbox(inbox_side))
    out: dict[str, TopicDir] = {}
    if archived:
        for name in topic_names(f"{inbox}/{DONE}"):
            out[name] = list_dir(f"{inbox}/{DONE}/{name}", name, True)
    for name in topic_names(inbox):
        out[name] = list_dir(f"{inbox}/{name}", name, False)
    return out


def topic_pairs(ex: Exchange, *, include_archived: bool = False) -> dict[str, dict[str, TopicDir]]:
    """Live (or half-archived) topics -> inbox side -> its directory (a ``done/`` copy if only
    that side archived it); with ``include_archived``, archived topics too. A live copy wins
    over a stale one in ``done/`` on the same side. Sorted by topic."""
    a, b = ex.sides
    live = {s: side_dirs(ex, s) for s in ex.sides}
    live_a, live_b = live[a], live[b]
    done: dict[str, set[str]] = {}
    names = live_a.keys() | live_b.keys()
    if include_archived:
        done = {s: set(topic_names(ex.inbox(s) / DONE)) for s in ex.sides}
        names |= done[a] | done[b]
    out: dict[str, dict[str, TopicDir]] = {}
    for name in sorted(names):
        da, db = live_a.get(name), live_b.get(name)
        if da is not None and db is not None:  # the common case: live on both sides
            out[name] = {a: da, b: db}
            continue
        pair = {}
        for s in ex.sides:
            d = live[s].get(name)
            if d is None:
                if s not in done:
                    done[s] = set(topic_names(ex.inbox(s) / DONE))
                if name in done[s]:
                    d = list_dir(f"{ex.inbox(s)}/{DONE}/{name}", name, True)
            if d is not None:
                pair[s] = d
        out[name] = pair
    return out

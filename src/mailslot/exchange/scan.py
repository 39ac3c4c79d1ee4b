"""One cheap pass over the tree: every live topic's files by presence, size and mtime.

The tick diffs by ``(size, mtime_ns)``, never by content (re-reading whole files is noise and
cost), and parses only what the guard and the index need -- each side's newest entry and each
STATE.md -- through a cache keyed by the same signature, so a tick with nothing new reads no
file at all. Keys are logical (``to-<side>/<topic>/<name>`` even while a copy sits in ``done/``),
so an archive or recovery move is not mistaken for new traffic.

A quiet tick does not even read those records: ``QuickRecord`` is the little the tick keeps per
copy beside them (its directory's mtime and ctime, STATE.md's size and mtime, the names of its
last listing and ``quick_key``: a digest of that listing, every name with its type, size, mtime
and ctime). A copy whose directory and STATE.md match it, outside its rotation slot, is a
``Stub``: unchanged, passed over without a listing; in its slot, one whose directory's ctime is
as recorded too (so it holds the same names) and whose names, each ``lstat``'d, digest to the
same key is a ``Stub`` too (the directory not listed again, nothing else made or read). A topic
whose copies are all stubs, or listed and the same (``quiet``), may keep its last outcome
(``tick``).

HELD.md and dot-names (in-flight temps) are never part of the scan: a marker the tick writes must
not look like traffic, or it would notify about itself every run. Nor are an editor's leftovers
(``listing.leftover_name``: ``#autosave#``, ``backup~``), which git never commits either.

A file still being written in place (``core.wait.settled``: held open for writing, or changed
within the settle window with nothing else known) is *deferred*: left out of the copy as if not
there yet (``SideCopy.deferred``), so this run neither reads, reports nor commits it, and the
copy is listed in full next run, when it is taken once whole.

A topic directory whose mtime is unchanged since a *settled* earlier scan (its mtime was then more
than ``RACY_NS`` old, so no same-timestamp write can hide behind it) has the same names: creating,
renaming in or deleting a file changes the directory's mtime. Only the files that are legitimately
rewritten in place -- STATE.md -- and the newest entry (the guard's input) are re-stat'd then.
Every directory's every name is still ``lstat``'d once per ``ROTATION`` runs of the tick (by the
names of its last listing while its ctime, which no ``touch`` or restore puts back, says they are
the same -- a ctime that was settled, more than ``RACY_NS`` old, when listed; else it is listed in
full), so an entry rewritten in place (a reused number's
overwrite) is reported within that many ticks (ten minutes on the two-minute timer); git history
keeps it anyway. The turn is counted by runs (the
tick keeps it), not read off the clock: on a timer whose period is a multiple of the rotation's
span, a clock-based turn would come round to the same directories every time.
"""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mailslot.core.clock import parse_time
from mailslot.core.errors import FormatError
from mailslot.core.fsio import written_ns
from mailslot.core.wait import OPEN_SETTLE, settled
from mailslot.exchange.entries import ENTRY_RE, parse_entry_text
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.listing import (
    HALF_ARCHIVED,
    EntryName,
    leftover_name,
    placement,
    topic_entries,
    topic_names,
)
from mailslot.exchange.safeio import read_regular
from mailslot.exchange.state import parse_state
from mailslot.exchange.tickstate import QuickRecord
from mailslot.exchange.tree import stray_kind

__all__ = [
    "CopyRecord",
    "Parsed",
    "QuickRecord",
    "Required",
    "SideCopy",
    "Stub",
    "TopicScan",
    "cached",
    "current_sig",
    "keep_deferred",
    "materialize",
    "parse_file",
    "parse_sig",
    "quick_key",
    "scan_tree",
]

Sig = tuple[int, int]
"""``(size, mtime_ns)`` of one file: equal means unchanged, for the tick's purposes."""

# A directory modified this close to a scan may hide a write made in the same (coarse) timestamp.
RACY_NS = 2_000_000_000
# Every directory is fully re-listed once per ROTATION runs of the tick: with a tick every two
# minutes, each topic is fully re-stat'd every ten. A caller that keeps no count of its runs
# takes its turn from the clock, in slots of SLOT_NS.
ROTATION = 5
SLOT_NS = 120 * 1_000_000_000


class Required(NamedTuple):
    """The newest ``action: required`` entry of a copy that the other side has not answered,
    and when it arrived (its ctime)."""

    number: int
    sender: str
    name: str
    ctime_ns: int


class CopyRecord(NamedTuple):
    """What the tick keeps per topic copy in its state (a JSON list in this field order), so the
    next scan can rebuild the copy without listing its directory (``SideCopy.record``)."""

    sig: str  # SideCopy.sig
    parsed: dict[str, list[Any]]  # file name -> Parsed.to_list: each file's cached reading
    dir_mtime: int
    held: bool
    entry_count: int
    top: list[Any] | None  # the newest entry's EntryName
    state_sig: list[int] | None  # STATE.md's Sig
    top_sig: list[int] | None  # the newest entry's Sig
    settled: bool
    strays: list[str]
    required: list[Any] | None  # Required


# Where the next run finds a kept record's signature and readings (it is a JSON list).
SIG = CopyRecord._fields.index("sig")
PARSED = CopyRecord._fields.index("parsed")


@dataclass(slots=True)
class SideCopy:
    """One side's directory of a topic (its inbox copy), as found."""

    inbox_side: str
    dir: str  # a string, not a Path: 20,000 of these are built on every tick
    archived: bool
    key: str = ""  # ``to-<inbox_side>/<topic>``, the same while the copy sits in done/
    entries: list[tuple[int, str, str]] = field(default_factory=list)  # (number, from, name)
    files: dict[str, Sig] = field(default_factory=dict)  # name -> (size, mtime_ns)
    held: bool = False
    sig: str = ""  # every file's name, size and mtime in one string: equal means unchanged
    count: int = 0  # entry files
    top: EntryName | None = None  # the newest entry: the last to arrive
    top_ctime: int = 0  # the newest entry's ctime (ns): when it arrived, which its writer can't set
    ctimes: dict[str, int] = field(default_factory=dict)  # entry name -> ctime (listed copies)
    state_ctime: int = 0  # when STATE.md was last written (ns: fsio.written_ns, not a chmod)
    dir_mtime: int = -1  # the directory's mtime when listed; -1 = do not trust
    dir_ctime: int = -1  # its ctime when listed (-1: not known, so its slot lists it in full)
    names: str = ""  # the names of that listing, "/"-joined as quick_key sorted them
    settled: bool = False  # dir_mtime was older than RACY_NS when listed
    trusted: list[Any] | None = None  # the record (CopyRecord) it was rebuilt from, if it was
    strays: list[str] = field(default_factory=list)  # names that are not entries/STATE/HELD
    # once the tick worked it out (req_known); None: none the other side has not answered
    req: Required | None = None
    req_known: bool = False
    # quick_key of its listing, when listed or passed over; "" (matches no listing) when not
    # known, or cleared when HELD.md comes or goes
    trusted_key: str = ""
    quiet: bool = False  # listed, and the same as the last run's QuickRecord says
    deferred: list[str] = field(default_factory=list)  # files still being written: left out

    def quick(self) -> QuickRecord | None:
        """The ``QuickRecord`` to keep for this copy (``None`` if it is not settled)."""
        if not self.settled or self.dir_mtime < 0:
            return None
        state = self.files.get(STATE_NAME)
        size, mtime = state if state is not None else (-1, 0)
        key, ctime, names = self.trusted_key, self.dir_ctime, self.names
        return QuickRecord(self.dir_mtime, size, mtime, key, ctime, names)

    def record(self, parsed: dict[str, list[Any]]) -> list[Any]:
        """The JSON record the tick keeps for this copy (what the next scan can trust)."""
        if self.trusted is not None:
            return self.trusted  # nothing about it changed: the same record, the same object
        state = self.files.get(STATE_NAME)
        top = self.files.get(self.top.name) if self.top else None
        return list(  # a list, as it reads back from JSON: an unchanged record compares equal
            CopyRecord(
                self.sig,
                parsed,
                self.dir_mtime,
                self.held,
                self.count,
                list(self.top) if self.top else None,
                list(state) if state else None,
                list(top) if top else None,
                self.settled,
                self.strays,
                list(self.req) if self.req else None,
            )
        )

    @property
    def path(self) -> Path:
        """The directory as a ``Path``."""
        return Path(self.dir)

    @path.setter
    def path(self, value: Path) -> None:
        self.dir = str(value)

    def newest(self) -> EntryName | None:
        """The newest entry here: the last to arrive (its ctime; the same instant falls back to
        the number), never the highest number alone."""
        return self.top

    def last(self) -> tuple[int, int, str] | None:
        """The newest entry's arrival ``(ctime_ns, number, name)`` (``index.Arrival``)."""
        top = self.top
        return (self.top_ctime, top.number, top.name) if top is not None else None


@dataclass(slots=True)
class TopicScan:
    """A live (or half-archived) topic: its copies per inbox side."""

    name: str
    copies: dict[str, SideCopy] = field(default_factory=dict)
    conflict: str | None = None  # both a live and an archived copy on one side
    stubs: dict[str, Stub] = field(default_factory=dict)  # copies passed over (``Stub``)

    def unchanged(self) -> bool:
        """Whether no copy changed since the last run: each passed over, or listed and quiet."""
        return self.conflict is None and all(c.quiet for c in self.copies.values())

    def sides(self) -> list[str]:
        """The inbox sides with a copy here, in order."""
        return sorted([*self.copies, *self.stubs])

    def materialize(self, records: dict[str, list[Any]], now_ns: int, order: Sequence[str]) -> None:
        """Every stub made a whole copy (``materialize``), for whatever needs more than that
        nothing changed; copies in ``order`` of sides, as the scan adds them."""
        if not self.stubs:
            return
        whole = dict(self.copies)
        for side, stub in self.stubs.items():
            whole[side] = materialize(stub, records.get(stub.key), now_ns)
        self.copies = {side: whole[side] for side in order if side in whole}
        self.stubs.clear()

    @property
    def half_archived(self) -> bool:
        """Live on one side, archived on the other."""
        return placement(c.archived for c in self.copies.values()) == HALF_ARCHIVED


_OPEN_SETTLE_NS = int(OPEN_SETTLE * 1_000_000_000)


def _being_written(path: str, st: os.stat_result, now_ns: int) -> bool:
    """Whether the file at ``path`` may not be read as whole yet (``core.wait.settled``, with no
    event known). A file unchanged for ``OPEN_SETTLE`` is whole by that rule whatever else is
    true, so only recently changed files are asked about."""
    if st.st_ctime_ns < now_ns - _OPEN_SETTLE_NS:
        return False
    return not settled(path, st, None, now_ns / 1e9).whole


def _scan_dir(
    path: str,
    key: str,
    inbox_side: str,
    archived: bool,
    now_ns: int = 0,
    dir_mtime: int | None = None,
    dir_ctime: int = -1,
    defer: bool = True,
) -> SideCopy:
    """``path`` listed, every file stat'd. ``dir_mtime``: the directory's mtime, taken by the
    caller before this listing (else it is taken here). With ``defer`` (and ``now_ns``), a file
    still being written is left out and named in ``deferred``."""
    copy = SideCopy(inbox_side, path, archived, key)
    files, entries, match = copy.files, copy.entries, ENTRY_RE.match
    parts: list[str] = []
    ctimes: dict[str, int] = {}
    listed: list[Listed] = []
    try:
        # the directory's mtime and ctime before listing: a change during the listing makes
        # them newer (the caller's mtime is older still: a change since makes them differ)
        if dir_mtime is None:
            st = os.stat(path)
            dir_mtime, dir_ctime = st.st_mtime_ns, st.st_ctime_ns
        # A ctime as recent as RACY_NS may be shared by a change still to come (a file
        # system's timestamps can be a second coarse): not kept, so the slot lists in full.
        copy.dir_mtime = dir_mtime
        copy.dir_ctime = dir_ctime if dir_ctime < now_ns - RACY_NS else -1
        copy.settled = copy.dir_mtime < now_ns - RACY_NS
        with os.scandir(path) as it:
            for e in it:
                name = e.name
                if leftover_name(name):
                    continue
                if name == HELD_NAME:
                    copy.held = True
                    listed.append(_HELD)
                    continue
                st = e.stat(follow_symlinks=False)
                listed.append((name, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
                if stray_kind(name, st.st_mode) is not None:
                    copy.strays.append(name)  # reported, and the topic is not archived
                    continue
                m = match(name)
                if defer and now_ns and _being_written(e.path, st, now_ns):
                    copy.deferred.append(name)
                    continue
                size, mtime = st.st_size, st.st_mtime_ns
                files[name] = (size, mtime)
                parts.append(f"{name}\t{size}\t{mtime}")
                if m:
                    entries.append((int(m[1]), m[2], name))
                    ctimes[name] = st.st_ctime_ns
                else:
                    copy.state_ctime = written_ns(st)
    except (FileNotFoundError, NotADirectoryError):
        pass
    if copy.deferred:
        copy.settled = False  # listed in full next run, when the file is whole
    parts.sort()
    copy.sig = "\n".join(parts)
    copy.count = len(entries)
    copy.ctimes = ctimes
    copy.trusted_key = quick_key(listed)
    copy.names = "/".join([n[0] for n in listed])  # sorted by quick_key
    if entries:  # the last to arrive; the same instant falls back to the number
        _, number, name, sender = max((ctimes[n], num, n, s) for num, s, n in entries)
        copy.top = EntryName(number, sender, name)
        copy.top_ctime = ctimes[name]
    return copy


Listed = tuple[str, int, int, int, int]
"""One name in a topic directory with its ``lstat``: ``(name, mode, size, mtime_ns, ctime_ns)``
(HELD.md by its presence alone: ``_HELD``)."""

_HELD: Listed = (HELD_NAME, 0, 0, 0, 0)


def quick_key(listed: list[Listed]) -> str:
    """A digest of a topic directory's listing (every name but ``leftover_name``s, as
    ``Listed``; sorted here): all the tick's outcome for the copy depends on beyond its
    readings -- each file's name, type, size and mtime, the entries' arrivals (ctime: a chmod,
    or a rewrite that put the mtime back, still moves it), HELD.md, the strays."""
    listed.sort()
    return hashlib.blake2b(repr(listed).encode(), digest_size=8).hexdigest()


def _named_as(path: str, ctime: int, q: QuickRecord) -> bool:
    """Whether the directory at ``path`` (its mtime as ``q`` holds, its ctime now ``ctime``) is
    as it was when ``q`` was recorded, without listing it: its ctime as then too, so it holds
    the same names (creating, removing or renaming one moves mtime and ctime, and a ctime is put
    back by no one: not ``touch``, ``cp -a`` or a restore), and each name ``lstat``'d gives the
    same ``quick_key``. Anything else, a name gone included, answers no: ``_scan_dir`` then
    looks at it in full."""
    listed: list[Listed] = []
    at = path + "/"
    if ctime != q.dir_ctime:
        return False
    try:
        for name in q.names.split("/") if q.names else ():
            if name == HELD_NAME:
                listed.append(_HELD)
                continue
            st = os.lstat(at + name)
            listed.append((name, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    except OSError:
        return False
    return quick_key(listed) == q.key


def clock_turn(now_ns: int) -> int:
    """The rotation's turn by the clock, for a caller that does not count its runs."""
    return (now_ns // SLOT_NS) % ROTATION


def next_turn(last: int | None, now_ns: int) -> int:
    """The rotation's turn for a run after one that took ``last`` (``None``: unknown, so the
    clock's)."""
    return clock_turn(now_ns) if last is None else (last + 1) % ROTATION


def _rotation_turn(name: str, turn: int) -> bool:
    """Whether it is directory ``name``'s turn for a full listing."""
    return zlib.crc32(name.encode()) % ROTATION == turn


class Stub(NamedTuple):
    """A copy passed over: its ``QuickRecord`` (``quick``, as kept) still holds, so nothing in
    it changed; ``materialize`` makes the whole copy when something needs it."""

    key: str
    dir: str
    inbox_side: str
    dir_mtime: int
    quick: QuickRecord


def materialize(stub: Stub, rec: list[Any] | None, now_ns: int) -> SideCopy:
    """The whole copy of ``stub``: rebuilt from its ``CopyRecord`` ``rec`` when that still
    holds, else listed."""
    name = stub.key.partition("/")[2]
    copy = _trusted(stub.dir, stub.key, name, stub.inbox_side, stub.dir_mtime, rec, now_ns, True)
    if copy is None:
        return _scan_dir(stub.dir, stub.key, stub.inbox_side, False, now_ns)
    # what it vouched for still holds: the listing as it was
    copy.trusted_key, copy.dir_ctime, copy.names = (
        stub.quick.key,
        stub.quick.dir_ctime,
        stub.quick.names,
    )
    return copy


def keep_deferred(copy: SideCopy, rec: list[Any] | None) -> None:
    """Each deferred file of ``copy`` the last run knew (``rec``, its ``CopyRecord``) put back as
    that run saw it: a STATE.md or an entry being rewritten in place reads as it was until it
    is whole, never as gone or torn (its kept reading is reused: the same ``Sig``)."""
    if not copy.deferred or rec is None or len(rec) != len(CopyRecord._fields):
        return
    old = parse_sig(rec[SIG])
    kept = rec[PARSED]
    back = [n for n in copy.deferred if n in old]
    if not back:
        return
    for name in back:
        copy.files[name] = old[name]
        m = ENTRY_RE.match(name)
        if m is None:
            continue
        reading = kept.get(name)
        ctime = reading[5] if reading is not None and len(reading) > 5 else None
        copy.entries.append((int(m[1]), m[2], name))
        copy.ctimes[name] = int(ctime) if ctime is not None else 0
    copy.sig = "\n".join(sorted(f"{n}\t{sz}\t{mt}" for n, (sz, mt) in copy.files.items()))
    copy.count = len(copy.entries)
    if copy.entries:
        ctimes = copy.ctimes
        _, number, name, sender = max((ctimes[n], num, n, s) for num, s, n in copy.entries)
        copy.top = EntryName(number, sender, name)
        copy.top_ctime = ctimes[name]


def current_sig(copy: SideCopy) -> str:
    """``copy``'s directory listed again now: its ``sig`` (equal to ``copy.sig`` when no entry or
    STATE.md was added, removed or rewritten since the scan)."""
    return _scan_dir(copy.dir, copy.key, copy.inbox_side, copy.archived, defer=False).sig


def _stat_of(path: str) -> os.stat_result | None:
    try:
        return os.stat(path, follow_symlinks=False)
    except OSError:
        return None


def _trusted(
    path: str,
    key: str,
    name: str,
    side: str,
    dir_mtime: int,
    rec: list[Any] | None,
    now_ns: int,
    any_mtime: bool = False,
    turn: int = -1,
) -> SideCopy | None:
    """The copy rebuilt from its record (a ``CopyRecord`` as JSON left it) when nothing can have
    changed, else ``None``. ``any_mtime``: the caller has checked the directory against a newer
    ``QuickRecord`` already (the record's own mtime may be older: a quiet tick keeps no record).
    ``turn``: the rotation's turn this run, when a directory in it is listed in full (-1: none).
    """
    if rec is None or len(rec) != len(CopyRecord._fields):
        return None
    # CopyRecord's fields, unpacked (a NamedTuple per copy costs the tick milliseconds)
    sig, _, rec_mtime, held, count, top, state_sig, top_sig, settled, strays, required = rec
    if not settled or (rec_mtime != dir_mtime and not any_mtime):
        return None
    if required is not None and len(required) != len(Required._fields):
        return None  # a record from before arrivals were kept: list the directory
    if _rotation_turn(name, turn):
        return None  # this directory's turn for a full listing
    newest = None
    if top:
        number, sender, fname = top
        newest = EntryName(int(number), str(sender), str(fname))
    req = None
    if required:
        number, sender, fname, ctime = required
        req = Required(int(number), str(sender), str(fname), int(ctime))
    files: dict[str, Sig] = {}
    top_ctime = state_ctime = 0
    for fname, want in ((STATE_NAME, state_sig), (newest.name if newest else None, top_sig)):
        if fname is None or want is None:
            continue
        st = _stat_of(f"{path}/{fname}")
        if st is None:
            return None
        got = (st.st_size, st.st_mtime_ns)
        if list(got) != want:
            return None  # rewritten in place: list the directory
        files[fname] = got
        if fname != STATE_NAME:
            top_ctime = st.st_ctime_ns
        else:
            state_ctime = written_ns(st)
    copy = SideCopy(side, path, False, key, files=files, sig=sig, trusted=rec)
    copy.held, copy.count, copy.strays = bool(held), int(count), [str(n) for n in strays]
    copy.top, copy.top_ctime, copy.state_ctime = newest, top_ctime, state_ctime
    copy.dir_mtime, copy.settled = dir_mtime, True  # settled, or it would not be trusted
    copy.req, copy.req_known = req, True
    return copy


_STATE = f"/{STATE_NAME}"
_as_stub = tuple.__new__  # a Stub made without the class's __new__: 20,000 a quiet run


def _topic_stats(inbox: str, links: list[str]) -> list[tuple[str, int, int]]:
    """``(name, mtime_ns, ctime_ns)`` of each topic directory in ``inbox``
    (``listing.topic_entries``), one ``lstat`` each; one gone since the listing is left out."""
    out = []
    for e in topic_entries(inbox, links):
        try:
            st = e.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # moved away since the listing (an archive, a reopen)
        out.append((e.name, st.st_mtime_ns, st.st_ctime_ns))
    return out


def _scan_inbox(
    ex: Exchange,
    side: str,
    records: dict[str, list[Any]],
    now_ns: int,
    links: list[str],
    quick: dict[str, QuickRecord] | None,
    topics: dict[str, TopicScan],
    turn: int,
) -> None:
    """Each topic directory of ``to-<side>/`` into ``topics``: a ``Stub``, or a copy."""
    inbox = str(ex.inbox(side))
    at, of = f"{inbox}/", f"to-{side}/"
    crc = zlib.crc32  # _rotation_turn, inlined
    for name, mtime, ctime in _topic_stats(inbox, links):
        scan = topics.get(name)
        if scan is None:
            scan = topics[name] = TopicScan(name)
        path = at + name
        key = of + name
        if quick is None:
            copy = _trusted(path, key, name, side, mtime, records.get(key), now_ns, turn=turn)
            scan.copies[side] = copy or _scan_dir(path, key, side, False, now_ns, mtime, ctime)
            continue
        q = quick.get(key)
        if q is not None and q.dir_mtime == mtime:
            if crc(name.encode()) % ROTATION == turn:  # its slot: every name lstat'd
                same = q.dir_ctime >= 0 and _named_as(path, ctime, q)  # (else listed: known)
            elif q.state_size < 0:  # no STATE.md to look at
                same = True
            else:  # STATE.md is rewritten in place: its size and mtime looked at every run
                st = _stat_of(path + _STATE)
                same = st is not None and (st.st_size, st.st_mtime_ns) == (
                    q.state_size,
                    q.state_mtime,
                )
            if same:
                scan.stubs[side] = _as_stub(Stub, (key, path, side, mtime, q))
                continue  # else changed (or gone): list the directory
        copy = _scan_dir(path, key, side, False, now_ns, mtime, ctime)
        copy.quiet = q is not None and copy.trusted_key == q.key
        scan.copies[side] = copy


def parse_sig(sig: str) -> dict[str, Sig]:
    """The ``{name: (size, mtime_ns)}`` a ``SideCopy.sig`` string was made from."""
    out: dict[str, Sig] = {}
    for line in sig.split("\n") if sig else ():
        name, size, mtime = line.split("\t")
        out[name] = (int(size), int(mtime))
    return out


def scan_tree(
    ex: Exchange,
    records: dict[str, list[Any]] | None = None,
    links: list[str] | None = None,
    quick: dict[str, QuickRecord] | None = None,
    turn: int | None = None,
) -> tuple[dict[str, TopicScan], set[str]]:
    """``(live topics, archived topic names)``; a half-archived topic is live, both copies in.

    ``records`` are the tick's records of the last scan (``SideCopy.record``), used to skip
    listing directories that cannot have changed; without them everything is listed. With
    ``quick`` (the last run's ``QuickRecord`` per copy) those are used instead: a copy they
    vouch for is a ``stub`` (see the module docstring), any other is listed. Symlinks where an
    inbox, ``done/`` or a topic directory belongs are never followed: they are skipped and
    appended to ``links``. ``turn`` is the rotation's turn this run (``clock_turn`` without it):
    the directories in it are listed in full, or checked name by name against their record.
    """
    now_ns = time.time_ns()
    turn = clock_turn(now_ns) if turn is None else turn
    topics: dict[str, TopicScan] = {}
    done: dict[str, set[str]] = {}
    links = links if links is not None else []
    for side in ex.sides:
        done[side] = set(topic_names(ex.inbox(side) / DONE, links))
        _scan_inbox(ex, side, records or {}, now_ns, links, quick, topics, turn)
    for side in ex.sides:  # the topics with a copy in done/ too: few, found by set
        for name in sorted(done[side].intersection(topics)):
            scan = topics[name]
            if side in scan.copies or side in scan.stubs:
                scan.conflict = f"to-{side}/ has both {name}/ and {DONE}/{name}/"
                continue
            where = str(ex.inbox(side) / DONE / name)
            scan.copies[side] = _scan_dir(where, f"to-{side}/{name}", side, True)
            scan.copies[side].dir_mtime = -1  # never trusted: it is about to move
    archived = (done[ex.sides[0]] | done[ex.sides[1]]) - set(topics)
    return topics, archived


class Parsed(NamedTuple):
    """The reading of one file: a time (epoch microseconds), a word, an error."""

    time_us: int | None
    word: str | None  # action for an entry, status for a STATE.md
    error: str | None

    def to_list(self, sig: Sig, ctime_ns: int | None = None) -> list[Any]:
        """The form the tick state keeps (``CopyRecord.parsed``): the file's ``Sig``, the
        reading, then the file's ctime when known (a kept list may end before it)."""
        size, mtime_ns = sig
        return [size, mtime_ns, self.time_us, self.word, self.error, ctime_ns]

    @classmethod
    def from_list(cls, kept: list[Any]) -> Parsed:
        """The reading in a kept ``to_list``."""
        return cls(kept[2], kept[3], kept[4])


def cached(kept: list[Any], sig: Sig, ctime_ns: int | None = None) -> Parsed | None:
    """The reading kept (``Parsed.to_list``) if it was made of a file with the same ``sig`` and,
    when both are known, the same ctime (a rewrite that put the mtime back still moved it)."""
    if (kept[0], kept[1]) != sig:
        return None
    was = kept[5] if len(kept) > 5 else None
    if ctime_ns is not None and was is not None and was != ctime_ns:
        return None
    return Parsed(kept[2], kept[3], kept[4])


def _us(value: object, path: Path) -> int | None:
    try:
        dt = parse_time(value, path=str(path))
    except FormatError:
        return None
    return int(dt.timestamp() * 1_000_000)


def parse_file(path: Path, side: str) -> Parsed:
    """Read the entry or STATE.md at ``path`` (written by ``side``); never raises."""
    try:
        raw = read_regular(path)
    except OSError as e:
        return Parsed(None, "unknown" if path.name == STATE_NAME else None, str(e.strerror))
    if path.name == STATE_NAME:
        st = parse_state(raw, side, path)
        t = int(st.updated_at.timestamp() * 1_000_000) if st.updated_at else None
        return Parsed(t, st.status, st.error)
    meta, _, error = parse_entry_text(raw, path)
    action = meta.get("action")
    word = action if isinstance(action, str) and action in ("required", "fyi") else None
    return Parsed(_us(meta.get("at"), path), word, error)

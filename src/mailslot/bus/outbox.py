"""``outbox/``: a drop folder for deliverables, taken by the one consumer the charter names.

Invariants:

* An item is never half-visible: ``put`` streams the file (or a pipe) into a dot-named temp in
  ``outbox/``, hashing it on the way, fsyncs it, and only then claims a number. Under the lock
  the record ``outbox/records/<item>.json`` (who, when, for whom, note, sha256, size) is created
  first and the temp is linked into place after it, so a visible item always has its record.
* A put killed mid-copy has claimed nothing: it leaves only its dot-named temp, which no reader
  sees. A put holds its temp locked from creation until it is published, so a temp nobody holds
  is a killed put's: the next put or take removes it at once, whatever its age. A put killed between
  its record and its link leaves a record without an item: never delivered (only items are),
  and its number stays claimed.
* Items are named ``NNNNNN-<name>`` (more digits past 999999): the number is the next one free
  across ``outbox/``, ``outbox/taken/`` and both records folders, claimed under
  ``.mailslot/locks/outbox.lock``, so no name is ever reused (not even one a half-done put
  claimed) and a taken item never lands on an older one. Files dropped by hand (any non-dot
  regular file) are items too; their record is simply missing.
* Taking is a claim by ``rename`` into ``outbox/taken/``: of two consumers racing for one item
  exactly one rename succeeds and the other moves on, so no item is taken twice. The taker's
  record (``taken_by``, ``taken_at``) goes to ``outbox/taken/records/``: made before the take
  claims or waits as a file without a name (``O_TMPFILE``), written and linked under its name
  once the item is moved, so a take killed at any step leaves no temp of it.
* A waiting take wakes for a name renamed or written into ``outbox/``, never for a dot-named
  temp. When one such item is all that came, it is claimed without listing ``outbox/``: the look
  before the wait found none of this taker's, and every item since came with its event, so it
  is the oldest. The output comes before the watch is let go.
* A take is shown or undone: the move comes first (it is the claim), then the output; output
  that fails (a closed pipe, Ctrl-C) moves the item back. A taker killed between the move and
  its output leaves the item in ``outbox/taken/`` under its name (``outbox list --taken``).
* Nothing after the output waits on the disk: the claim (the move, and the taker's record) is
  made without fsync, shown, and the take returns. Until the take is settled (below), a power
  cut can bring the item back to ``outbox/`` (the move was not on disk: it is taken again) or
  leave it in ``outbox/taken/`` with its taker's record missing or empty; the item is whole
  either way (its bytes were fsync'd by ``put`` and a move never rewrites them). A re-take,
  never a loss.
* An item never loses its record to a take: the taker's record carries the put's (who, for
  whom, the note, the sha256), and the put's record stays in ``outbox/records/`` until a later
  take settles this one, at its start, before it claims or waits: it reads the taker's record
  back, removes the put's only if that carries it whole, and only once the taker's record and
  the folders of the move are fsync'd. Until then the put's record is the item's (``list
  --taken`` falls back to it), and a take killed or cut off at any step leaves it in place.
* Only the writer of ``outbox/taken/`` in ``DIVISION-OF-WORK.md`` may take; with nobody named,
  nobody takes (fail safe: the items stay visible).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from mailslot.bus import owners
from mailslot.bus.layout import CHARTER, TAKEN, Layout
from mailslot.core.clock import format_time
from mailslot.core.durable import sync_file
from mailslot.core.errors import (
    CannotOpen,
    Conflict,
    Gone,
    LimitExceeded,
    MailslotError,
    NotFound,
    WaitTimeout,
)
from mailslot.core.fsio import (
    atomic_create,
    atomic_write,
    due,
    file_lock,
    fsync_dir,
    held_temp,
    highest_number,
    link_unnamed,
    no_space,
    open_unnamed,
    publish_temp,
    read_from,
    sweep_temps,
    write_all,
)
from mailslot.core.handover import held_signals
from mailslot.core.limits import check_chars, check_controls, check_one_line
from mailslot.core.move import safe_move
from mailslot.core.names import validate_agent
from mailslot.core.record import FrozenRecord, Record
from mailslot.core.wait import Watch

__all__ = ["ITEM_MAX_BYTES", "NOTE_MAX", "Item", "OutboxEmpty", "list_items", "put", "take"]

# A deliverable is a file an agent produced (a card, a draft, a build); bigger belongs elsewhere.
# The copy is streamed (hashed as it is written), never held in memory whole.
ITEM_MAX_BYTES = 64 * 1024 * 1024
CHUNK_BYTES = 1 << 20
# Up to this size a take checks the sha256 with the interpreter's own hash: OpenSSL's costs 4 ms
# to load before the first item is shown, and is ahead only from about 1 MiB on.
OWN_SHA256_MAX = 1 << 20
# A note says what the item is in a sentence; the item is the payload.
NOTE_MAX = 500
# A record is a few names, a note and a hash; anyone can drop a file in records/, so its read is
# bounded (a FIFO or a device there is a mangled record, never waited on).
RECORD_MAX_BYTES = 64 * 1024
WIDTH = 6  # digits an item's number is padded to; 1000000 and on are wider
# A record's temp in taken/records/ is removed once stale (an hour); looking for one there, past
# a record per item ever taken, is done this often, and when it was is ``.mailslot/TAKEN_SWEPT``'s
# mtime.
TAKEN_SWEEP_SECONDS = 600.0
TAKEN_SWEPT = "taken-records-swept"
# What a put's temp is named for (``.new-<name>.<pid>.<hex>.tmp``); ``put`` holds it locked.
_NEW = "new-"
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._+-]+")


class OutboxEmpty(WaitTimeout):
    """Nothing to take (exit 3, like a wait that found nothing new)."""

    label = "empty"


class Item(Record):
    """One deliverable in ``outbox/`` (or ``outbox/taken/``) and what its record says.

    A ``core.record`` record, not a dataclass: ``outbox take`` makes one on every start, and a
    process that loads ``dataclasses`` (and ``inspect``, ``ast``, ``dis``) is slower to exit."""

    __match_args__ = (
        "name",
        "path",
        "abspath",
        "sender",
        "recipient",
        "note",
        "sha256",
        "size",
        "at",
        "source",
        "taken_by",
        "taken_at",
        "has_record",
        "sha256_ok",
        "extra",
    )
    __slots__ = tuple(sorted(__match_args__))
    name: str
    path: str  # relative to the bus root
    abspath: str
    sender: str | None
    recipient: str | None
    note: str | None
    sha256: str | None
    size: int | None
    at: str | None
    source: str | None
    taken_by: str | None
    taken_at: str | None
    has_record: bool
    sha256_ok: bool | None
    extra: dict[str, Any]

    def __init__(
        self,
        name: str,
        path: str,
        abspath: str,
        sender: str | None = None,
        recipient: str | None = None,
        note: str | None = None,
        sha256: str | None = None,
        size: int | None = None,
        at: str | None = None,
        source: str | None = None,
        taken_by: str | None = None,
        taken_at: str | None = None,
        has_record: bool = False,
        sha256_ok: bool | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.abspath = abspath
        self.sender = sender
        self.recipient = recipient
        self.note = note
        self.sha256 = sha256
        self.size = size
        self.at = at
        self.source = source
        self.taken_by = taken_by
        self.taken_at = taken_at
        self.has_record = has_record
        self.sha256_ok = sha256_ok
        self.extra = {} if extra is None else extra

    def to_json(self) -> dict[str, Any]:
        """The item as a JSON-ready dict (``from``/``for`` as in the record)."""
        return {
            "item": self.name,
            "path": self.path,
            "abspath": self.abspath,
            "from": self.sender,
            "for": self.recipient,
            "note": self.note,
            "sha256": self.sha256,
            "bytes": self.size,
            "at": self.at,
            "source": self.source,
            "taken_by": self.taken_by,
            "taken_at": self.taken_at,
            "has_record": self.has_record,
            "sha256_ok": self.sha256_ok,
        }


def _safe_name(source: str) -> str:
    import unicodedata  # here: a put names an item, a take never loads its tables

    name = _UNSAFE_RE.sub("-", unicodedata.normalize("NFKC", source)).lstrip(".-") or "item"
    return name[-100:]


def _check_note(note: str) -> None:
    check_one_line("note", note)
    check_chars("note", note, 1, NOTE_MAX)
    check_controls("note", note, "\t")


def _record(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(read_from(path, limit=RECORD_MAX_BYTES))
    except (MailslotError, ValueError):
        return None  # hand-dropped item, or a record someone mangled: shown without one
    return value if isinstance(value, dict) else None


def _item(layout: Layout, path: Path, record: dict[str, Any] | None) -> Item:
    rec = record or {}
    return Item(
        name=path.name,
        path=layout.relative(path),
        abspath=str(path),
        sender=rec.get("from"),
        recipient=rec.get("for"),
        note=rec.get("note"),
        sha256=rec.get("sha256"),
        size=rec.get("bytes"),
        at=rec.get("at"),
        source=rec.get("source"),
        taken_by=rec.get("taken_by"),
        taken_at=rec.get("taken_at"),
        has_record=record is not None,
    )


def _copy(stream: BinaryIO, digest: Any, size: list[int]) -> Iterator[bytes]:
    """The chunks of ``stream``, hashed and counted; ``LimitExceeded`` past ``ITEM_MAX_BYTES``."""
    while chunk := stream.read(CHUNK_BYTES):
        size[0] += len(chunk)
        if size[0] > ITEM_MAX_BYTES:
            raise LimitExceeded("outbox item", ITEM_MAX_BYTES, size[0], "bytes (or more)")
        digest.update(chunk)
        yield chunk


def _sweep(layout: Layout) -> None:
    """Remove the temps of dead writers from the outbox folders: a put's temp at once once its
    writer's lock is gone (a put killed mid-copy), a record's temp once stale. ``outbox/`` and
    its records hold the items waiting, and are swept by every put and take; ``taken/records/``
    holds a record of every item ever taken, and is swept once in ``TAKEN_SWEEP_SECONDS``."""
    with contextlib.suppress(FileNotFoundError):
        sweep_temps(layout.outbox, held=_NEW)
    with contextlib.suppress(FileNotFoundError):
        sweep_temps(layout.records)
    if due(layout.state / TAKEN_SWEPT, TAKEN_SWEEP_SECONDS):
        with contextlib.suppress(FileNotFoundError):
            sweep_temps(layout.taken_records)


def put(
    root: Path,
    agent: str,
    source: Path,
    *,
    recipient: str | None = None,
    note: str | None = None,
    stream: BinaryIO | None = None,
) -> Item:
    """Copy ``source`` into ``outbox/`` atomically with its record; return the new item.

    With ``stream`` (a pipe, standard input), the bytes come from it and ``source`` only names
    the item. Raises ``NotFound`` for a missing source, ``LimitExceeded`` for one over
    ``ITEM_MAX_BYTES`` or an over-long note, ``Conflict`` when the charter forbids ``agent`` the
    outbox or ``recipient`` is not the consumer it names, ``InvalidName`` for bad names,
    ``CannotOpen`` for a source that is not a file or a pipe.
    """
    validate_agent(agent)
    if recipient is not None:
        validate_agent(recipient, "consumer name")
    if note is not None:
        _check_note(note)
    layout = Layout.at(root)
    source = Path(source)
    if stream is not None:
        return _put(layout, agent, stream, source.name, recipient, note)
    try:
        f = source.open("rb")  # a FIFO opens when its writer does, like `cat` would
    except FileNotFoundError:
        raise NotFound("no such file to put", path=source) from None
    except IsADirectoryError:
        raise CannotOpen("not a regular file; put one file at a time", path=source) from None
    with f:
        st = os.fstat(f.fileno())
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise CannotOpen("not a regular file; put one file at a time", path=source)
        if st.st_size > ITEM_MAX_BYTES:
            raise LimitExceeded("outbox item", ITEM_MAX_BYTES, st.st_size, "bytes")
        return _put(layout, agent, f, source.name, recipient, note)


def _put(
    layout: Layout,
    agent: str,
    stream: BinaryIO,
    source_name: str,
    recipient: str | None,
    note: str | None,
) -> Item:
    root = layout.root
    charter = owners.load(root)
    taker = owners.consumer(charter)
    if recipient is not None and recipient != taker:
        raise Conflict(
            f"{recipient} can never take this: the charter names "
            f"{taker or 'no consumer'} as the writer of {TAKEN}/ ({CHARTER})"
        )
    name = _safe_name(source_name)
    layout.outbox.mkdir(exist_ok=True)
    layout.records.mkdir(exist_ok=True)
    _sweep(layout)
    provisional = highest_number([layout.outbox], WIDTH, longer=True) + 1
    provisional_name = f"outbox/{provisional:0{WIDTH}d}-{name}"
    error = owners.denied_error(
        owners.check(root, agent, [provisional_name], charter), "put into outbox/"
    )
    if error is not None:  # refuse before a long copy; the real name is checked again below
        raise error
    import hashlib  # here: a take loads OpenSSL only for an item whose record holds a sha256

    digest = hashlib.sha256()
    size = [0]
    chunks = _copy(stream, digest, size)
    # Locked until published (removed if the put gives up): unlocked, it is a killed put's.
    with held_temp(layout.outbox, f"{_NEW}{name}", chunks, what=name) as tmp:
        record = {
            "from": agent,
            "for": recipient,
            "note": note,
            "sha256": digest.hexdigest(),
            "bytes": size[0],
            "source": source_name,
        }
        return _claim_number(layout, agent, charter, name, record, tmp)


def _claim_number(
    layout: Layout,
    agent: str,
    charter: owners.Charter,
    name: str,
    record: dict[str, Any],
    tmp: Path,
) -> Item:
    """Under the outbox lock: the next free number, its record, then the item (the temp)."""
    counted = [layout.outbox, layout.taken, layout.records, layout.taken_records]
    with file_lock(layout.lock("outbox")):
        # outbox/ before taken/: a take renames outbox/ -> taken/ without this lock, so an item
        # moving meanwhile is seen in one of the two listings, never missed by both. Records
        # count too: a put killed after writing its record has claimed that number.
        number = highest_number(counted, WIDTH, longer=True) + 1
        while True:
            item_name = f"{number:0{WIDTH}d}-{name}"
            error = owners.denied_error(
                owners.check(layout.root, agent, [f"outbox/{item_name}"], charter),
                "put into outbox/",
            )
            if error is not None:
                raise error
            full = {"item": item_name, **record, "at": format_time()}
            rec_path = layout.records / f"{item_name}.json"
            try:
                atomic_create(rec_path, json.dumps(full, indent=2, ensure_ascii=False) + "\n")
            except Conflict:
                number += 1  # a leftover record of a name someone claimed by hand
                continue
            try:
                publish_temp(tmp, layout.outbox / item_name)
            except Conflict:
                with contextlib.suppress(FileNotFoundError):
                    rec_path.unlink()
                number += 1
                continue
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    rec_path.unlink()
                raise
            return _item(layout, layout.outbox / item_name, full)


def _pending(directory: Path) -> list[str]:
    """The names of the items in ``directory``, oldest first (by mtime, then name): names, not
    paths, since a take looks at the first and a backlog of thousands would build a path each."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    found = [e for e in entries if not e.name.startswith(".") and e.is_file(follow_symlinks=False)]
    if len(found) < 2:  # nothing to order: no stat (the one item of a waking take)
        return [e.name for e in found]
    files = []
    for e in found:
        with contextlib.suppress(FileNotFoundError):
            files.append((e.stat(follow_symlinks=False).st_mtime_ns, e.name))
    files.sort()
    return [name for _, name in files]


def list_items(root: Path, *, taken: bool = False) -> list[Item]:
    """Items waiting in ``outbox/`` oldest first (or those in ``outbox/taken/``); ``NotFound``."""
    layout = Layout.at(root)
    if taken:
        return [
            _item(layout, layout.taken / name, _taken_record(layout, name))
            for name in _pending(layout.taken)
        ]
    return [
        _item(layout, layout.outbox / name, _record(layout.records / f"{name}.json"))
        for name in _pending(layout.outbox)
    ]


def _taken_record(layout: Layout, name: str) -> dict[str, Any] | None:
    """The taker's record of ``taken/NAME``; else the put's, which stays in ``outbox/records/``
    until the taker's is durable (a power cut may have lost the taker's)."""
    return _record(layout.taken_records / f"{name}.json") or _record(
        layout.records / f"{name}.json"
    )


def _sha256(path: Path) -> str:
    """The item's SHA-256, checked before it is shown: a small item's with the interpreter's
    own (loaded in 0.3 ms), a big one's with OpenSSL's (5x faster a byte, 4 ms to load)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        h = _own_sha256() if size <= OWN_SHA256_MAX else None
        if h is None:
            import hashlib

            h = hashlib.sha256()
        # Reads sized to the item: a 1 MiB buffer is an mmap and a munmap for a 5-byte card.
        step = min(CHUNK_BYTES, max(size + 1, 1 << 16))
        while chunk := os.read(fd, step):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def _own_sha256() -> Any:
    """A SHA-256 of the interpreter's own module (``_sha256``, ``_sha2`` from 3.12); ``None``
    where it was built without one."""
    try:
        import _sha256  # type: ignore[import-not-found,unused-ignore]

        return _sha256.sha256()
    except ImportError:
        pass
    try:
        import _sha2  # type: ignore[import-not-found,unused-ignore]

        return _sha2.sha256()
    except ImportError:
        return None


class _Claim(FrozenRecord):
    """A taken item, and what undoing the take needs: where it came from and its record."""

    __match_args__ = ("item", "src", "dest", "record")
    __slots__ = ("dest", "item", "record", "src")
    item: Item
    src: Path
    dest: Path
    record: dict[str, Any] | None

    def __init__(self, item: Item, src: Path, dest: Path, record: dict[str, Any] | None) -> None:
        init = object.__setattr__
        init(self, "item", item)
        init(self, "src", src)
        init(self, "dest", dest)
        init(self, "record", record)


class _TakerRecord:
    """The file of a taker's record, made before the take claims or waits: an unnamed file
    (``O_TMPFILE``) on the bus's file system, so that once an item is claimed its record costs a
    write and a ``link`` into ``taken/records/`` -- no file is created between the wake and the
    output. Never seen by anyone until linked under its name: a take killed before that leaves
    no temp behind. It is made in the bus's root, not in ``taken/records/``: an open file there
    keeps the folders above it in use, and the kernel then holds back its word that ``outbox/``
    was removed (the wait's ``Gone``) until the file is closed. Where the system cannot (no
    ``O_TMPFILE``, no ``/proc``, the name taken already, ``taken/records/`` on another file
    system), the record is written as any state file is, by ``atomic_write``. Used for one
    record at most."""

    __slots__ = ("fd", "used")

    def __init__(self, directory: Path) -> None:
        self.fd = -1
        self.used = False
        with contextlib.suppress(OSError):
            self.fd = open_unnamed(directory) or -1

    def write(self, path: Path, data: bytes) -> None:
        """``path`` (absolute) made with ``data``, without fsync (a later take settles it);
        ``NoSpace`` on a full disk. The file is closed by ``close``, after the output."""
        fd = -1 if self.used else self.fd
        self.used = True
        if fd >= 0:
            with no_space(path):
                write_all(fd, data)
                try:
                    if link_unnamed(fd, path):
                        return
                except (FileExistsError, PermissionError):
                    pass  # a record left under the name, or not ours to link: replaced below
        atomic_write(path, data, durable=False)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def _claim(
    layout: Layout, agent: str, taker_record: _TakerRecord, names: list[str] | None = None
) -> _Claim | None:
    """Take the first of ``names`` (default: every item, oldest first) that is ``agent``'s."""
    for name in _pending(layout.outbox) if names is None else names:
        src = layout.outbox / name
        record = _record(layout.records / f"{name}.json")
        wanted = (record or {}).get("for")
        if wanted and wanted != agent:
            continue
        dest = layout.taken / name
        moved = False
        try:
            with held_signals():  # the move and its taken record, whole
                moved_to = _move_in(layout, src, dest)
                if moved_to is None:
                    continue
                dest = moved_to
                moved = True
                taken_record = {
                    **(record or {"item": src.name}),
                    "taken_by": agent,
                    "taken_at": format_time(),
                }
                taker_record.write(  # as the move, without fsync: a later take settles it
                    layout.taken_records / f"{dest.name}.json",
                    (json.dumps(taken_record, indent=2, ensure_ascii=False) + "\n").encode(),
                )
            item = _item(layout, dest, taken_record if record is not None else None)
            item.taken_by, item.taken_at = agent, taken_record["taken_at"]
            if record is not None and record.get("sha256"):
                item.sha256_ok = _sha256(dest) == record["sha256"]
            return _Claim(item, src, dest, record)
        except BaseException:  # a failure after the move, or a signal held during it: undo
            if moved:
                with held_signals():
                    _release(layout, src, dest, record)
            raise
    return None


def _move_in(layout: Layout, src: Path, dest: Path, *, again: bool = True) -> Path | None:
    """The claim: ``src`` moved to ``dest`` in ``taken/``, or beside it under a stamped name when
    ``dest`` is there already (a hand-dropped name taken before: both kept); where it went, or
    ``None`` when a racer moved it first (exactly one racer's move finds the source). Without
    fsync: a later take settles it. A ``taken/`` missing (``outbox/`` made anew while a take
    waited) is made, and the move tried again."""
    try:
        try:
            safe_move(src, dest, durable=False)
        except Conflict as e:
            if e.path != dest:
                raise
            dest = layout.taken / f"{src.name}.{format_time().replace(':', '')}"
            safe_move(src, dest, durable=False)
    except FileNotFoundError:
        if not again or layout.taken_records.is_dir():
            return None
        for folder in (layout.taken, layout.taken_records):
            with contextlib.suppress(FileExistsError, FileNotFoundError):  # no outbox/: None
                os.mkdir(folder)
        return _move_in(layout, src, dest, again=False)
    return dest


def _release(layout: Layout, src: Path, dest: Path, record: dict[str, Any] | None) -> bool:
    """Undo a take whose output failed: the item back under its old name in ``outbox/`` with
    its record. ``False`` (the item stays taken) if that name was dropped again meanwhile.

    The put's record is still in ``outbox/records/`` unless a ``_settle`` removed it: then it is
    written again, first. Under the outbox lock, so that no settle removes it between that and
    the taker's record going. The taker's record goes before the move, so a take that claims the
    item again the moment it is back keeps its own record (it is put back only if the move finds
    the name taken). Nothing is written in the common case, so a take that failed for want of
    space (its taker's record) still goes back. Killed half-way, the item is whole under
    one of its names (where the move falls back to link and unlink, possibly both: taken twice,
    never lost).
    """
    with file_lock(layout.lock("outbox")):
        put_record = layout.records / f"{src.name}.json"
        if record is not None and not put_record.exists():  # a settle removed it meanwhile
            atomic_write(put_record, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        taker_record = layout.taken_records / f"{dest.name}.json"
        try:  # gone before the move: a take that claims the item back keeps its own record
            kept: bytes | None = read_from(taker_record, limit=RECORD_MAX_BYTES)
        except MailslotError:  # none, or not a record this take wrote
            kept = None
        with contextlib.suppress(FileNotFoundError):
            taker_record.unlink()
        try:
            safe_move(dest, src)  # never over an item dropped under the name since
        except Conflict:  # still taken: its taker's record back, the put's stays (``_settle``)
            if kept is not None:
                atomic_write(taker_record, kept, durable=False)
            return False
    fsync_dir(layout.taken)
    return True


def _claim_here(layout: Layout, agent: str, taker_record: _TakerRecord) -> _Claim | None:
    """``_claim``, or ``Gone`` (exit 4) once ``outbox/`` was removed under the wait."""
    if not layout.outbox.is_dir():
        raise Gone("outbox/ was removed while waiting", path=layout.outbox)
    return _claim(layout, agent, taker_record)


def _wait_for_claim(
    layout: Layout, agent: str, taker_record: _TakerRecord, watch: Watch, wait: float
) -> _Claim:
    """``_claim`` once something comes, blocking on ``watch`` up to ``wait`` seconds.

    ``outbox/`` is armed before each look that follows an arming, so nothing put meanwhile is
    missed. Woken, the take looks first and arms again only if it found nothing: a claim then
    costs no re-arming before its output, and a ``outbox/`` replaced under the wait (its watch
    follows the old one) is armed anew and looked at again before the next wait."""
    deadline = time.monotonic() + wait
    watch.add(layout.outbox)
    while (claim := _claim_here(layout, agent, taker_record)) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"no outbox item to take within {wait:g}s", payload={"taken": None})
        watch.wait(left)
        woken = _woken(layout, watch)
        if woken is not None:
            claim = _claim(layout, agent, taker_record, woken)
        if claim is None:
            claim = _claim(layout, agent, taker_record)
        if claim is not None:
            return claim
        watch.add(layout.outbox)
    return claim


def _woken(layout: Layout, watch: Watch) -> list[str] | None:
    """The item a wake names, when one regular file renamed or written into ``outbox/`` is all
    that came: the only item to take, so no listing (the look before the wait found none of
    this taker's, and every item since came with its event). Else ``None``: list them all."""
    one = watch.take_one()
    if one is None:
        watch.take_changes()  # dropped: the listing that follows looks at all of it
        return None
    if one.directory != layout.outbox:
        return None
    try:
        mode = os.lstat(layout.outbox / one.name).st_mode
    except FileNotFoundError:
        return None
    return [one.name] if stat.S_ISREG(mode) else None


def _show(layout: Layout, claim: _Claim, show: Callable[[Item], None] | None) -> None:
    """``show`` the item; if that fails, the take is undone (``_release``)."""
    if show is None:
        return
    try:
        show(claim.item)
    except BaseException:
        with held_signals():
            _release(layout, claim.src, claim.dest, claim.record)
        raise


def take(
    root: Path, agent: str, *, wait: float = 0, show: Callable[[Item], None] | None = None
) -> Item:
    """Claim the oldest item for ``agent`` into ``outbox/taken/``, waiting up to ``wait`` s.

    The move is the claim, so it comes first; ``show`` then writes the item out, and if it
    raises (a closed pipe, Ctrl-C) the claim is undone: the item is back in ``outbox/`` for the
    next take. A taker killed after the move and before its output leaves the item in
    ``outbox/taken/`` with its ``taken_by`` (``outbox list --taken`` finds it).
    Before it claims or waits it settles the takes made before it (``_settle``), so nothing
    after the output waits on the disk. A waiting take shows the item before it lets go of its
    watch (whose close is not the output's to wait for) and wakes for no dot-named temp.
    Raises ``Conflict`` unless the charter names ``agent`` as the writer of ``outbox/taken/``,
    ``OutboxEmpty`` (exit 3) when there is nothing to take, ``WaitTimeout`` after a wait, ``Gone``
    (exit 4) when ``outbox/`` is removed during it.
    """
    validate_agent(agent)
    layout = Layout.at(root)
    taker = owners.consumer(owners.load(root))
    if taker is None:
        raise Conflict(
            f"nobody may take: {CHARTER} names no writer of {TAKEN}/; add the row "
            f"`| {TAKEN}/ | NAME |` for the consumer"
        )
    if taker != agent:
        raise Conflict(f"{agent} may not take: {taker} is the outbox consumer ({CHARTER})")
    layout.taken.mkdir(parents=True, exist_ok=True)
    layout.taken_records.mkdir(exist_ok=True)
    layout.outbox.mkdir(exist_ok=True)
    _sweep(layout)
    _settle(layout)  # before the wait: the disk is waited on here, never after the output
    taker_record = _TakerRecord(layout.root)
    try:
        if wait > 0:
            _own_sha256()  # its module loaded now, not between the wake and the output
            with Watch(dot_names=False) as watch:
                claim = _wait_for_claim(layout, agent, taker_record, watch, wait)
                _show(layout, claim, show)
        else:
            found = _claim(layout, agent, taker_record)
            if found is None:
                raise OutboxEmpty("nothing to take in outbox/", payload={"taken": None})
            claim = found
            _show(layout, claim, show)
    finally:
        taker_record.close()
    if claim.record is not None and claim.dest.name != claim.src.name:
        # Taken under a stamped name: ``_settle`` pairs a put's record with its taker's by the
        # item's name, so this rare take is settled here, waiting on the disk.
        _settle_take(layout, claim.src.name, claim.dest.name)
    return claim.item


def _settle(layout: Layout) -> None:
    """``_settle_earlier``; one that cannot finish (a failed fsync, a put's record this agent
    may not remove) leaves the put's records where they are -- what a power cut would leave, a
    safe state -- and the take goes on: a settle owed is never a reason to take nothing."""
    with contextlib.suppress(OSError):
        _settle_earlier(layout)


def _settle_earlier(layout: Layout) -> None:
    """Settle the takes made before this one: every item taken under its own name whose put's
    record is still in ``outbox/records/``, once its taker's record carries that record whole.

    For each: the taker's record fsync'd; then the folders of the records, of ``taken/`` and of
    ``outbox/`` (the move) once for all; and only then, under the outbox lock (an undone take,
    ``_release``, holds it while it puts the item back), the put's record removed if the taker's
    record and the taken item are still the ones made durable. Skipped, and left as it is: a put's
    record whose item waits in ``outbox/`` (or was never linked: a killed put), whose taker's
    record is missing or does not carry it (a power cut lost it, so the put's is the item's
    only record), or whose item is also still in ``outbox/`` as the same file (a move killed
    half-way by the link fallback)."""
    try:
        names = os.listdir(layout.records)
    except FileNotFoundError:
        return
    # every record of the backlog waiting in outbox/ is looked at: by a string, not a Path
    taken = str(layout.taken)
    ready: list[tuple[Path, tuple[int, int], tuple[int, int]]] = []
    for file_name in names:
        if file_name.startswith(".") or not file_name.endswith(".json"):
            continue
        name = file_name[: -len(".json")]
        try:
            item = os.lstat(f"{taken}/{name}")
        except FileNotFoundError:
            continue  # waiting in outbox/, or claimed by a put killed before its link
        made = _carried(layout, name, item)
        if made is not None:
            ready.append((layout.records / file_name, _identity(item), made))
    if not ready:
        return
    for directory in (layout.taken_records, layout.taken, layout.outbox):
        fsync_dir(directory)
    with file_lock(layout.lock("outbox")):
        for put_record, item_id, record_id in ready:
            name = put_record.name[: -len(".json")]
            if _same(layout.taken / name, item_id) and _same(
                layout.taken_records / put_record.name, record_id
            ):
                with contextlib.suppress(FileNotFoundError):
                    put_record.unlink()


def _carried(layout: Layout, name: str, item: os.stat_result) -> tuple[int, int] | None:
    """The identity of the taker's record of ``taken/NAME``, fsync'd, if it carries the put's
    record of ``NAME`` whole and ``taken/NAME`` is not also ``outbox/NAME``; else ``None``."""
    with contextlib.suppress(FileNotFoundError):
        if _identity(os.lstat(layout.outbox / name)) == _identity(item):
            return None  # the move's link is made and its unlink is not: taken twice, not yet
    put_record = _record(layout.records / f"{name}.json")
    taker_path = layout.taken_records / f"{name}.json"
    taker = _record(taker_path)
    if put_record is None or taker is None or not taker.get("taken_by"):
        return None
    if any(taker.get(key) != value for key, value in put_record.items()):
        return None
    try:
        before = os.lstat(taker_path)
    except FileNotFoundError:
        return None
    if not sync_file(taker_path):
        return None
    return _identity(before)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _same(path: Path, identity: tuple[int, int]) -> bool:
    try:
        return _identity(os.lstat(path)) == identity
    except FileNotFoundError:
        return False


def _settle_take(layout: Layout, src_name: str, dest_name: str) -> None:
    """Settle one take now: the taker's record and the move durable, then the put's record
    removed (a power cut before that leaves the put's record whole in ``outbox/records/``)."""
    sync_file(layout.taken_records / f"{dest_name}.json")
    for directory in (layout.taken_records, layout.taken, layout.outbox):
        fsync_dir(directory)
    with contextlib.suppress(FileNotFoundError):
        (layout.records / f"{src_name}.json").unlink()

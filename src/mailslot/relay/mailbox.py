"""The turn relay: a worker and a manager exchanging one-line turns in a mailbox dir.

Layout (``relay init DIR --worker w1 --manager manager``)::

    DIR/to-w1.md                 the worker's inbox: written only by the manager (R, Q, STOP)
    DIR/to-manager.md            the manager's inbox: written only by the worker (C, A, ack, STOP)
    DIR/state/<name>-notes.md    each side's diagnostics; never read as conversation
    DIR/.mailslot/relay.json     who is worker and who is manager; relay.lock serialises writes

Every bug a shell-script relay hit is closed by code, not by a rule to remember:

* Arm before send: ``ask`` arms its watch and saves its cursor (the size of its own inbox, in
  the state dir) BEFORE it appends ``C<N>``; a reply landing at any moment after that is found.
* Select by id, never by recency: the wait scans every line since the cursor and takes the one
  whose positional ``id=`` is ``R<N>`` from the other side; a stray line after it is ignored.
* A different file for anything not meant for the human: an inbox accepts only well-formed
  turn lines of the kinds allowed there (``post`` parses every line it writes), and notes go to
  ``state/<name>-notes.md``.
* Caps are asserts in the write path: one physical line, at most 25 words from the manager;
  refused whole, never trimmed. One request gets one reply; a reply to an unknown or already
  answered id is refused; one turn is open at a time. ``ask``, ``reply``, ``stop`` and a
  hand-made ``post`` all check these rules against both inboxes under relay.lock.
* A stop from either side is honoured at once: it ends held waits and refuses every later turn.
  Appends cannot be recalled: lines already written stay; a stop only prevents future sends.
* Never silently skip a message: a line in a reader's inbox that is not a turn (or is signed by
  the wrong side, is of a kind that inbox does not take, or repeats a turn id) is reported to
  that reader by ``serve``, ``ask`` and ``recover`` through
  ``on_unreadable``, naming the file, the line number and why, once per reader (a mark in the
  reader's state dir), not on every poll.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mailslot.core.clock import epoch_ms, format_time, now
from mailslot.core.cursor import ByteCursor, CursorStore
from mailslot.core.durable import sync_appended
from mailslot.core.errors import (
    Conflict,
    FormatError,
    Gone,
    LimitExceeded,
    NotFound,
    WaitTimeout,
)
from mailslot.core.fsio import atomic_create, file_lock, locked_append, read_from, torn_of
from mailslot.core.handover import show_then_record
from mailslot.core.limits import check_chars, check_controls, check_one_line, check_words
from mailslot.core.names import validate_agent
from mailslot.core.record import FrozenRecord, Record
from mailslot.core.wait import Watch
from mailslot.relay.lines import (
    TURN_ID_RE,
    UNREADABLE_KEPT,
    TurnLine,
    Unreadable,
    canonical_id,
    check_utf8,
    format_line,
    parse_inbox,
    parse_line,
    read_inbox,
    turn_id,
)

__all__ = [
    "MANAGER_SAY_MAX_WORDS",
    "NOTES_MAX_BYTES",
    "Conversation",
    "Delivery",
    "Relay",
    "RelayStopped",
    "Scanner",
    "ask",
    "init",
    "note",
    "open_relay",
    "post",
    "recover",
    "reply",
    "scan",
    "serve",
    "stop",
]

# The manager's say= is spoken aloud; 25 words is ~8 s of speech.
MANAGER_SAY_MAX_WORDS = 25
# The worker relays the human faithfully but concisely; a line is still a line, not a payload.
SAY_MAX_CHARS = 1000
# An inbox holds one conversation of one-line turns (a turn and its reply take well under 4 KiB):
# a reader never reads more than this from a file the other side appends to, and no write makes
# an inbox grow past it. A longer conversation starts a new mailbox.
INBOX_MAX_BYTES = 4 * 1024 * 1024
# Notes are diagnostics, not documents.
NOTE_MAX_BYTES = 16 * 1024
# A notes file (seen lines, acks, notes) is read whole by ``stats``, so bounded: no write makes
# one grow past what a reader reads.
NOTES_MAX_BYTES = 16 * 1024 * 1024
# A default held wait longer than the worst turn a shell relay recorded (16.7 s) with room to think.
DEFAULT_WAIT_SECONDS = 120.0
CONFIG = Path(".mailslot") / "relay.json"
STOP_NOTE = (
    "appends cannot be recalled: lines already written stay; the stop only prevents future sends"
)


class RelayStopped(Conflict):
    """A turn refused because the relay was stopped (exit 1)."""


class Relay(FrozenRecord):
    """An initialised mailbox: its directory and who plays which part.

    This module's records are ``core.record`` records, not dataclasses: every relay command
    loads it."""

    __match_args__ = ("root", "worker", "manager")
    __slots__ = ("manager", "root", "worker")
    root: Path
    worker: str
    manager: str

    def __init__(self, root: Path, worker: str, manager: str) -> None:
        init = object.__setattr__
        init(self, "root", root)
        init(self, "worker", worker)
        init(self, "manager", manager)

    def inbox(self, name: str) -> Path:
        """``to-<name>.md``: the file ``name`` reads and the other side writes."""
        return self.root / f"to-{name}.md"

    def notes(self, name: str) -> Path:
        """``state/<name>-notes.md``: diagnostics, never conversation."""
        return self.root / "state" / f"{name}-notes.md"

    @property
    def lock(self) -> Path:
        """The lock every write to this mailbox takes (check + append are one step)."""
        return self.root / ".mailslot" / "relay.lock"

    def role(self, name: str | None) -> str:
        """``worker`` or ``manager``; ``Conflict`` for anyone else."""
        if name == self.worker:
            return "worker"
        if name == self.manager:
            return "manager"
        raise Conflict(
            f"{name!r} is neither the worker ({self.worker}) nor the manager ({self.manager}) "
            "of this relay; pass --as",
            path=self.root,
        )

    def other(self, name: str) -> str:
        """The other side's name."""
        return self.manager if self.role(name) == "worker" else self.worker


class Conversation(Record):
    """What both inboxes say, parsed: turns by id, acks, the stop, and the open turn."""

    __match_args__ = ("turns", "acks", "stopped", "unreadable", "unreadable_counts")
    __slots__ = ("acks", "stopped", "turns", "unreadable", "unreadable_counts")
    turns: dict[str, TurnLine]
    acks: dict[str, TurnLine]
    stopped: TurnLine | None
    unreadable: list[Unreadable]
    unreadable_counts: dict[str, int]

    def __init__(
        self,
        turns: dict[str, TurnLine] | None = None,  # None: each a fresh empty dict or list
        acks: dict[str, TurnLine] | None = None,
        stopped: TurnLine | None = None,
        unreadable: list[Unreadable] | None = None,
        unreadable_counts: dict[str, int] | None = None,
    ) -> None:
        self.turns = {} if turns is None else turns
        self.acks = {} if acks is None else acks
        self.stopped = stopped
        self.unreadable = [] if unreadable is None else unreadable
        self.unreadable_counts = {} if unreadable_counts is None else unreadable_counts

    @property
    def malformed(self) -> int:
        """How many complete lines in the two inboxes are not turns of their writer (``unreadable``
        lists the last ``UNREADABLE_KEPT`` of each inbox)."""
        return sum(self.unreadable_counts.values())

    @property
    def open_turn(self) -> TurnLine | None:
        """The C or Q turn still waiting for its R or A, if any."""
        for tid, line in self.turns.items():
            if line.prefix in "CQ" and _reply_id(tid) not in self.turns:
                return line
        return None

    def next_number(self, prefix: str) -> int:
        """The next number for ``prefix`` turns (numbering per mailbox, never reused)."""
        return 1 + max((t.number for t in self.turns.values() if t.prefix == prefix), default=0)

    def to_json(self) -> dict[str, Any]:
        """Open turn, stop, counts."""
        open_turn = self.open_turn
        return {
            "open_turn": open_turn.to_json() if open_turn else None,
            "stopped": self.stopped.to_json() if self.stopped else None,
            "turns": len(self.turns),
            "malformed_lines": self.malformed,
            "unreadable": [u.to_json() for u in self.unreadable],
        }


class Delivery(Record):
    """A reply delivered to the asker: which turn, the text, the three stamps."""

    __match_args__ = ("id", "reply_id", "say", "t0", "t1", "t2", "recovered")
    __slots__ = ("id", "recovered", "reply_id", "say", "t0", "t1", "t2")
    id: str
    reply_id: str
    say: str
    t0: int | None
    t1: int | None
    t2: int
    recovered: bool

    def __init__(
        self,
        id: str,
        reply_id: str,
        say: str,
        t0: int | None,
        t1: int | None,
        t2: int,
        recovered: bool = False,
    ) -> None:
        self.id = id
        self.reply_id = reply_id
        self.say = say
        self.t0 = t0
        self.t1 = t1
        self.t2 = t2
        self.recovered = recovered

    def to_json(self) -> dict[str, Any]:
        """``id, reply_id, say, T0, T1, T2, recovered``."""
        return {
            "id": self.id,
            "reply_id": self.reply_id,
            "say": self.say,
            "T0": self.t0,
            "T1": self.t1,
            "T2": self.t2,
            "recovered": self.recovered,
        }


def _reply_id(ask_id: str) -> str:
    return {"C": "R", "Q": "A"}[ask_id[0]] + ask_id[1:]


def _ask_id(reply_id: str) -> str:
    return {"R": "C", "A": "Q"}[reply_id[0]] + reply_id[1:]


def _hhmm() -> str:
    return now().astimezone().strftime("%H:%M")


def init(root: Path | str, worker: str, manager: str) -> Relay:
    """Create the mailbox (inboxes, state/, config); ``Conflict`` if it exists with other names."""
    root = Path(root).expanduser().absolute()
    validate_agent(worker, "worker name")
    validate_agent(manager, "manager name")
    if worker == manager:
        raise Conflict("the worker and the manager must be two different names")
    (root / "state").mkdir(parents=True, exist_ok=True)
    (root / ".mailslot").mkdir(exist_ok=True)
    config = {"worker": worker, "manager": manager, "created_at": format_time()}
    try:
        atomic_create(root / CONFIG, json.dumps(config, indent=2) + "\n")
    except Conflict:
        existing = open_relay(root)
        if (existing.worker, existing.manager) != (worker, manager):
            raise Conflict(
                f"already a relay for worker {existing.worker} and manager {existing.manager}",
                path=root / CONFIG,
            ) from None
    relay = Relay(root, worker, manager)
    for name in (worker, manager):
        with contextlib.suppress(Conflict):
            atomic_create(relay.inbox(name), "")
    return relay


def open_relay(root: Path | str) -> Relay:
    """The relay in ``root``; ``NotFound`` when it was never initialised, ``FormatError``."""
    root = Path(root).expanduser().absolute()
    path = root / CONFIG
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise NotFound("not a relay mailbox (run `mailslot relay init DIR`)", path=root) from None
    except json.JSONDecodeError as e:
        raise FormatError(f"corrupt relay config: {e}", path=path) from None
    if not isinstance(config, dict):
        raise FormatError("corrupt relay config: not an object", path=path)
    return Relay(root, validate_agent(config["worker"]), validate_agent(config["manager"]))


def _still_there(relay: Relay) -> None:
    """``Gone`` (exit 4) when the mailbox was removed under a wait: nothing can arrive now."""
    if not (relay.root / CONFIG).is_file():
        raise Gone("the relay mailbox was removed while waiting", path=relay.root)


@contextlib.contextmanager
def _gone_if_removed(relay: Relay) -> Iterator[None]:
    """Around a wait and the writes that arm it: a file the mailbox holds (its lock, an inbox)
    missing because the whole mailbox was removed meanwhile is ``Gone`` (exit 4), as it is
    once the wait has begun, not a bare "No such file"."""
    try:
        yield
    except FileNotFoundError:
        _still_there(relay)
        raise


def _read(path: Path, offset: int = 0) -> bytes:
    """The inbox from ``offset``, bounded (``LimitExceeded``, ``FormatError`` for a non-file)."""
    try:
        return read_from(path, offset, limit=INBOX_MAX_BYTES)
    except NotFound:
        return b""


class _InboxScan(Record):
    """One inbox parsed through byte ``offset`` (complete lines only) of the file ``inode``."""

    __match_args__ = (
        "inode", "offset", "lines", "turns", "numbers", "acks", "stopped", "unreadable", "count"
    )  # fmt: skip
    __slots__ = (
        "acks", "count", "inode", "lines", "numbers", "offset", "stopped", "turns", "unreadable"
    )  # fmt: skip
    inode: int | None
    offset: int
    lines: int
    turns: dict[str, TurnLine]
    numbers: dict[int, int]  # a turn's offset -> its line number
    acks: dict[str, TurnLine]
    stopped: TurnLine | None
    unreadable: deque[Unreadable]
    count: int

    def __init__(self, inode: int | None = None) -> None:  # the rest: a scan of no bytes yet
        self.inode = inode
        self.offset = 0
        self.lines = 0
        self.turns = {}
        self.numbers = {}
        self.acks = {}
        self.stopped = None
        self.unreadable = deque(maxlen=UNREADABLE_KEPT)
        self.count = 0


class Scanner:
    """``scan`` kept across calls, for a loop that scans on every wake (``serve``, a held wait).

    Each call parses only the complete lines appended since the last one: lines are appended,
    never edited, so what was parsed stays true. An inbox that shrank or was replaced (another
    inode) is parsed again from byte 0. The result is the ``Conversation`` a fresh ``scan`` gives.
    """

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self._inboxes: dict[str, _InboxScan] = {}

    def through(self, reader: str) -> int:
        """How many bytes of ``reader``'s inbox are parsed (the end of its last complete line)."""
        part = self._inboxes.get(reader)
        return part.offset if part is not None else 0

    def __call__(self) -> Conversation:
        conv = Conversation()
        for reader in (self.relay.worker, self.relay.manager):
            part = self._update(reader)
            # The two inboxes take disjoint kinds of turn (R, Q vs C, A): no id is in both.
            conv.turns.update(part.turns)
            for rid, ack in part.acks.items():
                conv.acks.setdefault(rid, ack)
            if conv.stopped is None:
                conv.stopped = part.stopped
            conv.unreadable += part.unreadable
            conv.unreadable_counts[self.relay.inbox(reader).name] = part.count
        return conv

    def _update(self, reader: str) -> _InboxScan:
        path = self.relay.inbox(reader)
        while True:
            inode = _inode(path)
            part = self._inboxes.get(reader)
            if part is None or part.inode != inode or _size(path) < part.offset:
                part = self._inboxes[reader] = _InboxScan(inode)
            data = _read_more(path, part.offset)
            if _inode(path) == inode:  # else replaced while read: parse the new one from 0
                break
            self._inboxes.pop(reader, None)
        end = data.rfind(b"\n") + 1  # a last piece with no newline is still being written
        if end:
            self._parse(reader, part, data[:end])
            part.offset += end
            part.lines += data.count(b"\n", 0, end)
        return part

    def _parse(self, reader: str, part: _InboxScan, data: bytes) -> None:
        relay = self.relay
        writer = relay.other(reader)
        name = relay.inbox(reader).name
        found = read_inbox(data, file=name, base=part.offset, first_line=part.lines + 1)
        bad = list(found.unreadable)
        part.count += found.unreadable_count
        allowed = _ALLOWED[relay.role(reader)]
        for line in found.lines:
            why = None
            key = line.prefix if line.kind == "turn" else line.kind
            number = found.line_number(line.offset)
            if line.author != writer:
                why = f"signed ({line.author}), but only {writer} writes {name}"
            elif key not in allowed:
                why = f"{key} lines do not belong in {name}"
            elif line.kind == "turn" and (first := part.turns.get(line.id)) is not None:
                # C2, C02 and C002 are one id: a second line with it is a turn nobody answers.
                why = (
                    f"{line.label or line.id} repeats turn {line.id} of line "
                    f"{part.numbers[first.offset]}; an id is used once"
                )
            if why is not None:
                part.count += 1
                bad.append(
                    Unreadable(
                        name,
                        number,
                        line.offset,
                        why,
                        f"({line.author}) {line.kind} {line.label or line.id}",
                    )
                )
            elif line.kind == "turn":
                part.turns[line.id] = line
                part.numbers[line.offset] = number
            elif line.kind == "ack":
                part.acks.setdefault(line.id, line)
            elif line.kind == "stop" and part.stopped is None:
                part.stopped = line
        part.unreadable.extend(sorted(bad, key=lambda u: u.offset))


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _read_more(path: Path, offset: int) -> bytes:
    """The inbox from ``offset``; ``LimitExceeded`` as ``_read`` gives it when the whole file is
    over ``INBOX_MAX_BYTES``, whatever part of it was read before."""
    try:
        return _read(path, offset) if offset == 0 else _read_bounded(path, offset)
    except LimitExceeded:
        if offset:
            _read(path)  # the refusal a fresh scan gives (names the file from byte 0)
        raise


def _read_bounded(path: Path, offset: int) -> bytes:
    try:
        return read_from(path, offset, limit=max(INBOX_MAX_BYTES - offset, 0))
    except NotFound:
        return b""


def scan(relay: Relay) -> Conversation:
    """Parse both inboxes into a ``Conversation`` (only lines by the side allowed to write)."""
    return Scanner(relay)()


def _refuse_if_stopped(conv: Conversation) -> None:
    if conv.stopped is not None:
        s = conv.stopped
        raise RelayStopped(
            f"the relay was stopped by {s.author} at {s.hhmm}; no further turns are sent "
            f"({STOP_NOTE})"
        )


def _check_say(relay: Relay, author: str, say: str) -> None:
    """The caps, as asserts in the write path: refused whole, never trimmed."""
    check_utf8("say", say)
    check_chars("say", say.strip(), 1, SAY_MAX_CHARS)
    check_one_line("say", say)
    check_controls("say", say, "\t")
    if relay.role(author) == "manager":
        check_words("say", say, MANAGER_SAY_MAX_WORDS)


# What each inbox accepts, by kind of line (anything else is a side channel: refused).
_ALLOWED = {
    "worker": {"R", "Q", "stop"},  # to-<worker>.md, written by the manager
    "manager": {"C", "A", "ack", "stop"},  # to-<manager>.md, written by the worker
}


def _check_turn(conv: Conversation, line: TurnLine) -> None:
    """The conversation rules for ``line`` about to be written; ``RelayStopped``/``Conflict``.

    Nothing after a stop; a C/Q turn only when no turn is open, numbered next; an R/A reply only
    to a turn that was asked and not yet answered; an ack only of a reply, once.
    """
    _refuse_if_stopped(conv)
    if line.kind == "turn" and line.prefix in "CQ":
        t = conv.open_turn
        if t is not None and t.author != line.author:
            raise Conflict(
                f"{t.author}'s turn {t.id} is open (one turn at a time): answer it "
                f"first (`mailslot relay reply --id {t.id} TEXT`)"
            )
        if t is not None:
            raise Conflict(
                f"turn {t.id} is still open (one turn at a time): wait for "
                f"{_reply_id(t.id)}, or `mailslot relay recover` if your wait timed out"
            )
        want = turn_id(line.prefix, conv.next_number(line.prefix))
        if line.id != want:
            raise Conflict(f"the next {line.prefix} turn is {want}, not {line.id}")
    elif line.kind == "turn":
        ask_id = _ask_id(line.id)
        if ask_id not in conv.turns:
            raise Conflict(f"no turn {ask_id} was asked; nothing to reply to")
        if line.id in conv.turns:
            raise Conflict(f"{ask_id} was already answered ({line.id}); one request, one reply")
    elif line.kind == "ack":
        if line.id not in conv.turns:
            raise Conflict(f"no reply {line.id} was written; nothing to acknowledge")
        if line.id in conv.acks:
            raise Conflict(f"{line.id} was already acknowledged")


def post(relay: Relay, author: str, line: str) -> TurnLine:
    """Append one hand-made line to the other side's inbox after every check ask/reply/stop make.

    Under relay.lock, against both inboxes: raises ``FormatError`` for anything that is not a
    well-formed turn line of a kind allowed in that inbox (a diagnostic, a second metadata line),
    ``LimitExceeded`` for the caps, ``Conflict`` when ``author`` is not the line's author or not
    part of this relay, or the line breaks a rule (``_check_turn``), ``RelayStopped`` after a
    stop. A STOP when the relay is already stopped writes nothing and returns the first stop.
    """
    try:
        parsed = parse_line(line)
    except FormatError as e:  # most often a diagnostic typed as a line: say where it goes
        raise FormatError(
            f"{e.message}; not a turn line, so it cannot go in an inbox. Diagnostics go to "
            f"{relay.notes(author).relative_to(relay.root)} (`mailslot relay note TEXT`)",
            field="line",
        ) from None
    with file_lock(relay.lock):
        conv = scan(relay)
        if parsed.kind == "stop" and conv.stopped is not None:
            return conv.stopped
        return _append(relay, author, line, conv)


def _append(
    relay: Relay, author: str, line: str, conv: Conversation | None, *, durable: bool = True
) -> TurnLine:
    """Check ``line`` (format, inbox, caps; the rules against ``conv`` when given) and append
    it; the only inbox writer. Callers hold relay.lock when they pass ``conv``. A ``durable``
    line is fsync'd before this returns; a delivery record need not be (see ``_await``)."""
    check_controls("line", line, "\t\n\r")  # a line break: parse_line's refusal says more
    parsed = parse_line(line)
    if parsed.author != author:
        raise Conflict(f"the line says ({parsed.author}) but it is written by {author}")
    reader = relay.other(author)
    key = parsed.prefix if parsed.kind == "turn" else parsed.kind
    if key not in _ALLOWED[relay.role(reader)]:
        raise FormatError(
            f"{key} lines do not belong in {relay.inbox(reader).name}; diagnostics go to "
            f"{relay.notes(author).relative_to(relay.root)} (`mailslot relay note`)",
            field="line",
        )
    if parsed.say is not None:
        _check_say(relay, author, parsed.say)
    if conv is not None and parsed.kind != "stop":
        _check_turn(conv, parsed)
    inbox = relay.inbox(reader)
    with contextlib.suppress(FileNotFoundError):
        if (size := inbox.stat().st_size) + len(line.encode()) + 1 > INBOX_MAX_BYTES:
            raise LimitExceeded(f"{inbox.name} after this line", INBOX_MAX_BYTES, size, "bytes")
    locked_append(inbox, line + "\n")
    if durable:
        sync_appended(inbox, "line")  # visible at once, durable before returning
    return parsed


def _store(state: Path | None) -> CursorStore:
    return CursorStore("relay", state)


def _key(relay: Relay, name: str) -> str:
    return f"{relay.root}\0{name}"


def _count(mark: dict[str, Any], field: str) -> int:
    """A byte offset or count kept in a mark; 0 when the mark holds no such number."""
    value = mark.get(field, 0)
    return value if type(value) is int and value >= 0 else 0


def _note_line(relay: Relay, name: str, line: str) -> None:
    """Append ``line`` to ``name``'s notes under relay.lock; ``LimitExceeded`` (nothing written)
    when the file would grow past ``NOTES_MAX_BYTES``."""
    notes = relay.notes(name)
    notes.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(relay.lock):
        with contextlib.suppress(FileNotFoundError):
            if (after := notes.stat().st_size + len(line.encode()) + 1) > NOTES_MAX_BYTES:
                where = notes.relative_to(relay.root)
                raise LimitExceeded(f"{where} after this line", NOTES_MAX_BYTES, after, "bytes")
        locked_append(notes, line + "\n")


Report = Callable[[Unreadable], None]


class _Reporter:
    """Hands each unreadable line of the reader's own inbox to ``report`` once per reader: the
    offset reported through is kept in the reader's state dir (per inode), so a later ``serve``
    or ``ask`` does not repeat it and a poll loop never does."""

    def __init__(self, relay: Relay, name: str, report: Report | None, state: Path | None):
        self.report = report
        self.inbox = relay.inbox(name)
        self.store = _store(state)
        self.key = _key(relay, name) + "\0unreadable"

    def __call__(self, conv: Conversation) -> None:
        if self.report is None:
            return
        mine = [u for u in conv.unreadable if u.file == self.inbox.name]
        if not mine:
            return
        try:
            inode = os.stat(self.inbox).st_ino
        except FileNotFoundError:
            return
        try:
            mark = self.store.load(self.key) or {}
        except FormatError:
            mark = {}  # a damaged mark only repeats a report
        same = mark.get("inode") == inode
        through = _count(mark, "through") if same else 0
        fresh = sorted((u for u in mine if u.offset >= through), key=lambda u: u.offset)
        if not fresh:
            return
        # Only the latest unreadable lines are kept in detail; say how many more are new.
        total = conv.unreadable_counts.get(self.inbox.name, len(mine))
        unlisted = total - (_count(mark, "count") if same else 0) - len(fresh)
        if unlisted > 0:
            first = fresh[0]
            self.report(
                Unreadable(
                    first.file,
                    first.line,
                    first.offset,
                    f"{unlisted} more unreadable lines before this one are not listed "
                    "(`mailslot relay status` counts them)",
                    "",
                )
            )
        for u in fresh:
            self.report(u)
        self.store.save(  # loss only repeats a report
            self.key,
            {"inode": inode, "through": fresh[-1].offset + 1, "count": total},
            durable=False,
        )


def _await(
    relay: Relay,
    name: str,
    pending: dict[str, Any],
    watch: Watch,
    timeout: float | None,
    *,
    recovered: bool,
    state: Path | None,
    on_unreadable: Report | None = None,
    show: Callable[[Delivery], None] | None = None,
) -> Delivery:
    """Scan every line since the saved cursor for the matching reply; ``show`` it, then record
    the delivery (the ack with T2, the cursor), so a reply is never recorded as delivered
    before it was written out (``core.handover``)."""
    ask_id = str(pending["pending"])
    want = _reply_id(ask_id)
    other = relay.other(name)
    inbox = relay.inbox(name)
    offset = int(pending.get("offset", 0))
    deadline = None if timeout is None else time.monotonic() + timeout
    report = _Reporter(relay, name, on_unreadable, state)
    scanner = Scanner(relay)
    while True:
        conv = scanner()
        report(conv)
        lines, _ = parse_inbox(_read(inbox, offset), offset)
        found = next(
            (t for t in lines if t.kind == "turn" and t.author == other and t.id == want), None
        )
        if found is not None:
            break
        _still_there(relay)
        if conv.stopped is not None:
            s = conv.stopped
            raise Gone(
                f"the relay was stopped by {s.author} at {s.hhmm} while {ask_id} waited "
                f"({STOP_NOTE})",
                path=relay.root,
            )
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise WaitTimeout(
                f"no {want} within {timeout:g}s; {ask_id} stays open and its cursor is saved: "
                "`mailslot relay recover` reads from it and marks the turn RECOVERED",
                payload={"id": ask_id, "reply_id": want, "say": None},
            )
        watch.wait(left)
    t2 = epoch_ms()
    t0 = pending.get("T0")
    t1 = found.stamp
    stamps: dict[str, int | str] = {k: v for k, v in (("T0", t0), ("T1", t1)) if v is not None}
    stamps["T2"] = t2
    flags = ("RECOVERED",) if recovered else ()
    delivery = Delivery(ask_id, want, found.say or "", t0, t1, t2, recovered)

    def record() -> None:
        ack = format_line(_hhmm(), name, f"ack={want}", stamps, flags=flags)
        # Neither the record nor the cursor is fsync'd: the reply is out already, and the
        # caller waits for the exit. A crash may lose them; `recover` then re-delivers (the
        # safe direction), or the turn just lacks its T2 in `relay stats`.
        if relay.role(name) == "worker":
            _append(relay, name, ack, None, durable=False)  # the record goes to the manager
        else:
            _note_line(relay, name, ack)  # never a metadata line in the worker's inbox
        _store(state).save(
            _key(relay, name), {"offset": found.offset, "pending": None}, durable=False
        )

    # Shown, then recorded: output that fails leaves the turn pending for `recover`.
    show_then_record((lambda: show(delivery)) if show is not None else None, record)
    return delivery


def _refuse_if_unshown(relay: Relay, name: str, conv: Conversation, state: Path | None) -> None:
    """``Conflict`` when the caller's last held turn was answered but the reply never shown to
    it (the wait timed out, the output failed): a new ask would move the cursor past it. A turn
    asked with ``wait=False`` promised no delivery and blocks nothing."""
    try:
        saved = _store(state).load(_key(relay, name)) or {}
    except FormatError:
        return  # a damaged cursor holds no turn to protect; the new ask writes it afresh
    owed = saved.get("pending")
    if saved.get("held") is True and isinstance(owed, str) and _reply_id(owed) in conv.turns:
        raise Conflict(
            f"the reply {_reply_id(owed)} to your {owed} was never shown to you: "
            "`mailslot relay recover` prints it first"
        )


def ask(
    root: Path | str,
    name: str,
    text: str,
    *,
    timeout: float | None = DEFAULT_WAIT_SECONDS,
    kind: str | None = None,
    to: str | None = None,
    wait: bool = True,
    on_sent: Callable[[str], None] | None = None,
    state: Path | None = None,
    on_unreadable: Report | None = None,
    show: Callable[[Delivery], None] | None = None,
) -> Delivery | TurnLine:
    """Open the next turn (worker: ``C<N>``, manager: ``Q<N>``) and wait for its reply.

    Arms the watch and saves the cursor BEFORE appending, then selects the reply by id from
    everything since the cursor. ``on_sent(id)`` runs after the line is on disk and before the
    wait (tests land a reply in that gap). With ``wait=False`` returns the written line.
    ``on_unreadable`` hears of each line in the caller's inbox that is not a turn (once).
    ``show`` writes the reply out before its delivery is recorded: if it raises, the turn
    stays pending and ``recover`` delivers it.
    Raises ``RelayStopped``/``Conflict`` (stopped; a turn still open; wrong kind or recipient),
    ``LimitExceeded``, ``WaitTimeout`` (exit 3; recover later), ``Gone`` (stopped, or the mailbox
    removed, while waiting).
    """
    relay = open_relay(root)
    role = relay.role(name)
    prefix = "C" if role == "worker" else "Q"
    if kind is not None and kind.upper() != prefix:
        raise Conflict(f"the {role} asks {prefix} turns, not {kind.upper()}")
    if to is not None and to != relay.other(name):
        raise Conflict(f"{name} can only ask {relay.other(name)}, not {to}")
    text = text.strip()
    _check_say(relay, name, text)
    inbox = relay.inbox(name)
    with (
        _gone_if_removed(relay),
        Watch([inbox, relay.inbox(relay.other(name))]) as watch,  # armed before the send
    ):
        with file_lock(relay.lock):
            conv = scan(relay)
            _refuse_if_stopped(conv)
            if conv.open_turn is not None:
                t = conv.open_turn
                if t.author != name:
                    raise Conflict(
                        f"{t.author}'s turn {t.id} is open (one turn at a time): answer it "
                        f"first (`mailslot relay reply --id {t.id} TEXT`)"
                    )
                raise Conflict(
                    f"turn {t.id} is still open (one turn at a time): wait for "
                    f"{_reply_id(t.id)}, or `mailslot relay recover` if your wait timed out"
                )
            _refuse_if_unshown(relay, name, conv, state)
            ask_id = turn_id(prefix, conv.next_number(prefix))
            cursor = ByteCursor.at_end(inbox)
            t0 = epoch_ms()
            pending = {
                "offset": cursor.offset,
                "inode": cursor.inode,
                "pending": ask_id,
                "T0": t0,
                "held": wait,  # a held wait owes its caller the reply: see _refuse_if_unshown
            }
            _store(state).save(_key(relay, name), pending)  # the cursor is saved before sending
            try:
                line = _append(
                    relay,
                    name,
                    format_line(_hhmm(), name, f"id={ask_id}", {"T0": t0}, say=text),
                    conv,
                )
            except BaseException:
                _store(state).save(_key(relay, name), {**pending, "pending": None})
                raise
        if on_sent is not None:
            on_sent(ask_id)
        if not wait:
            return line
        return _await(
            relay,
            name,
            pending,
            watch,
            timeout,
            recovered=False,
            state=state,
            on_unreadable=on_unreadable,
            show=show,
        )


def recover(
    root: Path | str,
    name: str,
    *,
    timeout: float | None = 0,
    state: Path | None = None,
    on_unreadable: Report | None = None,
    show: Callable[[Delivery], None] | None = None,
) -> Delivery:
    """Finish a turn whose held wait timed out: read from the saved cursor, mark it RECOVERED.
    ``show`` writes the reply out before its delivery is recorded (as in ``ask``).

    Raises ``NotFound`` when no turn of the caller is pending, ``WaitTimeout`` when its reply is
    still not there after ``timeout`` seconds, ``Gone`` when the relay was stopped.
    ``on_unreadable`` hears of each line in the caller's inbox that is not a turn (once).
    """
    relay = open_relay(root)
    relay.role(name)
    pending = _store(state).load(_key(relay, name))
    if not pending or not pending.get("pending"):
        raise NotFound(f"{name} has no pending turn to recover", path=relay.root)
    ByteCursor.from_value(pending, _store(state).path_for(_key(relay, name)))  # FormatError
    with Watch([relay.inbox(name), relay.inbox(relay.other(name))]) as watch:
        return _await(
            relay,
            name,
            pending,
            watch,
            timeout,
            recovered=True,
            state=state,
            on_unreadable=on_unreadable,
            show=show,
        )


def reply(root: Path | str, name: str, ask_id: str, text: str) -> TurnLine:
    """Answer the open turn ``ask_id`` with exactly one line (C03 -> R03, Q03 -> A03).

    Raises ``Conflict`` for an id that was never asked by the other side or was already answered
    (one request, one reply), ``RelayStopped``, ``LimitExceeded`` (one line; 25 words for the
    manager).
    """
    relay = open_relay(root)
    role = relay.role(name)
    ask_id = ask_id.strip().upper()
    expected = "C" if role == "manager" else "Q"
    if not ask_id[:1] == expected or not TURN_ID_RE.fullmatch(ask_id):
        raise Conflict(f"the {role} replies to {expected} turns (e.g. {expected}01), not {ask_id}")
    ask_id = canonical_id(ask_id)
    text = text.strip()
    _check_say(relay, name, text)
    want = _reply_id(ask_id)
    with file_lock(relay.lock):
        conv = scan(relay)
        _refuse_if_stopped(conv)
        asked = conv.turns.get(ask_id)
        if asked is None:
            raise Conflict(f"no turn {ask_id} was asked; nothing to reply to")
        if want in conv.turns:
            raise Conflict(f"{ask_id} was already answered ({want}); one request, one reply")
        # The reply mirrors the ask's own spelling (C2 -> R2): a hand-run asker waits for it.
        label = _reply_id(asked.label or asked.id)
        line = format_line(_hhmm(), name, f"id={label}", {"T1": epoch_ms()}, say=text)
        return _append(relay, name, line, conv)


def serve(
    root: Path | str,
    name: str,
    *,
    timeout: float | None = DEFAULT_WAIT_SECONDS,
    state: Path | None = None,
    on_unreadable: Report | None = None,
) -> TurnLine:
    """Block until a turn the caller owes a reply to is open (manager: C, worker: Q); return it.

    The first time a turn is served, a ``seen=<id> at=<ms>`` line goes to the caller's notes
    (for ``stats``). ``on_unreadable`` hears of each line in the caller's inbox that is not a
    turn (once). Raises ``WaitTimeout`` (exit 3), ``Gone`` (exit 4) when stopped or the
    mailbox is removed.
    """
    relay = open_relay(root)
    owed = "C" if relay.role(name) == "manager" else "Q"
    store = _store(state)
    key = _key(relay, name) + "\0served"
    deadline = None if timeout is None else time.monotonic() + timeout
    report = _Reporter(relay, name, on_unreadable, state)
    scanner = Scanner(relay)  # each wake parses only the lines appended since the last
    with Watch([relay.inbox(name), relay.inbox(relay.other(name))]) as watch:
        while True:
            conv = scanner()
            report(conv)
            if conv.stopped is not None:
                s = conv.stopped
                raise Gone(f"the relay was stopped by {s.author} at {s.hhmm}", path=relay.root)
            t = conv.open_turn
            if t is not None and t.prefix == owed:
                served = store.load(key) or {}
                if served.get("last") != t.id:
                    seen = {"at": epoch_ms()}
                    _note_line(relay, name, format_line(_hhmm(), name, f"seen={t.id}", seen))
                    store.save(key, {"last": t.id}, durable=False)  # loss: one repeated note
                return t
            _still_there(relay)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout(
                    f"no open {owed} turn within {timeout:g}s", payload={"id": None, "say": None}
                )
            watch.wait(left)


def note(root: Path | str, name: str, text: str) -> Path:
    """Append a diagnostic to ``state/<name>-notes.md`` (never an inbox); ``LimitExceeded``."""
    relay = open_relay(root)
    relay.role(name)
    text = text.strip("\n")
    check_utf8("note", text)
    check_controls("note", text, "\t\n\r")  # a note may span lines: written indented
    check_chars("note", text.strip(), 1, NOTE_MAX_BYTES)
    first, *more = text.splitlines()
    body = "".join(f"\n  {line}" for line in more)
    _note_line(relay, name, f"- [{_hhmm()}] ({name}) note: {first}{body}")
    return relay.notes(name)


def stop(root: Path | str, name: str, reason: str | None = None) -> TurnLine:
    """Stop the relay from either side: one STOP line to the other side, honoured at once.

    Later turns are refused; held waits end (exit 4). Appends cannot be recalled: lines already
    written stay. Stopping twice returns the first stop. ``LimitExceeded`` for a bad reason.
    """
    relay = open_relay(root)
    relay.role(name)
    say = (reason or "stop").strip()
    with file_lock(relay.lock):
        conv = scan(relay)
        if conv.stopped is not None:
            return conv.stopped
        line = format_line(_hhmm(), name, "STOP", {"at": epoch_ms()}, say=say)
        return _append(relay, name, line, conv)


def status(root: Path | str) -> dict[str, Any]:
    """The relay's config, open turn and stop, and any ``.torn`` file beside an inbox or notes
    file (fragments of appends killed mid-write); ``NotFound`` if not a relay."""
    relay = open_relay(root)
    files = [f(name) for name in (relay.worker, relay.manager) for f in (relay.inbox, relay.notes)]
    torn = [t.to_json() for t in map(torn_of, files) if t is not None]
    return {
        "root": str(relay.root),
        "worker": relay.worker,
        "manager": relay.manager,
        **scan(relay).to_json(),
        "torn": torn,
    }

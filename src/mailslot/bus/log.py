"""``LOG.md``: one line per agent per waking, appended, never edited.

Line format, written by mailslot and by hand alike::

    2026-11-29T18:14:03Z — [Beacon] w07: delivered the OG card to outbox/, needs Lantern

Invariants:

* One record is one physical line. A text that would span lines (any separator ``splitlines``
  knows, or a control character) is refused whole; nothing is joined, trimmed or written.
* Appends are serialised by ``.mailslot/locks/log.lock`` (the waking number is computed and the
  line written under it) and land through ``locked_append`` with fsync, so concurrent agents never
  tear or interleave lines. A hand-edited log missing its final newline gets one first.
* The waking number ``wNN`` is counted by mailslot per agent and never reused: the next number is
  one past the highest ever seen for that agent, in ``LOG.md`` (hand-written lines count) or in
  ``.mailslot/wakings/<agent>.json``.

What a waking is: one run of the agent, from cron start to exit. mailslot knows a run by its
waking id when the agent's wrapper exports ``MAILSLOT_WAKING`` (any string unique per run, such
as ``$(date +%s)``); without one, lines by the same agent less than ``WAKING_GAP`` apart belong to
the same run (a waking lasts minutes; wakings are hours apart). A second line in the same waking
is refused with an error that says what to do: fold it into one line, pass ``same_waking`` to add
another ``wNN`` line to the current waking on purpose, or ``new_waking`` if this really is a new
run. Refusing is the visible direction: a silently inflated waking count is never noticed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mailslot.bus.layout import Layout
from mailslot.core.clock import now, parse_time
from mailslot.core.errors import (
    AlreadyWritten,
    Conflict,
    FormatError,
    InvalidValue,
    NotFound,
)
from mailslot.core.fsio import (
    Torn,
    atomic_write,
    file_lock,
    locked_append,
    read_from,
    stage_write,
    torn_of,
)
from mailslot.core.limits import check_chars, check_controls, check_one_line
from mailslot.core.names import validate_agent

__all__ = ["LOG_TEXT_MAX", "WAKING_GAP", "Entry", "Tail", "append", "parse_line", "read", "tail"]

# Lines by one agent closer than this are one waking: a run lasts minutes, cron wakes hours apart.
WAKING_GAP = timedelta(minutes=10)
# "The whole schema is one sentence, appended": a line longer than this is a document.
LOG_TEXT_MAX = 1000
# How many lines `log tail` shows by default: a screenful, what an agent reads at waking.
TAIL_DEFAULT = 20

# Bytes before a cached scan offset compared to notice a log rewritten in place.
_TAIL_BYTES = 64

# DATE — [Name] wNN: TEXT ; by hand people type an en dash, "-" or "--", and skip wNN.
_LINE_RE = re.compile(
    r"^(?P<date>\S(?:.*?\S)?)\s+(?:\u2014|\u2013|--?)\s+\[(?P<name>[^\]]+)\]"
    r"(?:\s+[wW](?P<waking>[0-9]{1,6}))?\s*:\s?(?P<text>.*)$"
)


@dataclass(frozen=True)
class Entry:
    """One line of the log; fields are ``None`` where a hand-written line does not say."""

    lineno: int
    raw: str
    date: str | None
    at: str | None  # ISO-8601 UTC when the date carries a time with a zone
    agent: str | None  # lowercased name from ``[Name]``
    waking: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class Tail:
    """What ``tail`` returns: the entries shown and how they were chosen."""

    entries: list[Entry]
    total: int
    since_mine: bool
    mine_found: bool
    torn: Torn | None = None  # ``LOG.md.torn``: fragments of appends killed mid-write

    def to_json(self) -> dict[str, Any]:
        """The tail as a JSON-ready dict (``torn``: ``{"path", "size"}`` or ``None``)."""
        return {
            "entries": [e.to_json() for e in self.entries],
            "total": self.total,
            "since_mine": self.since_mine,
            "mine_found": self.mine_found,
            "torn": self.torn.to_json() if self.torn is not None else None,
        }


def _parse_at(date: str) -> datetime | None:
    try:
        return parse_time(date, field="date")
    except FormatError:
        return None  # a date alone or a zone-less time: shown, never guessed at


def parse_line(lineno: int, raw: str) -> Entry | None:
    """Parse one log line; ``None`` for blank lines, headings and HTML comments (never raises)."""
    stripped = raw.strip()
    if not stripped or stripped.startswith(("#", "<!--")):
        return None
    m = _LINE_RE.match(raw.lstrip())  # the text keeps its trailing spaces: never trimmed
    if not m:
        return Entry(lineno, raw, None, None, None, None, stripped)
    when = _parse_at(m["date"])
    waking = int(m["waking"]) if m["waking"] else None
    name = m["name"].strip().lower()
    return Entry(
        lineno,
        raw,
        m["date"],
        when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else None,
        name,
        waking,
        m["text"],
    )


def read(root: Path) -> list[Entry]:
    """Every entry of ``ROOT/LOG.md`` in file order; ``NotFound`` if the bus has no log."""
    layout = Layout.at(root)
    try:
        data = read_from(layout.log)
    except NotFound:
        raise NotFound("no LOG.md (run `mailslot bus init`)", path=layout.log) from None
    return _parse_all(data)


def _parse_all(data: bytes) -> list[Entry]:
    entries = []
    for i, raw in enumerate(data.decode("utf-8", errors="replace").split("\n"), start=1):
        entry = parse_line(i, raw.rstrip("\r"))
        if entry is not None:
            entries.append(entry)
    return entries


def tail(root: Path, n: int | None = TAIL_DEFAULT, *, since_mine: str | None = None) -> Tail:
    """The last ``n`` entries (all if ``None``), or those after ``since_mine``'s last line.

    An agent that never wrote has seen nothing, so ``since_mine`` then returns everything (still
    capped by ``n``). Raises ``NotFound`` without a log, ``InvalidName`` for a bad agent name.
    """
    if n is not None and n < 0:
        raise InvalidValue(f"-n must be 0 or more, got {n}")
    if since_mine is not None:
        validate_agent(since_mine)
    entries = read(root)
    chosen = entries
    found = False
    if since_mine is not None:
        mine = [i for i, e in enumerate(entries) if e.agent == since_mine]
        found = bool(mine)
        if mine:
            chosen = entries[mine[-1] + 1 :]
    if n is not None:
        chosen = chosen[-n:] if n else []
    torn = torn_of(Layout.at(root).log)
    return Tail(chosen, len(entries), since_mine is not None, found, torn)


def _check_text(text: str) -> None:
    check_one_line("log text", text)
    if not text.strip():
        raise InvalidValue("log text is empty")
    check_chars("log text", text, 1, LOG_TEXT_MAX)
    check_controls("log text", text, "\t")


_REBUILT = "delete it and mailslot rebuilds it from LOG.md"


def _load_waking(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except ValueError as e:
        raise FormatError(f"corrupt waking counter ({e}); {_REBUILT}", path=path) from None
    if not isinstance(value, dict) or not isinstance(value.get("waking", 0), int):
        raise FormatError(f"corrupt waking counter; {_REBUILT}", path=path)
    return value


def _display(agent: str) -> str:
    return agent[:1].upper() + agent[1:]


@dataclass(frozen=True)
class _Scan:
    """What one agent's lines in LOG.md say, up to ``offset`` bytes of file ``inode``."""

    inode: int
    offset: int
    lines: int  # newline count up to offset
    highest: int  # highest wNN of the agent's lines
    last_at: str | None  # the agent's last line: its time and waking
    last_waking: int | None
    tail: str  # hex of the bytes just before offset: notices an in-place rewrite

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _cached_scan(cached: object) -> _Scan | None:
    """The cached scan if it has the right shape (a hand-mangled cache is just rescanned)."""
    if not isinstance(cached, dict):
        return None
    try:
        scan = _Scan(**cached)
    except TypeError:
        return None
    numbers = (scan.inode, scan.offset, scan.lines, scan.highest)
    if not all(type(x) is int and x >= 0 for x in numbers) or not isinstance(scan.tail, str):
        return None
    if scan.last_at is not None and not isinstance(scan.last_at, str):
        return None
    if scan.last_waking is not None and type(scan.last_waking) is not int:
        return None
    return scan


def _scan(path: Path, agent: str, cached: dict[str, Any] | None) -> _Scan:
    """Scan LOG.md for ``agent``'s lines, reading only what was appended since ``cached``.

    The cache is trusted only for the same file (inode), not shorter than its offset, with the
    same bytes just before the offset; anything else rescans the whole log.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return _Scan(0, 0, 0, 0, None, None, "")
    base = _Scan(st.st_ino, 0, 0, 0, None, None, "")
    data = b""
    prev = _cached_scan(cached)
    if prev is not None and prev.inode == st.st_ino and 0 < prev.offset <= st.st_size:
        back = min(prev.offset, _TAIL_BYTES)
        chunk = read_from(path, prev.offset - back)
        if chunk[:back].hex() == prev.tail:
            base, data = prev, chunk[back:]
    if base.offset == 0:
        data = read_from(path, 0)
    highest, last_at, last_waking = base.highest, base.last_at, base.last_waking
    for e in _parse_all(data):
        if e.agent == agent:
            highest = max(highest, e.waking or 0)
            last_at, last_waking = e.at, e.waking
    end = base.offset + len(data)
    whole = read_from(path, max(0, end - _TAIL_BYTES))[: min(end, _TAIL_BYTES)] if data else b""
    tail = whole.hex() if data else base.tail
    return _Scan(
        st.st_ino, end, base.lines + data.count(b"\n"), highest, last_at, last_waking, tail
    )


def append(
    root: Path,
    agent: str,
    text: str,
    *,
    waking_id: str | None = None,
    same_waking: bool = False,
    new_waking: bool = False,
) -> Entry:
    """Append ``DATE — [Agent] wNN: TEXT`` to LOG.md and return the entry written.

    Raises ``LimitExceeded`` for a multi-line or over-long text and ``InvalidValue`` for an
    empty one or a control character (nothing written), ``Conflict`` for a second line in the
    same waking without ``same_waking``/``new_waking``, ``NotFound`` outside a bus.
    """
    validate_agent(agent)
    _check_text(text)
    if same_waking and new_waking:
        raise InvalidValue("--same-waking and --new-waking contradict each other")
    if waking_id is not None and (not waking_id.strip() or len(waking_id) > 200):
        raise InvalidValue("the waking id (MAILSLOT_WAKING) must be 1-200 characters")
    layout = Layout.at(root)
    with file_lock(layout.lock("log")):
        counter_path = layout.waking_file(agent)
        state = _load_waking(counter_path)
        scan = _scan(layout.log, agent, state.get("scan"))
        highest = max(scan.highest, int(state.get("waking", 0)))
        when = now()
        current = _current_waking(scan, state, waking_id, highest, when)
        if current is not None and not (same_waking or new_waking):
            raise Conflict(
                f"{agent} already logged w{highest:02d} in this waking ({current}): the log "
                "takes one line per waking. Fold this into one line, or pass --same-waking to "
                "add another line to this waking, or --new-waking if this is a new run "
                "(export MAILSLOT_WAKING per run to make wakings exact)",
                path=layout.log,
            )
        number = max(highest, 1) if same_waking else highest + 1
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        line = f"{stamp} \u2014 [{_display(agent)}] w{number:02d}: {text}"
        prefix = "\n" if scan.tail and not scan.tail.endswith("0a") else ""
        record = f"{prefix}{line}\n".encode()
        # The counter is staged before the line is appended and put in place after it, so a full
        # disk fails before anything is written (nothing to retry twice), never in between.
        lines = scan.lines + record.count(b"\n")
        after = _Scan(
            scan.inode or _inode(layout.log),
            scan.offset + len(record),
            lines,
            max(highest, number),
            stamp,
            number,
            (bytes.fromhex(scan.tail) + record)[-_TAIL_BYTES:].hex(),
        )
        staged = stage_write(counter_path, _counter(number, waking_id, stamp, after))
        try:
            start = locked_append(layout.log, record, fsync=True)
        except BaseException:
            staged.discard()
            raise
        if start == scan.offset:
            _save_counter(staged.commit, lines, line, counter_path)
        else:  # someone appended without the lock meanwhile: count again, rescan next time
            staged.discard()
            lines = read_from(layout.log)[:start].count(b"\n") + record.count(b"\n")
            fresh = _counter(number, waking_id, stamp, _Scan(0, 0, 0, 0, None, None, ""))
            _save_counter(lambda: atomic_write(counter_path, fresh), lines, line, counter_path)
    entry = parse_line(lines, line)
    assert entry is not None
    return entry


def _save_counter(save: Callable[[], object], lines: int, line: str, path: Path) -> None:
    """Save the waking counter once the line is in LOG.md; a failure says the line is there."""
    try:
        save()
    except OSError as e:
        raise AlreadyWritten(
            f"the line WAS written (LOG.md line {lines}: {line}); only the waking counter "
            f"could not be saved ({e.strerror}): do not append it again",
            path=path,
        ) from None


def _inode(path: Path) -> int:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:  # created by the append itself: the next scan reads it whole
        return 0


def _counter(number: int, waking_id: str | None, stamp: str, scan: _Scan) -> str:
    state = {"waking": number, "id": waking_id, "at": stamp, "scan": scan.to_json()}
    return json.dumps(state, sort_keys=True) + "\n"


def _current_waking(
    scan: _Scan, state: dict[str, Any], waking_id: str | None, highest: int, when: datetime
) -> str | None:
    """Why the agent is still in the waking it last logged (a phrase), or ``None`` if it is not."""
    if highest == 0:
        return None
    if waking_id is not None:
        if state.get("id") == waking_id and int(state.get("waking", 0)) == highest:
            return f"same MAILSLOT_WAKING {waking_id!r}"
        return None
    if scan.last_at is None or scan.last_waking != highest:
        return None
    age = when - parse_time(scan.last_at)
    if timedelta(0) <= age < WAKING_GAP:
        minutes = int(age.total_seconds() // 60)
        return f"its last line is {minutes} min old, under {WAKING_GAP.seconds // 60} min"
    return None

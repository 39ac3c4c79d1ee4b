"""What sits in one side's inbox, by name only, and a cheap reading of the few fields that matter.

Wake-up and health commands (watch, monitor, sweep) run often -- every scheduler tick, on every
wake -- over exchanges that may hold thousands of topics, so they look at *names* first (which
entries exist, whether a HELD.md is there) and read a file only when its fields decide something.

``peek_entry`` / ``peek_state`` read just the frontmatter keys they need with a line scanner and
fall back to the full strict parsers (``entries.parse_entry_text``, ``state.parse_state``) the
moment a file is anything but plain ``key: value`` lines, so a hand-written file reads exactly as
the rest of mailslot reads it. Readers ignore dot-names (in-flight temps), like every reader.

An entry in ``to-<side>/done/<topic>/`` is still addressed to that side: archiving moves files,
it does not deliver them (a reply filed by the archive before it was read is still owed a read).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from mailslot.core.clock import parse_time
from mailslot.core.errors import FormatError
from mailslot.core.fsio import written_ns
from mailslot.core.record import FrozenRecord
from mailslot.exchange.entries import ACTIONS, ENTRY_RE, Entry, parse_entry, parse_entry_text
from mailslot.exchange.layout import DONE, Exchange
from mailslot.exchange.listing import TopicDir, list_dir, topic_names
from mailslot.exchange.safeio import read_regular
from mailslot.exchange.state import STATUSES, parse_state

__all__ = [
    "EntryPeek",
    "InboxItem",
    "StatePeek",
    "inbox_items",
    "peek_entry",
    "peek_state",
    "plain_head",
    "read_entry",
]

# Frontmatter worth scanning by hand is a few short lines; anything longer takes the full parser.
PEEK_BYTES = 4096
# What parse_time accepts, checked cheaply; the full parse happens when the time is used.
_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_CLOCK = r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})"
_TIME_SHAPE = re.compile(rf"{_DATE}[T ]{_CLOCK}$")
# YAML refuses an implicit key over 1024 characters; a key that long takes the full parser.
_KEY_TEXT = r"[A-Za-z_][A-Za-z0-9_-]{0,127}"
_KEY = re.compile(_KEY_TEXT)
# Words YAML 1.1 reads as a boolean or null, not a string (as a key, the strict loader refuses
# them; as a value, they are not the text they look like).
_NOT_STRINGS = frozenset({"yes", "no", "true", "false", "on", "off", "null", "y", "n", "~"})
_NUMBER_START = frozenset("0123456789+-.")
# A plain scalar cannot start with these (an empty value is not a string either).
_INDICATORS = frozenset("-?:,[]{}#&*!|>%@`") | {""}
_DQUOTED = re.compile(r'"[^"\\]*"')
_SQUOTED = re.compile(r"'[^']*'")
_FLOW_WORDS = re.compile(r"\[ *(?:[A-Za-z0-9_.-]+(?: *, *[A-Za-z0-9_.-]+)*)? *\]")
# The common header in one match: every line ``key: word`` or ``key: <time>`` (and ``tags: []``
# in a STATE.md), none of them a YAML boolean or null; anything else takes the line loop.
_WORD = r"[A-Za-z_][A-Za-z0-9_.@/-]*"
_TIME_VALUE = rf"{_DATE}T{_CLOCK}"
_BOOL_OR_NULL = "(?i:" + "|".join(sorted(w for w in _NOT_STRINGS if w.isalpha())) + ")"
_PLAIN_KEY = rf"(?!{_BOOL_OR_NULL}:){_KEY_TEXT}: (?!{_BOOL_OR_NULL}\n)"
_PLAIN_HEADER = re.compile(rf"(?:{_PLAIN_KEY}(?:{_TIME_VALUE}|{_WORD})\n)*")
_PLAIN_STATE = re.compile(rf"(?:{_PLAIN_KEY}(?:{_TIME_VALUE}|\[\]|{_WORD})\n)*")
_PAIR = re.compile(r"([^:\n]+): ([^\n]*)\n")
# The common entry's head in one match: a fence, plain ``key: value`` lines (``_PLAIN_HEADER``'s),
# a fence; what ``_simple_fields`` then finds, and the body after it, is the match's own
_PLAIN_ENTRY = re.compile(rf"---\n((?:{_PLAIN_KEY}(?:{_TIME_VALUE}|{_WORD})\n)+)---\n")
# The head ``exchange send`` writes (``entries.render_entry``), in one match without a lookahead:
# a sender that is a word (``_WORD``'s) and is tested apart for a YAML boolean or null, a time
# of ``_TIME_VALUE``'s shape, an action; ``plain_head`` reads anything else by ``_PLAIN_ENTRY``
_OWN_HEAD = re.compile(
    rf"---\nfrom: ([a-z][a-z0-9_-]{{0,39}})\nat: ({_TIME_VALUE})\naction: (required|fyi)\n---\n"
)
# Outside YAML's printable set, or a line break to YAML (NEL, LS, PS, a lone CR), or a BOM.
_UNSAFE = re.compile(
    "[^\t\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


class InboxItem(FrozenRecord):
    """An entry file addressed to a side, keyed by ``(topic, number, from)``."""

    __match_args__ = ("topic", "number", "sender", "path", "archived")
    __slots__ = ("archived", "number", "path", "sender", "topic")
    topic: str
    number: int
    sender: str
    path: Path
    archived: bool

    def __init__(self, topic: str, number: int, sender: str, path: Path, archived: bool) -> None:
        init = object.__setattr__
        init(self, "topic", topic)
        init(self, "number", number)
        init(self, "sender", sender)
        init(self, "path", path)
        init(self, "archived", archived)

    @property
    def key(self) -> str:
        """The stable identity: ``<topic>/<NNNN>-<from>`` (unchanged by archive or bridge)."""
        return f"{self.topic}/{self.number:04d}-{self.sender}"


def inbox_items(
    ex: Exchange,
    side: str,
    skip: set[str] | frozenset[str] = frozenset(),
    *,
    list_live: Callable[[str, str, bool], TopicDir] = list_dir,
    live_names: list[str] | None = None,
    done_names: list[str] | None = None,
) -> tuple[list[InboxItem], list[TopicDir]]:
    """Entries in ``to-<side>/`` (live, then archived) whose key is not in ``skip``, and the
    live topic directories. A topic both live and in ``done/`` (damage) yields both copies' entries,
    each key once. ``list_live`` lists a live topic (a watcher passes one that reuses the
    listing of a directory that had no event since), and ``live_names`` and ``done_names`` the
    live and archived topics' names when it knows them (the inbox and ``done/`` had no event
    since it listed them).
    """
    inbox = str(ex.inbox(side))
    names = topic_names(inbox) if live_names is None else live_names
    live = [list_live(f"{inbox}/{t}", t, False) for t in names]
    archived = topic_names(f"{inbox}/{DONE}") if done_names is None else done_names
    done = [list_dir(f"{inbox}/{DONE}/{t}", t, True) for t in archived]
    out = []
    taken: set[str] = set()  # beside ``skip``, not a copy of it: a seen-set holds thousands
    for d in (*live, *done):
        prefix = d.topic + "/"
        # the name is NNNN-<from>.md: the key's own spelling; most are seen, so those are
        # dropped in one comprehension before anything is built for the rest
        fresh = [e for e in d.entries if prefix + e[2][:-3] not in skip]
        for number, sender, name in fresh:
            key = prefix + name[:-3]
            if key not in taken:
                taken.add(key)
                out.append(InboxItem(d.topic, number, sender, Path(d.file(name)), d.archived))
    return out, live


def _head(path: Path | str, *, written: bool = False) -> tuple[bytes, bool, int]:
    """The first ``PEEK_BYTES`` of a regular file, whether that is all of it, and its ctime (ns;
    with ``written``, ``fsio.written_ns``); ``OSError`` for anything else (a FIFO, a device, a
    symlink): never blocks."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        raw = os.read(fd, PEEK_BYTES + 1)
    finally:
        os.close(fd)
    return raw[:PEEK_BYTES], len(raw) <= PEEK_BYTES, written_ns(st) if written else st.st_ctime_ns


def _simple_fields(raw: bytes, fenced: bool) -> dict[str, str] | None:
    """``key: value`` lines of a small, plain header; ``None`` if anything needs a real parser."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text[:1] == "\ufeff":
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if fenced:
        first = text.find("\n")
        if first < 0 or text[:first].rstrip() != "---":
            return None
        end = text.find("\n---", first - 1)
        if end < 0:
            return None  # a header that never closes is the parser's to judge
        after = text.find("\n", end + 1)
        if text[end + 1 : after if after >= 0 else len(text)].rstrip() != "---":
            return None
        block = text[first + 1 : end]
    else:
        block = text
    whole = block if block[-1:] == "\n" else block + "\n"
    if (_PLAIN_STATE if not fenced else _PLAIN_HEADER).fullmatch(whole):
        pairs: list[tuple[str, str]] = _PAIR.findall(whole)
        found = dict(pairs)
        if len(found) == len(pairs):  # a key given twice is the parser's to refuse
            return found  # what the loop below would return, found in one pass
    if _UNSAFE.search(block):
        return None  # a character YAML refuses or reads as a line break, even in a comment
    out: dict[str, str] = {}
    for line in block.split("\n"):
        key, sep, value = line.partition(":")
        if sep and value[:1] == " " and "\t" not in value and _KEY.fullmatch(key):
            value = value.strip(" ")
            if key in out or key.lower() in _NOT_STRINGS or not _plain_value(value, not fenced):
                return None
            if value[:1] in "\"'":
                value = value[1:-1]
            out[key] = value
        elif not line.strip() or line.lstrip()[:1] == "#":
            continue
        else:  # indented or list lines continue something: the parser's to judge
            return None
    return out


def _plain_value(value: str, lists: bool) -> bool:
    """Whether YAML reads ``value`` (after ``key: ``) as exactly this text, quotes aside: a
    quoted string without escapes, a plain scalar that is no boolean, null or number, starts
    with no indicator and has no comment or mapping inside, or a flat flow list of plain words
    (``tags: [a, b]`` in a STATE.md, when ``lists``: nobody reads its items from here)."""
    first = value[:1]
    if first == '"':
        return _DQUOTED.fullmatch(value) is not None
    if first == "'":
        return _SQUOTED.fullmatch(value) is not None
    if first == "[":
        return lists and _FLOW_WORDS.fullmatch(value) is not None
    if first in _NUMBER_START and not _TIME_SHAPE.match(value):
        return False  # YAML may read it as a number (times stay strings in the strict loader)
    return (
        first not in _INDICATORS
        and value.lower() not in _NOT_STRINGS
        and " #" not in value
        and ": " not in value
        and value[-1:] != ":"
    )


def _time(value: str | None) -> datetime | None:
    try:
        return parse_time(value)
    except FormatError:
        return None


class EntryPeek:
    """An entry's ``at`` and ``action`` (``None`` when missing or unreadable), any error, and
    when the file arrived (its ctime in ns, which its writer cannot set; ``None`` if unknown).

    ``at`` is parsed on first use: a monitor asks for it only where the caller has a STATE.md.
    """

    __slots__ = ("_at", "action", "arrived_ns", "error")

    def __init__(
        self,
        at: datetime | str | None,
        action: str | None,
        error: str | None = None,
        arrived_ns: int | None = None,
    ) -> None:
        self._at = at
        self.action = action
        self.error = error
        self.arrived_ns = arrived_ns

    @property
    def at(self) -> datetime | None:
        """The entry's time, or ``None`` if missing or unparseable."""
        if isinstance(self._at, str):
            self._at = _time(self._at)
        return self._at


def read_entry(path: Path, side: str, topic: str, *, arrived_ns: int | None = None) -> Entry:
    """The whole entry, as ``entries.parse_entry`` reads it, by the line scanner when it can.

    Same result as ``parse_entry`` (tested); the full parser runs whenever the header is anything
    but plain ``key: value`` lines with a valid ``at`` and ``action``. ``arrived_ns``: the file's
    ctime from an ``lstat`` the caller just made (else one is made here).
    """
    m = ENTRY_RE.match(path.name)
    try:
        arrived = os.lstat(path).st_ctime_ns if arrived_ns is None else arrived_ns
        raw = read_regular(path)
    except OSError:
        return parse_entry(path, side, topic)
    if m is not None:
        entry = _plain_entry(raw, m, path, side, topic, arrived)
        if entry is not None:
            return entry
    fields = _simple_fields(raw, fenced=True) if m else None
    if m is None or fields is None or fields.get("action") not in ACTIONS:
        return parse_entry(path, side, topic)
    at = _time(fields.get("at"))
    if at is None:
        return parse_entry(path, side, topic)
    text = raw.decode("utf-8")
    if text[:1] == "\ufeff":
        text = text[1:]
    text = text.replace("\r\n", "\n")
    close = text.find("\n---", text.find("\n") - 1)
    nl = text.find("\n", close + 1)
    body = text[nl + 1 :] if nl >= 0 else ""
    return Entry(
        int(m.group(1)),
        m.group(2),
        side,
        topic,
        path,
        at,
        fields["action"],
        body,
        dict(fields),
        arrived_ns=arrived,
    )


def _plain_entry(
    raw: bytes, name: re.Match[str], path: Path, side: str, topic: str, arrived: int
) -> Entry | None:
    """``read_entry``'s result for the common entry (``plain_head``'s), read in one match;
    ``None`` for anything else, which the general path reads."""
    head = plain_head(raw)
    if head is None:
        return None
    fields, at, action, body = head
    number, sender = name.group(1, 2)
    return Entry(
        int(number), sender, side, topic, path, at, action, body, fields, arrived_ns=arrived
    )


def plain_head(raw: bytes) -> tuple[dict[str, str], datetime, str, str] | None:
    """``(fields, at, action, body)`` of the common entry (UTF-8 without a BOM or a CR, a head
    of plain ``key: value`` lines, each key once, a valid ``action`` and ``at``), as
    ``read_entry`` reads it; ``None`` for anything else, which the full parser reads."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text:
        return None
    own = _OWN_HEAD.match(text)
    if own is not None and own.group(1) not in _NOT_STRINGS:
        sender, at_text, action = own.group(1, 2, 3)
        try:
            at = datetime.fromisoformat(at_text).astimezone(UTC)
        except ValueError:  # a month 13, a 25th hour
            return None
        return {"from": sender, "at": at_text, "action": action}, at, action, text[own.end() :]
    return _plain_head(text)


def _plain_head(text: str) -> tuple[dict[str, str], datetime, str, str] | None:
    """``plain_head`` of ``text`` (decoded, no CR) by ``_PLAIN_ENTRY``, any plain head."""
    head = _PLAIN_ENTRY.match(text)
    if head is None:
        return None
    pairs: list[tuple[str, str]] = _PAIR.findall(head.group(1))
    fields = dict(pairs)
    action = fields.get("action", "")
    if len(fields) != len(pairs) or action not in ACTIONS:
        return None
    at_text = fields.get("at")
    if at_text is None or not at_text[:1].isdigit():
        return None  # missing, or a word (``_WORD`` starts with a letter): not a time
    try:  # ``_TIME_VALUE``'s shape, as the match found it: ``parse_time``'s own last steps
        at = datetime.fromisoformat(at_text).astimezone(UTC)
    except ValueError:  # a month 13, a 25th hour
        return None
    return fields, at, action, text[head.end() :]


def peek_entry(path: Path | str) -> EntryPeek:
    """``at`` and ``action`` of an entry file; never raises (problems land in ``error``)."""
    try:
        raw, whole, ctime = _head(path)
        # a cut head ends at its last whole line: a '---' cut out of '---x: y' is no fence
        fields = _simple_fields(raw if whole else raw[: raw.rfind(b"\n") + 1], fenced=True)
        if (
            fields is not None
            and {"from", "at", "action"} <= fields.keys()
            and fields["action"] in ACTIONS
            and _TIME_SHAPE.match(fields["at"])
        ):
            return EntryPeek(fields["at"], fields["action"], None, ctime)
        if not whole:
            raw = read_regular(path)
    except OSError as e:
        return EntryPeek(None, None, e.strerror or str(e))
    meta, _, error = parse_entry_text(raw, Path(path))
    raw_action, raw_at = meta.get("action"), meta.get("at")
    return EntryPeek(
        _time(raw_at) if isinstance(raw_at, str) else None,
        raw_action if isinstance(raw_action, str) and raw_action in ACTIONS else None,
        error,
        ctime,
    )


class StatePeek(FrozenRecord):
    """A STATE.md's status (``open`` when missing, ``unknown`` when unreadable) and time."""

    __match_args__ = ("status", "updated_at", "present", "error", "ctime_ns")
    __slots__ = ("ctime_ns", "error", "present", "status", "updated_at")
    status: str
    updated_at: datetime | None
    present: bool
    error: str | None
    ctime_ns: int | None  # when the file was last written (fsio.written_ns: not a chmod)

    def __init__(
        self,
        status: str,
        updated_at: datetime | None,
        present: bool,
        error: str | None = None,
        ctime_ns: int | None = None,
    ) -> None:
        init = object.__setattr__
        init(self, "status", status)
        init(self, "updated_at", updated_at)
        init(self, "present", present)
        init(self, "error", error)
        init(self, "ctime_ns", ctime_ns)


def peek_state(path: Path | str) -> StatePeek:
    """Status and ``updated_at`` of one STATE.md; missing is ``open``; never raises."""
    try:
        raw, whole, ctime = _head(path, written=True)  # a chmod is not a write
        if not whole:
            raw = read_regular(path)
    except FileNotFoundError:
        return StatePeek("open", None, False)
    except OSError as e:
        return StatePeek("unknown", None, True, f"unreadable: {e.strerror}")
    if not raw.lstrip(b"\xef\xbb\xbf").startswith(b"---"):
        fields = _simple_fields(raw, fenced=False)
        if fields is not None and fields.get("status") in STATUSES:
            at = _time(fields.get("updated_at"))
            if at is not None:
                return StatePeek(fields["status"], at, True, None, ctime)
    st = parse_state(raw, "", Path(path))
    return StatePeek(st.status, st.updated_at, True, st.error, ctime)

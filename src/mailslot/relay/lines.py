"""The one-line turn format, parsed strictly and built only through ``format_line``.

Every message is one physical line::

    - [14:02] (w1) id=C03 T0=1722868950123 say=<what the human said>
    - [14:02] (manager) id=R03 T1=1722868961456 say=<reply, at most 25 words>
    - [14:02] (w1) ack=R03 T0=... T1=... T2=1722868961460            (delivery record)
    - [14:02] (manager) STOP at=1722868999000 say=<closing words>

Grammar: ``- [<bracket>] (<name>) `` then space-separated tokens, then optionally ``say=`` and
the rest of the line. A token is ``KEY=VALUE`` for a known key, a flag (``RECOVERED``, ``STOP``),
or the bare id label hand-written worker lines put before ``id=`` (``C03 id=C03``).

Lines agents write by hand from the templates they are given parse as those templates produce
them, because a turn skipped for its punctuation is a turn lost:

* the bracket is free text (``[HH:MM]`` left as written, ``[9:05]``, ``[14:02:33]``): the epoch
  stamps carry the time, the bracket is only for people;
* ``... T0=... — Human says: <text>`` (an em dash, an en dash or an ASCII ``-``/``--``) is
  ``say=<text>``;
* an id's number may lose its zero (``C2`` is ``C02``): ids are kept in one canonical form
  (``turn_id``), so ``C2`` and ``C02`` are one turn and a reply ``R2`` answers an ask ``C02``;
* an interview turn (Q or A) may carry ``T0`` or ``T1`` (a worker answering with its C pattern
  stamps ``T0``);
* a worker's delivery record is any worker line with ``T2=<ms>`` and one id, naming the reply or
  its ask (``ack=R03``, ``id=R03``, ``R03`` or ``C03``), with free words around it and an
  optional ``RECOVERED`` in any case: ``- [HH:MM] (w1) C03 delivered R03 T2=<ms>``.

The id is a positional field, never found by substring, so ``say=... id=R09 ...`` cannot be
mistaken for reply R09.

A line that does not parse is not a turn: readers never select it, whatever its position, and
report it (``read_inbox`` says which line and why) so it is never lost silently; writers refuse
it (``FormatError``), so diagnostics cannot enter an inbox.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from typing import Any

from mailslot.core.errors import FormatError
from mailslot.core.limits import check_utf8
from mailslot.core.record import FrozenRecord, Record

__all__ = [
    "ACK_ID_RE",
    "TURN_ID_RE",
    "InboxRead",
    "TurnLine",
    "Unreadable",
    "canonical_id",
    "check_utf8",
    "format_line",
    "parse_inbox",
    "parse_line",
    "read_inbox",
    "turn_id",
]

# Up to 9 digits: a turn number is a count of spoken turns, never a big integer to parse.
TURN_ID_RE = re.compile(r"[CRQA][0-9]{1,9}")
ACK_ID_RE = re.compile(r"[RA][0-9]{1,9}")
# The bracket is for people (the stamps carry the time); bounded so it stays a label.
BRACKET_MAX = 32
_PREFIX_RE = re.compile(
    rf"- \[(?P<hhmm>[^\]\n]{{0,{BRACKET_MAX}}})\] \((?P<author>[a-z0-9][a-z0-9_-]{{0,39}})\) "
)
_KEYS = {"id", "ack", "seen", "T0", "T1", "T2", "at"}
_FLAGS = {"RECOVERED", "STOP"}
# The worker template's "— Human says: <text>", with the dash an agent may type instead.
_SEED_SAY_RE = re.compile("(?:(?:\u2014|\u2013|--?) )?[Hh]uman says: ?")
# Which timestamp each kind of turn carries: the asker stamps T0, the replier T1; an interview
# turn may carry either (the worker answers a Q with the pattern it uses for C turns).
_STAMPS = {"C": ("T0",), "R": ("T1",), "Q": ("T0", "T1"), "A": ("T1", "T0")}
# A delivery record names the reply or the turn it answered: C03 and R03 are the same turn.
_DELIVERED = {"C": "R", "R": "R", "Q": "A", "A": "A"}
# An epoch-ms stamp: ASCII digits only (str.isdigit() also takes '²', which int() refuses) and
# short enough to be a time (13 digits today), never a big integer to parse.
_MS_RE = re.compile(r"[0-9]{1,16}")
# A turn line is a prefix, a few stamps and a say= of at most 1000 characters: a longer line is
# not one, and is refused before it is parsed (parsing cost grows with the line).
LINE_MAX_BYTES = 8192
# What an unreadable line shows of itself in a report.
EXCERPT_CHARS = 80
# How many unreadable lines a read keeps in detail (the latest; all are counted): a file of
# junk lines must not cost memory per line, and a reader needs the newest ones to act on.
UNREADABLE_KEPT = 100


def _is_ms(value: str) -> bool:
    """Whether ``value`` is an epoch-millisecond stamp (1-16 ASCII digits)."""
    return _MS_RE.fullmatch(value) is not None


def turn_id(prefix: str, number: int) -> str:
    """``C`` + 3 -> ``C03`` (two digits at least, as hand-written turns have them)."""
    return f"{prefix}{number:02d}"


def canonical_id(token: str) -> str:
    """``C2``, ``C02`` and ``C002`` -> ``C02``: one turn, one id (``token`` matches
    ``TURN_ID_RE``)."""
    return turn_id(token[0], int(token[1:]))


def _label(word: str) -> str | None:
    """The canonical id a free word names (``R03``, ``(C3)``, ``R03:``), else ``None``."""
    bare = word.strip("()[]{}:;,.!")
    return canonical_id(bare) if TURN_ID_RE.fullmatch(bare) else None


class TurnLine(FrozenRecord):
    """One parsed line. ``kind`` is ``turn`` (C/R/Q/A), ``ack``, ``seen`` or ``stop``.

    A ``core.record`` record, not a dataclass: every relay command loads this module."""

    __match_args__ = ("hhmm", "author", "kind", "id", "fields", "flags", "say", "offset", "label")
    __slots__ = ("author", "fields", "flags", "hhmm", "id", "kind", "label", "offset", "say")
    hhmm: str
    author: str
    kind: str
    id: str
    fields: dict[str, str]
    flags: frozenset[str]
    say: str | None
    offset: int
    label: str  # the id as written (``C2``); ``id`` is canonical (``C02``)

    def __init__(
        self,
        hhmm: str,
        author: str,
        kind: str,
        id: str,
        fields: dict[str, str] | None = None,  # None: a fresh empty dict
        flags: frozenset[str] = frozenset(),
        say: str | None = None,
        offset: int = 0,
        label: str = "",
    ) -> None:
        init = object.__setattr__
        init(self, "hhmm", hhmm)
        init(self, "author", author)
        init(self, "kind", kind)
        init(self, "id", id)
        init(self, "fields", {} if fields is None else fields)
        init(self, "flags", flags)
        init(self, "say", say)
        init(self, "offset", offset)
        init(self, "label", label)

    @property
    def prefix(self) -> str:
        """The id's letter (C, R, Q, A)."""
        return self.id[0]

    @property
    def number(self) -> int:
        """The id's number."""
        return int(self.id[1:])

    def ms(self, key: str) -> int | None:
        """A ``T0``/``T1``/``T2``/``at`` field as epoch milliseconds, ``None`` if absent/bad."""
        value = self.fields.get(key)
        return int(value) if value is not None and _is_ms(value) else None

    @property
    def stamp(self) -> int | None:
        """When a turn was written: its ``T0`` (asks) or ``T1`` (replies), either for Q/A."""
        for key in _STAMPS.get(self.prefix, ()):
            if (value := self.ms(key)) is not None:
                return value
        return None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the line."""
        return {
            "kind": self.kind,
            "id": self.id,
            "from": self.author,
            "hhmm": self.hhmm,
            "say": self.say,
            "flags": sorted(self.flags),
            **{k: (int(v) if _is_ms(v) else v) for k, v in self.fields.items() if k != "id"},
        }


def parse_line(line: str, *, offset: int = 0) -> TurnLine:
    """Parse one line (without its newline); ``FormatError`` naming what is wrong."""
    if "\n" in line or "\r" in line:
        raise FormatError("a turn is exactly one physical line", field="line")
    if len(line) > LINE_MAX_BYTES:
        raise FormatError(f"a turn line is at most {LINE_MAX_BYTES} bytes", field="line")
    check_utf8("line", line)
    m = _PREFIX_RE.match(line)
    if not m:
        raise FormatError(
            "not a turn line: expected '- [HH:MM] (name) id=C01 T0=<ms> say=<text>'", field="line"
        )
    rest = line[m.end() :]
    fields: dict[str, str] = {}
    flags: set[str] = set()
    labels: list[str] = []
    words: list[str] = []
    say: str | None = None
    while rest:
        if rest.startswith("say="):
            say = rest[4:]
            break
        if seed_say := _SEED_SAY_RE.match(rest):
            say = rest[seed_say.end() :]
            break
        token, _, rest = rest.partition(" ")
        key, eq, value = token.partition("=")
        if eq and key in _KEYS and value:
            if key in fields:
                raise FormatError(f"{key}= given twice", field=key)
            fields[key] = value
        elif token in _FLAGS:
            flags.add(token)
        elif TURN_ID_RE.fullmatch(token):
            labels.append(canonical_id(token))
        elif token:
            words.append(token)
    delivery = "T2" in fields and not {"seen", "at"} & fields.keys() and "STOP" not in flags
    if delivery and not _is_turn(fields, say):  # a turn with a stray T2 stays a turn
        return _delivery(m, fields, flags, labels, words, say, offset)
    if words:
        raise FormatError(f"unexpected token {words[0]!r}", field="line")
    heads = [k for k in ("id", "ack", "seen") if k in fields] + (
        ["stop"] if "STOP" in flags else []
    )
    if len(heads) != 1:
        raise FormatError("a line carries exactly one of id=, ack=, seen= or STOP", field="line")
    kind = {"id": "turn", "ack": "ack", "seen": "seen", "stop": "stop"}[heads[0]]
    ident = label = fields.get(heads[0], "STOP")
    if kind in ("turn", "ack", "seen"):
        if not TURN_ID_RE.fullmatch(ident):
            raise FormatError(f"bad id {ident!r} (C01, R01, Q01, A01)", field=heads[0])
        ident = canonical_id(ident)
    if kind == "turn":
        if any(label != ident for label in labels):
            raise FormatError(f"label {labels[0]} does not match id={ident}", field="id")
        stamps = _STAMPS[ident[0]]
        if not any(_is_ms(fields.get(stamp, "")) for stamp in stamps):
            raise FormatError(
                f"{ident[0]} turns carry {' or '.join(stamps)}=<epoch ms>", field=stamps[0]
            )
        if say is None or not say.strip():
            raise FormatError("a turn needs say=<text>", field="say")
    elif labels:
        raise FormatError(f"unexpected token {labels[0]!r}", field="line")
    _check_stamps(fields)
    return TurnLine(
        m.group("hhmm"),
        m.group("author"),
        kind,
        ident,
        {k: v for k, v in fields.items() if k not in ("id", "ack", "seen")},
        frozenset(flags),
        say,
        offset,
        label,
    )


def _is_turn(fields: Mapping[str, str], say: str | None) -> bool:
    """Whether ``fields`` and ``say`` make a whole turn: ``id=``, its stamp and some text."""
    ident = fields.get("id", "")
    if not TURN_ID_RE.fullmatch(ident) or say is None or not say.strip():
        return False
    return any(_is_ms(fields.get(stamp, "")) for stamp in _STAMPS[ident[0]])


def _check_stamps(fields: Mapping[str, str]) -> None:
    for key in ("T0", "T1", "T2", "at"):
        if key in fields and not _is_ms(fields[key]):
            raise FormatError(f"{key} must be epoch milliseconds", field=key)


def _delivery(
    m: re.Match[str],
    fields: dict[str, str],
    flags: set[str],
    labels: list[str],
    words: list[str],
    say: str | None,
    offset: int,
) -> TurnLine:
    """A delivery record in the writer's own words: ``T2=`` plus exactly one turn it names."""
    named = set(labels)
    for key in ("id", "ack"):
        if key in fields:
            if not TURN_ID_RE.fullmatch(fields[key]):
                raise FormatError(f"bad id {fields[key]!r} (R01, C01)", field=key)
            named.add(canonical_id(fields[key]))
    named |= {label for word in words if (label := _label(word))}
    turns = {_DELIVERED[i[0]] + i[1:] for i in named}
    if len(turns) != 1:
        raise FormatError(
            "a delivery record (T2=) names exactly one turn (ack=R01, R01 or C01)"
            + (f"; this one names {', '.join(sorted(named))}" if named else ""),
            field="ack",
        )
    _check_stamps(fields)
    if any(word.strip("()[].,:;!").upper() == "RECOVERED" for word in words):
        flags = {*flags, "RECOVERED"}
    return TurnLine(
        m.group("hhmm"),
        m.group("author"),
        "ack",
        turns.pop(),
        {k: v for k, v in fields.items() if k not in ("id", "ack")},
        frozenset(flags),
        say,
        offset,
    )


def format_line(
    hhmm: str,
    author: str,
    head: str,
    fields: Mapping[str, int | str],
    *,
    flags: tuple[str, ...] = (),
    say: str | None = None,
) -> str:
    """Build one line (no newline) and parse it back; ``FormatError`` if it would not parse."""
    tokens = [head, *(f"{k}={v}" for k, v in fields.items()), *flags]
    line = f"- [{hhmm}] ({author}) " + " ".join(tokens)
    if say is not None:
        line += f" say={say}"
    parse_line(line)
    return line


class Unreadable(FrozenRecord):
    """A complete line in an inbox that is not a turn: which file, which line, and why."""

    __match_args__ = ("file", "line", "offset", "reason", "text")
    __slots__ = ("file", "line", "offset", "reason", "text")
    file: str
    line: int
    offset: int
    reason: str
    text: str

    def __init__(self, file: str, line: int, offset: int, reason: str, text: str) -> None:
        init = object.__setattr__
        init(self, "file", file)
        init(self, "line", line)
        init(self, "offset", offset)
        init(self, "reason", reason)
        init(self, "text", text)

    def describe(self) -> str:
        """``to-w1.md line 3: <why> (<start of the line>)`` for a one-line report."""
        shown = f" ({self.text!r})" if self.text else ""
        return f"{self.file} line {self.line}: {self.reason}{shown}"

    def to_json(self) -> dict[str, Any]:
        """``file, line, offset, reason, text``: the fields under their own names."""
        return self._asdict()


class InboxRead(Record):
    """What ``read_inbox`` found: the turn lines, the last ``UNREADABLE_KEPT`` other complete
    lines (``unreadable``) and how many there are in all (``unreadable_count``)."""

    __match_args__ = ("lines", "unreadable", "unreadable_count", "numbers")
    __slots__ = ("lines", "numbers", "unreadable", "unreadable_count")
    lines: list[TurnLine]
    unreadable: list[Unreadable]
    unreadable_count: int
    numbers: dict[int, int]

    def __init__(
        self,
        lines: list[TurnLine] | None = None,  # None: each a fresh empty list or dict
        unreadable: list[Unreadable] | None = None,
        unreadable_count: int = 0,
        numbers: dict[int, int] | None = None,
    ) -> None:
        self.lines = [] if lines is None else lines
        self.unreadable = [] if unreadable is None else unreadable
        self.unreadable_count = unreadable_count
        self.numbers = {} if numbers is None else numbers

    def line_number(self, offset: int) -> int:
        """The line number of the turn line starting at ``offset``."""
        return self.numbers[offset]


def _check_decodes(raw: bytes) -> None:
    """``FormatError`` naming the first byte of ``raw`` that is not UTF-8."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(
            f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at byte {e.start} of the line)",
            field="line",
        ) from None


def read_inbox(data: bytes, *, file: str = "", base: int = 0, first_line: int = 1) -> InboxRead:
    """Parse the complete lines of ``data`` (bytes of ``file`` from offset ``base``, whose first
    line is ``first_line``): turn lines, and an ``Unreadable`` for each other non-blank line, of
    which the last ``UNREADABLE_KEPT`` are kept (memory stays bounded whatever the file holds).

    The last piece, when it does not end in a newline, is a line still being written: it waits.
    """
    out = InboxRead()
    kept: deque[Unreadable] = deque(maxlen=UNREADABLE_KEPT)
    start, number = 0, first_line - 1
    while (end := data.find(b"\n", start)) != -1:
        raw, pos = data[start:end], base + start
        start, number = end + 1, number + 1
        text = raw[: LINE_MAX_BYTES + 1].decode("utf-8", errors="replace").rstrip("\r")
        if len(raw) <= LINE_MAX_BYTES and not text.strip():
            continue
        try:
            if len(raw) > LINE_MAX_BYTES:  # refused unparsed: parsing cost grows with the line
                raise FormatError(f"a turn line is at most {LINE_MAX_BYTES} bytes", field="line")
            _check_decodes(raw)  # a replacement character would pass a mangled turn as whole
            out.lines.append(parse_line(text, offset=pos))
            out.numbers[pos] = number
        except FormatError as e:
            shown = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."
            kept.append(Unreadable(file, number, pos, e.message, shown))
            out.unreadable_count += 1
    out.unreadable = list(kept)
    return out


def parse_inbox(data: bytes, base: int = 0) -> tuple[list[TurnLine], int]:
    """Well-formed lines of ``data`` (from offset ``base``) and the count of other lines.

    Only complete lines count; anything that is not a turn line (a stray diagnostic, a heading)
    is counted and skipped, never selected. ``read_inbox`` says which lines and why.
    """
    found = read_inbox(data, base=base)
    return found.lines, found.unreadable_count

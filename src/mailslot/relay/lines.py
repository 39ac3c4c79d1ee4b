"""The one-line turn format of seed 003, parsed strictly and built only through ``format_line``.

Every message is one physical line::

    - [14:02] (w1) id=C03 T0=1722868950123 say=<what the human said>
    - [14:02] (manager) id=R03 T1=1722868961456 say=<reply, at most 25 words>
    - [14:02] (w1) ack=R03 T0=... T1=... T2=1722868961460            (delivery record)
    - [14:02] (manager) STOP at=1722868999000 say=<closing words>

Grammar: ``- [HH:MM] (<name>) `` then space-separated tokens, then optionally ``say=`` and the
rest of the line. A token is ``KEY=VALUE`` for a known key, a flag (``RECOVERED``, ``STOP``), or
the bare id label seed-003 workers put before ``id=`` (``C03 id=C03``). Seed-003 worker lines
(``... T0=... — Human says: <text>``) parse too. The id is a positional field, never found by
substring, so ``say=... id=R09 ...`` cannot be mistaken for reply R09.

A line that does not parse is not a turn: readers skip it (it is never selected, whatever its
position) and writers refuse it (``FormatError``), so diagnostics cannot enter an inbox.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mailslot.core.errors import FormatError
from mailslot.core.limits import check_utf8

__all__ = [
    "ACK_ID_RE",
    "TURN_ID_RE",
    "TurnLine",
    "check_utf8",
    "format_line",
    "parse_inbox",
    "parse_line",
    "turn_id",
]

TURN_ID_RE = re.compile(r"[CRQA][0-9]{2,}")
ACK_ID_RE = re.compile(r"[RA][0-9]{2,}")
_PREFIX_RE = re.compile(
    r"- \[(?P<hhmm>[0-9]{2}:[0-9]{2})\] \((?P<author>[a-z0-9][a-z0-9_-]{0,39})\) "
)
_KEYS = {"id", "ack", "seen", "T0", "T1", "T2", "at"}
_FLAGS = {"RECOVERED", "STOP"}
_SEED_SAY = "— Human says: "
# Which timestamp each kind of turn carries (seed 003: the asker stamps T0, the replier T1).
_STAMP = {"C": "T0", "Q": "T0", "R": "T1", "A": "T1"}


def turn_id(prefix: str, number: int) -> str:
    """``C`` + 3 -> ``C03`` (two digits at least, as in the seed)."""
    return f"{prefix}{number:02d}"


@dataclass(frozen=True)
class TurnLine:
    """One parsed line. ``kind`` is ``turn`` (C/R/Q/A), ``ack``, ``seen`` or ``stop``."""

    hhmm: str
    author: str
    kind: str
    id: str
    fields: dict[str, str] = field(default_factory=dict)
    flags: frozenset[str] = frozenset()
    say: str | None = None
    offset: int = 0

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
        return int(value) if value is not None and value.isdigit() else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the line."""
        return {
            "kind": self.kind,
            "id": self.id,
            "from": self.author,
            "hhmm": self.hhmm,
            "say": self.say,
            "flags": sorted(self.flags),
            **{k: (int(v) if v.isdigit() else v) for k, v in self.fields.items() if k != "id"},
        }


def parse_line(line: str, *, offset: int = 0) -> TurnLine:
    """Parse one line (without its newline); ``FormatError`` naming what is wrong."""
    if "\n" in line or "\r" in line:
        raise FormatError("a turn is exactly one physical line", field="line")
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
    say: str | None = None
    while rest:
        if rest.startswith("say="):
            say = rest[4:]
            break
        if rest.startswith(_SEED_SAY):
            say = rest[len(_SEED_SAY) :]
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
            labels.append(token)
        else:
            raise FormatError(f"unexpected token {token!r}", field="line")
    heads = [k for k in ("id", "ack", "seen") if k in fields] + (
        ["stop"] if "STOP" in flags else []
    )
    if len(heads) != 1:
        raise FormatError("a line carries exactly one of id=, ack=, seen= or STOP", field="line")
    kind = {"id": "turn", "ack": "ack", "seen": "seen", "stop": "stop"}[heads[0]]
    ident = fields.get(heads[0], "STOP")
    if kind == "turn":
        if not TURN_ID_RE.fullmatch(ident):
            raise FormatError(f"bad turn id {ident!r} (C01, R01, Q01, A01)", field="id")
        if any(label != ident for label in labels):
            raise FormatError(f"label {labels[0]} does not match id={ident}", field="id")
        stamp = _STAMP[ident[0]]
        if not fields.get(stamp, "").isdigit():
            raise FormatError(f"{ident[0]} turns carry {stamp}=<epoch ms>", field=stamp)
        if say is None or not say.strip():
            raise FormatError("a turn needs say=<text>", field="say")
    elif labels:
        raise FormatError(f"unexpected token {labels[0]!r}", field="line")
    elif kind in ("ack", "seen") and not TURN_ID_RE.fullmatch(ident):
        raise FormatError(f"bad id {ident!r}", field=kind)
    for key in ("T0", "T1", "T2", "at"):
        if key in fields and not fields[key].isdigit():
            raise FormatError(f"{key} must be epoch milliseconds", field=key)
    return TurnLine(
        m.group("hhmm"),
        m.group("author"),
        kind,
        ident,
        {k: v for k, v in fields.items() if k not in ("id", "ack", "seen")},
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


def parse_inbox(data: bytes, base: int = 0) -> tuple[list[TurnLine], int]:
    """Well-formed lines of ``data`` (from offset ``base``) and the count of other lines.

    Only complete lines count; anything that is not a turn line (a stray diagnostic, a heading)
    is counted and skipped, never selected.
    """
    lines: list[TurnLine] = []
    bad = 0
    pos = base
    for raw in data.split(b"\n")[:-1]:  # the last piece is empty or a line still being written
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if text.strip():
            try:
                lines.append(parse_line(text, offset=pos))
            except FormatError:
                bad += 1
        pos += len(raw) + 1
    return lines, bad

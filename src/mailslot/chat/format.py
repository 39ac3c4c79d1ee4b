"""The chat file format: blocks appended to one text file, read back exactly.

One message on disk is::

    <blank line>
    ---MSG---
    FROM: kiran-48291
    TIME: 2026-11-29T18:14:00.123Z
    ---
    body lines...

Invariants:

* A header is the four lines ``---MSG---`` / ``FROM:`` / ``TIME:`` / ``---`` together; a lone
  ``---MSG---`` is body text. So the reader is never fooled by a partial header.
* A body written by mailslot cannot forge a header or a ``FROM:``/``TIME:`` line, even for a
  ``grep '^FROM:'`` reader: any body line that (after leading blanks) starts with ``---MSG---``,
  ``FROM:`` or ``TIME:`` is written with one extra leading backslash, and readers remove exactly one
  backslash from such lines. Escaping, not refusing, keeps "TIME: 10am works" sayable; the escape
  is lossless (``unescape(escape(b)) == b``).
* Files written by hand-run bash agents parse: ``date -Iseconds`` times with offsets
  (``+05:30``), CRLF, capitalised names. A ``TIME`` that does not parse keeps its raw text rather
  than hiding the message (messages are data; a bad stamp is not a reason to drop one).
* Only complete lines are consumed: a block still being written (no final newline) waits for the
  next read, so a reader never delivers half a message.
* Offsets are byte offsets, computed on the bytes: a hand-written block may hold bytes that are
  not UTF-8, so the file is decoded with ``surrogateescape`` (one code point per bad byte, and
  re-encoding gives back exactly those bytes) and only the parsed names and bodies show such a
  byte as U+FFFD. Counting a replaced byte as its 3-byte replacement would move a cursor past the
  start of the next block and lose it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from mailslot.core.clock import format_time, parse_time
from mailslot.core.errors import FormatError, LimitExceeded
from mailslot.core.limits import check_bytes, check_utf8
from mailslot.core.record import FrozenRecord

__all__ = [
    "APPROVED",
    "CHECK",
    "END_ACCEPT",
    "END_REJECT",
    "END_REQUEST",
    "GONE",
    "HANDSHAKE_KINDS",
    "LEAVE",
    "MARKERS",
    "MAX_BODY_BYTES",
    "ChatMessage",
    "check_utf8",
    "escape_body",
    "parse_messages",
    "parse_one",
    "render_message",
    "unescape_body",
]

# One message is a chat turn, not a payload (docs/design.md, principle 3): 64 KiB holds any turn an
# agent writes and keeps a full re-read of a long chat cheap.
MAX_BODY_BYTES = 64 * 1024

END_REQUEST = "---END-REQUEST---"
END_ACCEPT = "---END-ACCEPT---"
END_REJECT = "---END-REJECT---"
CHECK = "---HUMAN-CHECK---"
APPROVED = "---HUMAN-APPROVED---"
# A participant leaving (``---LEAVE--- reason``), and one marked gone by another or by the human
# (``---GONE--- name``): the end handshake stops waiting for them until they write again.
LEAVE = "---LEAVE---"
GONE = "---GONE---"
# Control markers: a body whose first line starts with one of these is protocol, not talk.
MARKERS = {
    END_REQUEST: "end-request",
    END_ACCEPT: "end-accept",
    END_REJECT: "end-reject",
    CHECK: "human-check",
    APPROVED: "human-approved",
    LEAVE: "leave",
    GONE: "gone",
}
# The kinds that can change whether the chat has ended (a leave can be the last awaited answer).
HANDSHAKE_KINDS = frozenset({"end-request", "end-accept", "end-reject", "leave", "gone"})

_HEADER_RE = re.compile(
    r"^---MSG---[ \t]*\r?\nFROM:[ \t]*(?P<from>[^\r\n]*?)[ \t]*\r?\n"
    r"TIME:[ \t]*(?P<time>[^\r\n]*?)[ \t]*\r?\n---[ \t]*\r?\n",
    re.MULTILINE,
)
_FORGEABLE_RE = re.compile(r"^(\\*)([ \t]*(?:---MSG---|FROM:|TIME:))", re.MULTILINE)
_ESCAPED_RE = re.compile(r"^\\(\\*[ \t]*(?:---MSG---|FROM:|TIME:))", re.MULTILINE)


class ChatMessage(FrozenRecord):
    """One parsed message: author, time (UTC, or ``None`` if its stamp did not parse), body.

    A ``core.record`` record, not a dataclass: every ``chat say`` loads this module."""

    __match_args__ = ("sender", "time_raw", "body", "offset", "end")
    __slots__ = ("body", "end", "offset", "sender", "time_raw")
    sender: str
    time_raw: str
    body: str
    offset: int  # byte offset of the block in the file (its leading blank line, if any)
    end: int  # byte offset just past the block

    def __init__(self, sender: str, time_raw: str, body: str, offset: int, end: int) -> None:
        init = object.__setattr__
        init(self, "sender", sender)
        init(self, "time_raw", time_raw)
        init(self, "body", body)
        init(self, "offset", offset)
        init(self, "end", end)

    @property
    def at(self) -> datetime | None:
        """``TIME`` as UTC, or ``None`` when it does not parse (parsed on use: most reads of a
        long chat only need senders and kinds)."""
        try:
            return parse_time(self.time_raw, field="TIME")
        except FormatError:
            return None

    @property
    def kind(self) -> str:
        """``message``, or the control marker's name (``end-request``, ``human-check``...)."""
        first = self.body.lstrip().split("\n", 1)[0]
        for marker, name in MARKERS.items():
            if first.startswith(marker):
                return name
        return "message"

    @property
    def marker_text(self) -> str:
        """The text after a control marker (a reason, a decision); the body if none."""
        text = self.body.lstrip()
        for marker in MARKERS:
            if text.startswith(marker):
                return text[len(marker) :].strip()
        return self.body

    def to_json(self) -> dict[str, Any]:
        """``{"from", "time", "body"}`` (the documented shape) plus ``kind`` and ``offset``."""
        return {
            "from": self.sender,
            "time": format_time(at) if (at := self.at) is not None else self.time_raw,
            "body": self.body,
            "kind": self.kind,
            "offset": self.offset,
        }


def escape_body(body: str) -> str:
    """``body`` with line ends normalised and header-like lines given one more backslash."""
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    return _FORGEABLE_RE.sub(lambda m: "\\" + m.group(1) + m.group(2), body)


def unescape_body(body: str) -> str:
    """Undo ``escape_body``: drop one backslash from escaped header-like lines."""
    return _ESCAPED_RE.sub(lambda m: m.group(1), body)


def render_message(sender: str, when: datetime, body: str) -> str:
    """The block for one message, ending in a newline; ``LimitExceeded``/``FormatError`` if bad."""
    check_utf8("message", body)
    body = body.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    if not body.strip():
        raise LimitExceeded("message", 1, 0, "characters", minimum=True)
    if "\x00" in body:
        raise FormatError("a message cannot contain a NUL byte", field="body")
    check_bytes("message", body, MAX_BODY_BYTES)
    return f"\n---MSG---\nFROM: {sender}\nTIME: {format_time(when)}\n---\n{escape_body(body)}\n"


# A header with no body line yet (or cut inside): the block is still being written.
_PARTIAL_HEADER_RE = re.compile(
    r"(?:^|\n)---MSG---[ \t]*\r?\n(?:FROM:[^\n]*\n(?:TIME:[^\n]*\n(?:---[ \t]*\r?\n)?)?)?$"
)


def _settled(data: bytes) -> bool:
    """Whether ``data`` ends at a message boundary: a final newline and no half-written header."""
    if not data.endswith(b"\n"):
        return False
    return _PARTIAL_HEADER_RE.search(data[-512:].decode("utf-8", errors="replace")) is None


def _shown(text: str) -> str:
    """``text`` with each undecodable byte (a ``surrogateescape`` code point) as U+FFFD."""
    if text.isascii():
        return text
    return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


_ONE_HEAD = b"\n---MSG---\nFROM:"
# A ``ChatMessage`` made by ``parse_one`` without its ``__init__``'s five ``object.__setattr__``
# look-ups: each field set through its slot's own setter (all five are set; equality with the
# general parser's messages, which the tests compare, reads every one).
_new_record = object.__new__
_set_sender = ChatMessage.__dict__["sender"].__set__
_set_time_raw = ChatMessage.__dict__["time_raw"].__set__
_set_body = ChatMessage.__dict__["body"].__set__
_set_offset = ChatMessage.__dict__["offset"].__set__
_set_end = ChatMessage.__dict__["end"].__set__
_FROM_AT = len(_ONE_HEAD)  # where the sender's line goes on, past ``FROM:``


def parse_messages(data: bytes, base: int = 0) -> tuple[list[ChatMessage], int]:
    """Messages in ``data`` (bytes of the file from offset ``base``) and the offset consumed to.

    ``data`` must start at a block boundary (offset 0 or a previous return value). Text before the
    first header (a hand-made preamble) is skipped. When ``data`` does not end at a boundary (no
    final newline, or a header cut short) the last block is held back -- neither returned nor
    consumed -- so the caller re-reads it whole once its writer has finished.

    What a waiter reads after a wake is nearly always one whole block as ``render_message``
    writes it: that is taken apart by ``parse_one`` with a few string searches where the general
    parser runs three patterns. Anything else -- a second ``---MSG---``, a backslash (an escaped
    line), a carriage return, bytes that are not UTF-8, a header line off the rendered form, a
    body of blank lines -- goes to the general parser, whose result ``parse_one``'s equals
    wherever it answers (a property test holds the two together).
    """
    one = parse_one(data, base)
    if one is not None:
        return [one], one.end
    return _parse(data, base)


def parse_one(data: bytes, base: int = 0) -> ChatMessage | None:
    """The message ``data`` is when it is exactly one whole block as ``render_message`` writes
    it, ``data`` starting at ``base``; ``None`` for anything else, which ``parse_messages``'s
    general parser reads (a property test holds the two together wherever this answers).

    One block as ``render_message`` writes it, whole: UTF-8, one ``---MSG---``, the header
    lines exactly (``FROM:`` and ``TIME:`` with their values stripped of blanks, as the general
    parser strips them, then ``---``), a body of at least one line that is not blank after any
    leading blank lines, then one newline; no carriage return or backslash anywhere (an escaped
    line, or CRLF, is the general parser's). Taken apart with a few string searches: no pattern
    to run, a cost that counts in a process just woken, its caches cold."""
    if not data.startswith(_ONE_HEAD) or data.count(b"---MSG---") != 1:
        return None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    if "\r" in text or "\\" in text or text[-1] != "\n":
        return None
    i = text.find("\nTIME:", _FROM_AT)
    j = text.find("\n", _FROM_AT)
    if i < 0 or i != j:
        return None  # the sender's line is not followed by the time's
    j = text.find("\n", i + 6)
    if j < 0 or not text.startswith("---\n", j + 1):
        return None
    body = text[j + 5 : -1].lstrip("\n")
    if not body or body[-1] == "\n":
        return None  # no line that is not blank, or more than one newline at the end
    # ChatMessage(sender, time_raw, body, base, end), its fields set by their slots' setters
    m = _new_record(ChatMessage)
    _set_sender(m, text[_FROM_AT:i].strip(" \t"))
    _set_time_raw(m, text[i + 6 : j].strip(" \t"))
    _set_body(m, body)
    _set_offset(m, base)
    _set_end(m, base + len(data))
    return m


def _parse(data: bytes, base: int) -> tuple[list[ChatMessage], int]:
    """``parse_messages`` for any bytes: the general parser."""
    settled = _settled(data)
    text = data.decode("utf-8", errors="surrogateescape")
    headers = list(_HEADER_RE.finditer(text))
    out: list[ChatMessage] = []
    # Byte offsets are counted incrementally (character index -> byte offset) to stay linear.
    char_pos, byte_pos = 0, base

    def to_bytes(index: int) -> int:
        nonlocal char_pos, byte_pos
        byte_pos += len(text[char_pos:index].encode("utf-8", errors="surrogateescape"))
        char_pos = index
        return byte_pos

    def block_start(m: re.Match[str]) -> int:
        start = m.start()
        if start > 0 and text[start - 1] == "\n":
            start -= 1  # the separating newline belongs to this block, as it was appended
            if start > 0 and text[start - 1] == "\r":
                start -= 1
        return start

    def line_end(end: int, floor: int) -> int:
        """``end`` pulled back to just past the first line end of the newlines it closes on:
        the newlines after that one may be the next block's separator, still being written."""
        k = end
        while k > floor and text[k - 1] in "\r\n":
            k -= 1
        j = text.find("\n", k, end)
        if k == floor:
            return floor
        return end if j < 0 else j + 1

    starts = [block_start(m) for m in headers]
    for i, m in enumerate(headers):
        stop = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = unescape_body(text[m.end() : stop].replace("\r\n", "\n")).strip("\n")
        # A block runs from its separator to the next block's: offsets are the same whether
        # the file is parsed whole or read on from any block boundary.
        offset = to_bytes(max(starts[i], char_pos))
        if not settled and i == len(headers) - 1:
            return out, offset  # the last block may still be growing: leave it for later
        out.append(
            ChatMessage(
                sender=_shown(m.group("from")),
                time_raw=_shown(m.group("time")),
                body=_shown(body),
                offset=offset,
                end=to_bytes(line_end(starts[i + 1] if i + 1 < len(headers) else stop, m.end())),
            )
        )
    if not settled and not headers:
        return out, base  # a preamble still being written
    if not headers:
        return out, to_bytes(line_end(len(text), 0))
    return out, byte_pos

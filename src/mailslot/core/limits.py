"""Bounds checked before a write: refused with ``LimitExceeded``, never truncated.

Input of unknown size (standard input, a body file that may be ``/dev/zero``) is read through
``read_capped``, which stops one byte past the limit: a body that is too large is refused after
reading ``limit + 1`` bytes, never read whole into memory first.
"""

from __future__ import annotations

import functools
import re
from typing import BinaryIO

from mailslot.core.errors import FormatError, InvalidValue, LimitExceeded

__all__ = [
    "check_bytes",
    "check_chars",
    "check_controls",
    "check_lines",
    "check_one_line",
    "check_utf8",
    "check_words",
    "read_capped",
]

_CHUNK = 1 << 16


def check_bytes(what: str, data: str | bytes, limit: int) -> None:
    """Refuse ``data`` longer than ``limit`` bytes (UTF-8)."""
    n = len(data.encode() if isinstance(data, str) else data)
    if n > limit:
        raise LimitExceeded(what, limit, n, "bytes")


def check_chars(what: str, text: str, minimum: int, maximum: int) -> None:
    """Refuse ``text`` outside ``minimum..maximum`` characters."""
    n = len(text)
    if n < minimum:
        raise LimitExceeded(what, minimum, n, "characters", minimum=True)
    if n > maximum:
        raise LimitExceeded(what, maximum, n, "characters")


def check_words(what: str, text: str, limit: int) -> None:
    """Refuse ``text`` of more than ``limit`` whitespace-separated words."""
    n = len(text.split())
    if n > limit:
        raise LimitExceeded(what, limit, n, "words")


def check_lines(what: str, text: str, limit: int) -> None:
    """Refuse ``text`` of more than ``limit`` physical lines (any of \\n, \\r, \\u2028 ...)."""
    n = len(text.splitlines()) or 1
    if n > limit:
        raise LimitExceeded(what, limit, n, "lines")


def check_one_line(what: str, text: str) -> None:
    """Refuse ``text`` that would not stay one physical line once written."""
    # splitlines knows every separator a reader might honour (\r, \x0b, \x1c, \u2028 ...).
    if len(text.splitlines()) > 1 or text.endswith(("\n", "\r")):
        raise LimitExceeded(what, 1, max(2, len(text.splitlines())), "lines")


def check_utf8(what: str, text: str) -> None:
    """Refuse ``text`` that cannot be written as UTF-8 (``FormatError``): undecodable argv or
    stdin bytes reach Python as lone surrogates, and every mailslot file is UTF-8 text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        code = ord(text[e.start])
        byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise FormatError(
            f"{what} is not valid UTF-8 text ({byte} at character {e.start}); nothing written",
            field=what,
        ) from None


# Control characters (Unicode category Cc): C0, DEL and C1.
_CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)]))
_CONTROL_NAMES = {"\x00": "NUL", "\t": "tab", "\n": "newline", "\r": "carriage return"}


@functools.lru_cache(maxsize=8)
def _controls_but(allowed: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape("".join(c for c in _CONTROLS if c not in allowed)) + "]")


def check_controls(what: str, text: str, allowed: str = "") -> None:
    """Refuse ``text`` holding a control character (NUL, ESC, a bell, DEL, C1 ...) other than
    those in ``allowed`` (``InvalidValue``): mailslot files are text that people read in
    terminals and tools search (a NUL makes git and grep take a file as binary)."""
    m = _controls_but(allowed).search(text)
    if m is None:
        return
    ch = m.group()
    name = _CONTROL_NAMES.get(ch, f"U+{ord(ch):04X}")
    legal = ", ".join(_CONTROL_NAMES.get(c, f"U+{ord(c):04X}") for c in allowed) or "none"
    raise InvalidValue(
        f"{what} holds a control character ({name}) at character {m.start()} "
        f"(allowed: {legal}); nothing written"
    )


def read_capped(stream: BinaryIO, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes from ``stream``; ``LimitExceeded`` as soon as it holds more
    (having read ``limit + 1`` bytes, never the rest)."""
    chunks = []
    left = limit + 1
    while left > 0:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise LimitExceeded(what, limit, len(data), "bytes", unread=True)
    return data

"""Text written by others, made safe to show next to our own framing (a terminal, a tool result).

Messages are data (docs/design.md, principle 5): a body or a hand-written name may carry an ANSI
escape, a carriage return, a bidi override or a line separator. ``shown`` escapes every character
that is not printable (``str.isprintable``) as ``\\xNN``/``\\uNNNN``, keeping newline and tab for
multi-line bodies; ``shown_line`` escapes those too, for text that must stay on one line. One rule
for every face, so no face escapes less than another.

A value read from a file someone else wrote may be any size; an error message, INDEX.md or a tool
result that quotes it must not be. ``brief`` is the bounded ``repr`` for such values (a long
string is cut with its length said, a container or a huge number is named, never expanded), and
``brief_text`` bounds text that already is a message.
"""

from __future__ import annotations

__all__ = ["BRIEF_CHARS", "brief", "brief_text", "shown", "shown_line"]

# Enough to recognise a value in a one-line complaint; a value longer than this is cut.
BRIEF_CHARS = 60


def _escape(ch: str) -> str:
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def shown(text: object) -> str:
    """``text`` with CR LF made LF and every unprintable character but LF and TAB escaped."""
    text = str(text).replace("\r\n", "\n")
    return "".join(ch if ch.isprintable() or ch in "\n\t" else _escape(ch) for ch in text)


def shown_line(text: object) -> str:
    """``text`` as one printable line: every unprintable character escaped, LF and TAB too."""
    return "".join(ch if ch.isprintable() else _short_escape(ch) for ch in str(text))


def _short_escape(ch: str) -> str:
    # the usual three read better as \n \r \t on a line of their own
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or _escape(ch)


def brief(value: object, limit: int = BRIEF_CHARS) -> str:
    """A one-line ``repr`` of ``value`` of at most about ``limit`` characters, whatever its size:
    strings cut (with their length), containers and huge numbers named, never walked."""
    if isinstance(value, str):
        if len(value) <= limit:
            return shown_line(repr(value))
        return shown_line(repr(value[:limit])) + f"... ({len(value)} characters)"
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 4 * limit:  # repr would be long (or refused past 4300 digits)
            return f"an integer of {value.bit_length()} bits"
        return brief_text(repr(value), limit)
    if isinstance(value, bytes | bytearray):
        return f"{type(value).__name__} of {len(value)} bytes"
    try:
        size = len(value)  # type: ignore[arg-type]
    except TypeError:
        return f"a {type(value).__name__}"
    return f"a {type(value).__name__} of {size} items"


def brief_text(text: str, limit: int = 4 * BRIEF_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with the cut said."""
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text)} characters)"
    return shown_line(text)

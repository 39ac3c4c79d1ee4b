"""Text written by others, made safe to show next to our own framing (a terminal, a tool result).

Messages are data (DESIGN principle 5): a body or a hand-written name may carry an ANSI escape, a
carriage return, a bidi override or a line separator. ``shown`` escapes every character that is
not printable (``str.isprintable``) as ``\\xNN``/``\\uNNNN``, keeping newline and tab for
multi-line bodies; ``shown_line`` escapes those too, for text that must stay on one line. One
rule for every face, so no face escapes less than another.
"""

from __future__ import annotations

__all__ = ["shown", "shown_line"]


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

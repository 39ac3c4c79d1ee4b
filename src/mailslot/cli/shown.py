"""Text written by others, made safe to print in a terminal next to our own framing lines.

Messages are data (docs/design.md, principle 5): a body or a hand-written name may carry an ANSI
escape, a carriage return, a bidi override, or a line that looks exactly like our own delimiter. The
text output of a read command therefore

* escapes (with ``core.display``) every character that is not printable (``str.isprintable``:
  controls, format and bidi characters, line and paragraph separators, unusual spaces,
  unassigned code points) as ``\\xNN``/``\\uNNNN``, keeping only newline and tab inside
  multi-line bodies, so nothing can move the cursor, recolour the screen, reorder a line or
  start one where a newline was not seen;
* prints a multi-line body only as a quoted block (every line starts with ``QUOTE``), so no body
  line can start at column 0 and pass for a delimiter or a status line of ours.

``--json`` output stays raw: it is unambiguous by construction.

Text coming in is checked the other way: ``read_text`` refuses standard input that is not UTF-8
with a ``FormatError`` (exit 1, nothing written) instead of a decoding traceback; undecodable
argv bytes arrive as lone surrogates and the channels refuse those before writing.
"""

from __future__ import annotations

from mailslot.cli.common import read_text
from mailslot.core.display import shown, shown_line

__all__ = ["QUOTE", "quoted", "read_text", "shown", "shown_line"]

QUOTE = "| "


def quoted(text: str) -> str:
    """``text`` (escaped by ``shown``) with ``QUOTE`` before every line, blank ones too."""
    return "\n".join(QUOTE + line if line else QUOTE.rstrip() for line in shown(text).split("\n"))

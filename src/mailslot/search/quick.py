"""A quick reading of the plainest entries, pinned to the exchange's strict parser.

Indexing 60,000 entries spent nine tenths of its time in the strict frontmatter parser (YAML,
about 0.3 ms an entry). Most entries are the plainest shape -- what mailslot's own ``send``
writes, and what the convention teaches hand writers: a ``---`` line, a few ``key: value`` lines
with bare or simply quoted values, a ``---`` line, the body. For exactly that shape this module
returns the two things search needs, the ``at`` value and the body, without YAML; for anything
else (escapes, YAML punctuation in a value, a key YAML would read as a boolean, a repeated key, CRLF
mixed with a fence carrying spaces, bytes that are not UTF-8, more than ``HEADER_LINES_MAX``
lines) it answers ``None`` and the caller uses the strict parser. A property test holds the two
to the same answer on every document this accepts.
"""

from __future__ import annotations

import re

__all__ = ["HEADER_LINES_MAX", "quick_entry"]

# A plain header is three to five fields; past this, the strict parser decides.
HEADER_LINES_MAX = 16

# ``key: value`` with a value YAML reads as the same string: bare (no spaces, quotes, '#', '&',
# '*', '!', '|', '>', '%', '@', '`', brackets or braces; not starting with '-' or ending in ':'),
# or in single or double quotes around letters, digits, spaces and ``_.:+-`` (no escapes).
_FIELD_RE = re.compile(
    r"([a-z][a-z0-9_]{0,31}):(?: +(?:"
    r"([A-Za-z0-9_.+](?:[A-Za-z0-9_.:+-]*[A-Za-z0-9_.+-])?)"
    r"|'([A-Za-z0-9_.:+ -]*)'"
    r'|"([A-Za-z0-9_.:+ -]*)"'
    r"))? *"
)
# Keys YAML 1.1 reads as booleans or null, not strings (the strict parser refuses those).
_NOT_STRING_KEYS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})


def quick_entry(raw: bytes) -> tuple[str | None, str] | None:
    """``(at, body)`` of an entry in the plainest shape (``at`` the raw value, ``None`` when
    absent or empty), or ``None``: not that shape, ask the strict parser."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    parts = text.split("\n", HEADER_LINES_MAX + 1)
    if parts[0] != "---":
        return None
    fields: dict[str, str | None] = {}
    for i in range(1, len(parts) - 1):
        line = parts[i]
        if line == "---":
            return fields.get("at"), "\n".join(parts[i + 1 :])
        m = _FIELD_RE.fullmatch(line)
        if m is None or m[1] in fields or m[1] in _NOT_STRING_KEYS:
            return None
        bare, single, double = m[2], m[3], m[4]
        fields[m[1]] = bare if bare is not None else single if single is not None else double
    return None

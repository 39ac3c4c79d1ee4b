"""What a person or an agent types, made into a safe FTS5 query.

The user's text never reaches ``MATCH`` as FTS5 syntax: every word becomes a quoted FTS5 string
(a ``"`` inside is doubled), so ``NEAR(``, ``col:``, ``^``, ``AND``/``OR``/``NOT`` and stray
quotes are searched for as text, never obeyed, and no input can make the query fail to parse.
What the user may say is this small language, built here and nowhere else:

* ``word`` -- every word must appear (words are ANDed);
* ``"a phrase"`` -- the words next to each other, in order;
* ``word*`` -- a prefix (at least ``PREFIX_MIN`` characters before the ``*``);
* ``-word`` / ``-"a phrase"`` -- must not appear (needs at least one word that must);
* ``from:NAME`` -- sent by NAME (who the transport says sent it);
* ``in:CHANNEL`` -- ``exchange``, ``chat``, ``log`` or ``peer`` (repeat for several).

Bounds are checked before anything is run and refused whole (``LimitExceeded``), never trimmed.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from mailslot.core.errors import InvalidValue, LimitExceeded

__all__ = ["CHANNELS", "QUERY_MAX_CHARS", "QUERY_MAX_TERMS", "Query", "parse_query"]

# The channels a message can come from, as ``in:`` names them and ``Hit.channel`` says them.
CHANNELS = ("exchange", "chat", "log", "peer")
# A search is a few words; a longer text is a paste, and FTS5 cost grows with every term.
QUERY_MAX_CHARS = 500
QUERY_MAX_TERMS = 32
# ``a*`` matches most of the index and makes a query as slow as a full scan; two letters is the
# shortest prefix that still narrows.
PREFIX_MIN = 2

# A token: optional '-', then a "quoted phrase" (closing quote optional) or a bare run.
_TOKEN_RE = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')
# The characters FTS5's unicode61 tokenizer keeps in a token (letters, digits, and the rest
# of the word characters); a term without any of them matches nothing and is dropped.
_WORDISH_RE = re.compile(r"\w")


class Query(NamedTuple):
    """A parsed search: the FTS5 ``MATCH`` expression and the filters beside it."""

    match: str  # a safe FTS5 expression, built only from quoted strings and AND/NOT
    senders: tuple[str, ...] = ()  # from:NAME (any of them)
    channels: tuple[str, ...] = ()  # in:CHANNEL (any of them)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def parse_query(text: str) -> Query:
    """The safe ``Query`` for ``text``; ``LimitExceeded`` past the bounds, ``InvalidValue`` for a
    query with nothing to look for (no words, only exclusions, an unknown ``in:`` channel)."""
    if len(text) > QUERY_MAX_CHARS:
        raise LimitExceeded("the search query", QUERY_MAX_CHARS, len(text), "characters")
    # NUL ends a string inside SQLite's C code: the quoted term would lose its closing quote.
    # No indexed text holds one (the index blanks it), so it separates words here too.
    text = text.replace("\x00", " ")
    must: list[str] = []
    must_not: list[str] = []
    senders: list[str] = []
    channels: list[str] = []
    terms = 0
    for m in _TOKEN_RE.finditer(text):
        negate, phrase, bare = m.group(1) == "-", m.group(2), m.group(3)
        terms += 1
        if terms > QUERY_MAX_TERMS:
            raise LimitExceeded("the search query", QUERY_MAX_TERMS, terms, "terms", unread=True)
        if phrase is None and bare is not None and not negate:
            key, sep, value = bare.partition(":")
            if sep and value and key.lower() == "from":
                senders.append(value.lower())
                continue
            if sep and value and key.lower() == "in":
                if value.lower() not in CHANNELS:
                    raise InvalidValue(
                        f"unknown channel {value!r} in 'in:' (one of {', '.join(CHANNELS)})"
                    )
                channels.append(value.lower())
                continue
        word = phrase if phrase is not None else bare or ""
        prefix = phrase is None and word.endswith("*")
        word = word.rstrip("*") if prefix else word
        if not _WORDISH_RE.search(word):
            continue  # punctuation alone: FTS5 would see no token in it
        if prefix and len(word) < PREFIX_MIN:
            raise InvalidValue(f"a prefix needs at least {PREFIX_MIN} characters before '*'")
        term = _quoted(word) + ("*" if prefix else "")
        (must_not if negate else must).append(term)
    if not must:
        raise InvalidValue(
            "nothing to search for: give at least one word (exclusions need a word to exclude from)"
        )
    match = " AND ".join(must)
    if must_not:
        match = f"({match}) NOT ({' OR '.join(must_not)})"
    return Query(match, tuple(dict.fromkeys(senders)), tuple(dict.fromkeys(channels)))

"""Frontmatter documents: ``---`` / YAML mapping / ``---`` / body.

The parser is strict where strictness prevents a wrong reading and lenient where people differ
harmlessly. Accepted: CRLF line ends, a UTF-8 BOM, trailing spaces on the fences, quoted or bare
scalars, ``Z`` or ``+00:00`` (times stay strings here; ``clock.parse_time`` reads them). Refused,
with an error naming the file and, where there is one, the field: a missing or unclosed fence, YAML
that is not a mapping, a key given twice (which value did the writer mean?), non-string keys.

Every file parsed here may come from someone else, so the parse is bounded in time and memory,
not only in bytes: anchors and aliases are refused (a 500-byte "billion laughs" of nested
``*aliases`` expands to gigabytes the moment anything walks it), and so is a document of more
than ``MAX_NODES`` nodes or nested deeper than ``MAX_DEPTH``. Frontmatter, STATE.md and config are
a handful of flat fields; nothing legitimate comes near either bound. Every failure, including
numbers Python will not convert, is a ``FormatError`` whose message quotes no value whole.

The writer emits one ``key: value`` line per field in the given order, quoting whatever YAML would
otherwise read back as something else, so ``parse(dump(meta, body)) == (meta, body)``. A time is
written bare (``at: 2026-11-29T18:14:00.123Z``), as people and shell scripts write it: the strict
loader keeps it a string, so it needs no quotes.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from mailslot.core.display import brief, brief_text
from mailslot.core.errors import FormatError

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "dump_frontmatter",
    "dump_yaml",
    "load_json",
    "load_yaml",
    "parse_frontmatter",
]

FENCE = "---"


# A document of a few fields has tens of nodes; a config with a human map, a few hundred.
MAX_NODES = 2000
# Nesting beyond this is no header anyone writes; the composer recurses once per level.
MAX_DEPTH = 32


@functools.cache
def _strict_loader() -> Any:
    """The strict loader class, made on first use: PyYAML costs tens of milliseconds to
    import, and the documents mailslot writes itself read without it (``_plain_mapping``)."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        """SafeLoader that keeps times as strings, refuses duplicate keys, anchors and aliases, and
        stops composing past ``MAX_NODES`` nodes or ``MAX_DEPTH`` levels."""

        _nodes = 0
        _depth = 0

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            mark = event.start_mark if isinstance(event.start_mark, yaml.Mark) else None
            if isinstance(event, yaml.AliasEvent):
                raise yaml.composer.ComposerError(
                    None, None, "aliases (*name) are not accepted", mark
                )
            if getattr(event, "anchor", None) is not None:
                raise yaml.composer.ComposerError(
                    None, None, "anchors (&name) are not accepted", mark
                )
            self._nodes += 1
            if self._nodes > MAX_NODES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_NODES} YAML nodes", mark
                )
            if self._depth >= MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", mark
                )
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    # Times are parsed by clock.parse_time so there is one rule for them, not YAML's.
    _StrictLoader.yaml_implicit_resolvers = {
        ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"a {type(key).__name__} key is not a plain value",
                    key_node.start_mark,
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {brief(key)} appears more than once", key_node.start_mark
                )
            seen.add(key)
        return loader.construct_mapping(node)

    _StrictLoader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
    )

    return _StrictLoader


def _normalise(text: str | bytes, path: Path | str | None) -> str:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"not UTF-8 text ({e.reason} at byte {e.start})", path=path) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")


# What ``_plain_mapping`` reads itself: ``key: value`` lines whose values are plain words,
# small integers, null/true/false, bare times (kept as strings, as the strict loader keeps them)
# and flow lists or maps of plain words -- what ``dump_yaml`` writes for mailslot's own files.
_WORD_TEXT = r"[A-Za-z][A-Za-z0-9_-]*"
_PLAIN_WORD = re.compile(_WORD_TEXT)
# YAML 1.1 reads these as booleans or null: never a plain word, as a key or as a value.
_NOT_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
_PLAIN_LINE = re.compile(rf"({_WORD_TEXT}): ([^\n]*)")
_FLOW_LIST = re.compile(rf"\[(?:{_WORD_TEXT}(?:, {_WORD_TEXT})*)?\]")
_FLOW_MAP = re.compile(rf"\{{(?:{_WORD_TEXT}: {_WORD_TEXT}(?:, {_WORD_TEXT}: {_WORD_TEXT})*)?\}}")
_SMALL_INT = re.compile(r"0|[1-9][0-9]{0,17}")
_CONSTANTS: dict[str, Any] = {"null": None, "true": True, "false": False}
# YAML refuses an implicit key of 1024 characters or more; longer keys than this go to the
# strict loader, which says what is wrong.
_PLAIN_KEY_MAX = 128


def _word(text: str) -> bool:
    return _PLAIN_WORD.fullmatch(text) is not None and text.lower() not in _NOT_WORDS


def _plain_value(text: str) -> tuple[bool, Any]:
    if text in _CONSTANTS:
        return True, _CONSTANTS[text]
    if _word(text) or _BARE_TIME.fullmatch(text):
        return True, text
    if _SMALL_INT.fullmatch(text):
        return True, int(text)
    if _FLOW_LIST.fullmatch(text):
        items = text[1:-1].split(", ") if text != "[]" else []
        return all(_word(i) for i in items), items
    if _FLOW_MAP.fullmatch(text):
        pairs = [p.split(": ") for p in text[1:-1].split(", ")] if text != "{}" else []
        keys = [k for k, _ in pairs]
        ok = all(_word(k) and _word(v) for k, v in pairs) and len(set(keys)) == len(keys)
        return ok, dict(pairs)
    return False, None


def _plain_mapping(text: str) -> dict[str, Any] | None:
    """The mapping a document of plain ``key: value`` lines holds, exactly as the strict loader
    reads it; ``None`` for anything else (the loader decides, and names what is wrong)."""
    out: dict[str, Any] = {}
    for line in text.split("\n"):
        if not line:
            continue
        m = _PLAIN_LINE.fullmatch(line)
        if m is None or len(m[1]) > _PLAIN_KEY_MAX or not _word(m[1]) or m[1] in out:
            return None
        ok, value = _plain_value(m[2])
        if not ok:
            return None
        out[m[1]] = value
    return out


def load_yaml(text: str | bytes, *, path: Path | str | None = None) -> dict[str, Any]:
    """Parse a YAML mapping strictly (no duplicate keys, string keys); raise ``FormatError``."""
    text = _normalise(text, path)
    plain = _plain_mapping(text)
    if plain is not None:
        return plain
    import yaml

    try:
        data = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise FormatError(f"invalid YAML{where}: {brief_text(problem)}", path=path) from None
    except (ValueError, OverflowError) as e:  # a number Python refuses to convert, say
        raise FormatError(f"invalid YAML: {brief_text(str(e))}", path=path) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FormatError(f"expected a YAML mapping, got {type(data).__name__}", path=path)
    for key in data:
        if not isinstance(key, str):
            raise FormatError(f"keys must be strings, got {brief(key)}", path=path)
    return data


def parse_frontmatter(
    text: str | bytes, *, path: Path | str | None = None
) -> tuple[dict[str, Any], str]:
    """Split a frontmatter document into ``(fields, body)``; raise ``FormatError``."""
    text = _normalise(text, path)
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FENCE:
        raise FormatError("does not start with a '---' frontmatter fence", path=path)
    for i in range(1, len(lines)):
        if lines[i].rstrip() == FENCE:
            meta = load_yaml("\n".join(lines[1:i]), path=path)
            return meta, "\n".join(lines[i + 1 :])
    raise FormatError("frontmatter is not closed by a '---' line", path=path)


_BARE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)


def _dump_value(value: Any) -> str:
    if isinstance(value, str) and (_BARE_TIME.fullmatch(value) or _word(value)):
        return value  # the strict loader reads it back as this very string
    if type(value) is int and _SMALL_INT.fullmatch(str(value)):
        return str(value)
    import yaml

    out = yaml.safe_dump(
        value, default_flow_style=True, allow_unicode=True, sort_keys=False, width=1 << 30
    )
    out = out.removesuffix("\n").removesuffix("\n...")
    # YAML reads some characters (NEL, LS, PS) as line breaks even inside quotes; when the
    # readable form would not read back identically, write JSON, which YAML reads exactly.
    if "\n" in out or load_yaml(f"v: {out}").get("v") != value:
        out = _json_for_yaml(value)
    return out


def _yaml_printable(ch: str) -> bool:
    c = ord(ch)
    return (
        0x20 <= c <= 0x7E
        or 0xA0 <= c <= 0xD7FF
        or 0xE000 <= c <= 0xFFFD
        or 0x10000 <= c <= 0x10FFFF
    ) and ch not in "\u2028\u2029"


def _json_for_yaml(value: Any) -> str:
    """JSON whose strings YAML reads back exactly: non-printables escaped, astral kept whole."""
    import json  # here, not at the top: a plain send's frontmatter needs no quoting

    text = json.dumps(value, ensure_ascii=False)
    return "".join(ch if _yaml_printable(ch) else f"\\u{ord(ch):04x}" for ch in text)


def dump_yaml(fields: dict[str, Any]) -> str:
    """One ``key: value`` line per field, in order; values quoted where YAML would misread."""
    lines = []
    for key, value in fields.items():
        if not isinstance(key, str) or not key:
            raise FormatError(f"cannot write key {key!r}")
        lines.append(f"{_dump_value(key)}: {_dump_value(value)}")
    return "\n".join(lines) + ("\n" if lines else "")


def dump_frontmatter(fields: dict[str, Any], body: str) -> str:
    """A frontmatter document that ``parse_frontmatter`` reads back as ``(fields, body)``."""
    return f"{FENCE}\n{dump_yaml(fields)}{FENCE}\n{body}"


# A ``\uD800``-``\uDFFF`` escape: the only way UTF-8 JSON text can carry a surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(doc: Any) -> bool:
    """Whether any string in ``doc`` (keys too) holds a surrogate that is not half of a pair."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def load_json(text: str | bytes, *, path: Path | str | None = None) -> Any:
    """Parse JSON; raise ``FormatError`` naming the file and position.

    Refused as ``FormatError`` too, because no valid message holds them and each would fail later
    where it is harder to name: a lone surrogate (``"\\ud800"``: not text, cannot be written as
    UTF-8), nesting deeper than the interpreter's recursion limit, an integer longer than
    Python's 4,300-digit conversion limit.
    """
    import json

    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FormatError(f"invalid JSON: {e}", path=path) from None
    except RecursionError:
        raise FormatError("invalid JSON: nested too deeply", path=path) from None
    except ValueError:  # int("9" * 5000): past sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        raise FormatError(f"invalid JSON: an integer over {limit} digits", path=path) from None
    if isinstance(text, bytes):
        suspect = _SURROGATE_ESCAPE_BYTES.search(text) is not None
    else:  # a str may also hold a raw surrogate of its own
        suspect = _SURROGATE_ESCAPE.search(text) is not None or _lone_surrogate(text)
    if suspect and _lone_surrogate(doc):
        raise FormatError("invalid JSON: a lone surrogate is not text", path=path)
    return doc

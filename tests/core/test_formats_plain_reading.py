"""The plain reading of ``key: value`` documents never disagrees with the strict YAML loader.

``load_yaml`` reads mailslot's own plain documents by hand (``_plain_mapping``) so a send loads no
PyYAML. Whatever someone else wrote, the answer is the strict loader's: the same mapping with the
same types, or the same refusal. The documents below are built from the places where YAML 1.1
reads a word as something other than text (booleans, nulls, octal, hex, sexagesimal, floats,
dates, merge keys), the limits of an implicit key, and the line ends and spaces people type.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mailslot.core.errors import FormatError
from mailslot.core.formats import load_yaml

_TRAPS = [
    *("yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"),
    *("y", "Y", "n", "N", "true", "True", "TRUE", "tRUE", "false", "False", "FALSE"),
    *("~", "null", "Null", "NULL", "nULL", ".nan", ".NaN", ".NAN", ".inf", "-.inf", ".Inf"),
    *("0o7", "0x1F", "0b101", "1_000", "1e3", "1.5e3", "012", "0", "-0", "+1", "00", "1.5"),
    *("999999999999999999", "9999999999999999999", "18446744073709551616", "1:30", "190:20:30"),
    *("2026-12-02", "2026-12-02T01:02:03Z", "2026-12-02T01:02:03.123456789+05:30"),
    *("2026-12-02 01:02:03", "2026-12-02t01:02:03z", "12:30:00", "2026-13-45T99:99:99Z"),
    *("<<", "=", "-", "?", "!", "&a", "*a", "|", ">", "'q'", '"q"', "a #c", "#c", "%x", "@x"),
    *("[a, b]", "[yes, no]", "[]", "{}", "{a: b}", "{a: b, a: c}", "{a: yes}", "[a,b]", "[ a ]"),
    *("olu", "claude", "fyi", "a-b", "x_1", "E1", "e", "inf", "nan", "NaN", "Inf", "é", "日本"),
    *("ñame", "a\x85b", "a\u2028b", "a\tb", "a b", "a:b", "a: b", "", " "),
]
_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,6}", fullmatch=True)
_KEYS = st.one_of(
    _NAMES,
    _NAMES,
    st.sampled_from(_TRAPS),
    st.sampled_from(["a" * 128, "a" * 129, "b" * 1023, "c" * 1024, "d" * 1100]),
)
_VALUES = st.one_of(
    st.sampled_from(_TRAPS), st.from_regex(r"[A-Za-z0-9_.:+-]{1,8}", fullmatch=True)
)
_SEPARATORS = st.sampled_from([": ", ": ", ": ", ":", ":\t", " : ", ":  "])
_LINE_ENDS = st.sampled_from(["\n", "\n", "\r\n", "\r", "\x85"])
_TRAILING = st.sampled_from(["", "", "", " ", "\t", "  ", " # note"])


@st.composite
def _documents(draw: st.DrawFn) -> str:
    if draw(st.booleans()):  # tidy: the shape the plain reading takes, traps in the words
        sep, tail, end = st.just(": "), st.just(""), st.just("\n")
    else:
        sep, tail, end = _SEPARATORS, _TRAILING, _LINE_ENDS
    lines = draw(st.lists(st.tuples(_KEYS, sep, _VALUES, tail, end), max_size=6))
    text = "".join(k + sep + v + tail + end for k, sep, v, tail, end in lines)
    if lines and draw(st.booleans()):
        text = text.rstrip("\r\n")  # no line end after the last line
    if draw(st.integers(0, 9)) == 0:
        text = "\ufeff" + text
    if draw(st.integers(0, 9)) == 0:  # a line given twice
        text += text.split("\n", 1)[0] + "\n"
    return text


def _strict(text: str) -> dict[str, Any] | None:
    """What the strict loader alone makes of ``text``: the mapping, or None for a refusal."""
    import yaml

    from mailslot.core.formats import _normalise, _strict_loader

    try:
        data = yaml.load(_normalise(text, None), Loader=_strict_loader())
    except (yaml.YAMLError, ValueError, OverflowError):
        return None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        return None
    return data


def _typed(value: Any) -> Any:
    """``value`` with every scalar paired with its type: ``True == 1`` but they differ here."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value), value)


@settings(max_examples=1000)
@given(_documents())
def test_a_document_reads_as_the_strict_loader_reads_it_or_is_refused_as_it_is(text: str) -> None:
    strict = _strict(text)
    try:
        got = load_yaml(text)
    except FormatError:
        assert strict is None, f"refused what the strict loader reads: {text!r}"
        return
    assert strict is not None, f"read what the strict loader refuses: {text!r}"
    assert _typed(got) == _typed(strict), text


def test_the_traps_as_values_read_as_the_strict_loader_reads_them() -> None:
    for word in _TRAPS:
        for doc in (f"k: {word}\n", f"k: {word}\r\n", f"\ufeffk: {word}", f"k: [{word}]\n"):
            strict = _strict(doc)
            try:
                got = load_yaml(doc)
            except FormatError:
                assert strict is None, doc
                continue
            assert strict is not None and _typed(got) == _typed(strict), doc

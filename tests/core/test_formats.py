from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailslot.core.errors import FormatError
from mailslot.core.formats import dump_frontmatter, load_yaml, parse_frontmatter


def test_parses_a_hand_written_entry() -> None:
    text = "---\r\nfrom: olu  \r\nat: '2026-09-01T18:14:00Z'\r\naction: required\r\n--- \r\nHi\r\n"
    meta, body = parse_frontmatter(text)
    assert meta == {"from": "olu", "at": "2026-09-01T18:14:00Z", "action": "required"}
    assert body == "Hi\n"


def test_times_stay_strings() -> None:
    meta, _ = parse_frontmatter("---\nat: 2026-09-01T18:14:00Z\nd: 2026-09-01\n---\n")
    assert meta["at"] == "2026-09-01T18:14:00Z"
    assert meta["d"] == "2026-09-01" and not isinstance(meta["d"], date)


def test_bom_and_body_with_fences() -> None:
    meta, body = parse_frontmatter("\ufeff---\na: 1\n---\nline\n---\nmore\n")
    assert meta == {"a": 1}
    assert body == "line\n---\nmore\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("from: x\n", "does not start"),
        ("---\nfrom: x\n", "not closed"),
        ("---\n- a\n- b\n---\n", "mapping"),
        ("---\nfrom: a\nfrom: b\n---\n", "more than once"),
        ("---\nfrom: [\n---\n", "invalid YAML"),
        ("---\n1: x\n---\n", "strings"),
    ],
)
def test_refuses_ambiguous_documents_naming_the_file(text: str, needle: str) -> None:
    with pytest.raises(FormatError, match=needle) as e:
        parse_frontmatter(text, path="to-olu/t/0001-claude.md")
    assert "to-olu/t/0001-claude.md" in str(e.value)


def test_refuses_non_utf8() -> None:
    with pytest.raises(FormatError, match="UTF-8"):
        parse_frontmatter(b"---\na: \xff\n---\n")


def test_writer_quotes_what_yaml_would_misread() -> None:
    fields = {
        "from": "claude",
        "at": "2026-09-01T18:14:00.000Z",
        "n": "0001",
        "x": "yes",
        "e": "",
        "c": "a: b",
        "t": ["a", "b"],
    }
    meta, body = parse_frontmatter(dump_frontmatter(fields, "body\n"))
    assert meta == fields and body == "body\n"


def test_load_yaml_empty_is_empty_mapping() -> None:
    assert load_yaml("") == {}


_keys = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
_scalars = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=40),
    st.integers(-(10**9), 10**9),
    st.booleans(),
    st.none(),
)
_values = st.one_of(
    _scalars, st.lists(st.text(max_size=10).filter(lambda s: "\r" not in s), max_size=4)
)


@given(
    fields=st.dictionaries(_keys, _values, max_size=8),
    body=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r")),
)
def test_round_trip(fields: dict[str, object], body: str) -> None:
    assert parse_frontmatter(dump_frontmatter(fields, body)) == (fields, body)

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


# The plain reader (mailslot's own files, read without loading PyYAML) is pinned to the strict
# loader: whatever it accepts, it reads exactly as the loader does; anything else goes to it.
_WORDS = st.sampled_from(
    [
        *("olu", "claude", "fyi", "required", "a-b", "x_1", "Null", "NO", "on", "y", "n", "yes"),
        *("Off", "True", "false", "e", "E1", "inf", "nan", "at", "from", "sides", "humans", "_a"),
    ]
)
_VALUES = st.one_of(
    _WORDS,
    st.sampled_from(["null", "true", "false", "~", "0", "7", "010", "1_000", "-1", "0x1f", "1e3"]),
    st.sampled_from(["2026-12-02T01:25:07.854Z", "2026-11-29T10:00:00+00:00", "2026-11-29"]),
    st.lists(_WORDS, max_size=3).map(lambda ws: "[" + ", ".join(ws) + "]"),
    st.lists(st.tuples(_WORDS, _WORDS), max_size=3).map(
        lambda ps: "{" + ", ".join(f"{k}: {v}" for k, v in ps) + "}"
    ),
    st.text(alphabet="ab:#'\" -[]{},\t\r&*!|>%@`?", max_size=6),
)


@given(st.lists(st.tuples(_WORDS, _VALUES), max_size=6), st.booleans())
def test_plain_documents_read_exactly_as_the_strict_loader_reads_them(
    pairs: list[tuple[str, str]], blank_line: bool
) -> None:
    import yaml

    from mailslot.core.formats import _plain_mapping, _strict_loader

    lines = [f"{k}: {v}" for k, v in pairs] + ([""] if blank_line else [])
    doc = "\n".join(lines)
    plain = _plain_mapping(doc)
    try:
        strict = yaml.load(doc, Loader=_strict_loader())
    except (yaml.YAMLError, ValueError):
        assert plain is None
        return
    if plain is not None:
        assert plain == (strict or {}) and all(type(plain[k]) is type(strict[k]) for k in plain)


@given(st.one_of(_WORDS, st.integers(min_value=0, max_value=10**17)))
def test_plain_values_are_written_as_the_strict_loader_reads_them_back(value: object) -> None:
    import yaml

    from mailslot.core.formats import _strict_loader, dump_yaml

    doc = dump_yaml({"v": value})
    assert yaml.load(doc, Loader=_strict_loader()) == {"v": value}


def test_a_send_and_a_config_read_without_loading_pyyaml(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from mailslot.core.formats import dump_frontmatter, load_yaml, parse_frontmatter\n"
        "doc = dump_frontmatter({'from': 'olu', 'at': '2026-12-02T01:25:07.854Z', "
        "'action': 'fyi'}, 'hi\\n')\n"
        "assert parse_frontmatter(doc)[0]['action'] == 'fyi'\n"
        "cfg = 'version: 1\\nsides: [claude, olu]\\nhumans: {}\\nnotify: []\\ngroup: null\\n'\n"
        "assert load_yaml(cfg)['sides'] == ['claude', 'olu']\n"
        "print('yaml' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stderr

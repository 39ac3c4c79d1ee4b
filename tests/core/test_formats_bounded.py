"""Parsing a file someone else wrote is bounded in time and memory, whatever the YAML inside.

Every call returns a small value or raises a ``MailslotError``: no alias bomb expands, no nesting
recurses without end, no number Python refuses escapes as a ``ValueError``, and no message quotes
a value whole. A hang fails the test through pytest-timeout; memory is checked by counting the
nodes of what came back (an alias bomb parses in microseconds and explodes when walked).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailslot.core.display import brief
from mailslot.core.errors import FormatError, MailslotError
from mailslot.core.formats import MAX_DEPTH, MAX_NODES, load_yaml, parse_frontmatter


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The ~500-byte "billion laughs": each level lists the one before ``width`` times."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def node_count(value: object, cap: int) -> int:
    """Nodes in ``value``, counting shared ones each time they are reached; stops past ``cap``."""
    seen = 0
    stack = [value]
    while stack and seen <= cap:
        v = stack.pop()
        seen += 1
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple | set | frozenset):
            stack.extend(v)
    return seen


def test_an_alias_bomb_is_refused_by_name() -> None:
    bomb = alias_bomb()
    assert len(bomb) < 600
    with pytest.raises(FormatError, match="anchors"):
        load_yaml(bomb)
    with pytest.raises(FormatError, match="anchors"):
        parse_frontmatter(f"---\nfrom: claude\n{bomb}---\nbody\n")


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("a: *x\n", "alias"),
        ("a: &x 1\nb: *x\n", "anchors"),
        ("a: " + "[" * 5000 + "\n", "nested"),
        ("a: " + "{b: " * 100 + "1" + "}" * 100 + "\n", "nested"),
        ("a: [" + ", ".join(["1"] * (MAX_NODES + 1)) + "]\n", "nodes"),
        ("a: " + "7" * 5000 + "\n", "integer"),
        ("a: !!timestamp 2026-13-40\n", "month"),
        ("? [1, 2]\n: x\n", "plain value"),
        ("a: !!python/object/apply:os.system [true]\n", "constructor"),
    ],
)
def test_hostile_yaml_is_a_format_error(text: str, word: str) -> None:
    with pytest.raises(FormatError, match=word) as info:
        load_yaml(text)
    assert len(str(info.value)) < 400  # the complaint quotes nothing whole


def test_plain_depth_and_size_within_bounds_still_read() -> None:
    nested = "a: " + "[" * (MAX_DEPTH - 2) + "1" + "]" * (MAX_DEPTH - 2) + "\n"
    assert load_yaml(nested)["a"]
    assert load_yaml("tags: [" + ", ".join(["t"] * 500) + "]\n")["tags"] == ["t"] * 500


def test_brief_names_values_it_would_not_quote_whole() -> None:
    assert brief("done") == "'done'"
    assert len(brief("x" * 1_000_000)) < 100
    assert "1000000 characters" in brief("x" * 1_000_000)
    assert brief(10**5000) == f"an integer of {(10**5000).bit_length()} bits"
    assert brief(["a"] * 10) == "a list of 10 items"
    assert brief("\x1b[2J") == "'\\x1b[2J'"


_SCALARS = st.sampled_from(
    ["x", "1", "0x1F", "1e9999", "-.inf", "~", "yes", "2026-11-29T18:14:00Z", '"q"', "'s'", "|"]
) | st.text(alphabet="ab1:-#&*!|>[]{},'\" ", max_size=12)
_TAGS = st.sampled_from(
    ["", "!!str ", "!!int ", "!!binary ", "!!set ", "!!omap ", "!!python/name:os.system ", "!x "]
)


def _node(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda xs: "[" + ", ".join(xs) + "]", st.lists(children, max_size=6)),
        st.builds(
            lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}",
            st.lists(st.tuples(_SCALARS, children), max_size=4),
        ),
        st.builds(lambda a, c: f"&{a} {c}", st.sampled_from("abc"), children),
        st.builds(lambda a: f"*{a}", st.sampled_from("abc")),
        st.builds(lambda t, c: t + c, _TAGS, children),
        st.builds(lambda c: "{<<: " + c + ", k: v}", children),
    )


_VALUES = st.recursive(_SCALARS, _node, max_leaves=40)
_DOCS = st.one_of(
    st.lists(
        st.tuples(st.sampled_from(["from", "at", "action", "status", "<<", "a"]), _VALUES)
    ).map(lambda kv: "".join(f"{k}: {v}\n" for k, v in kv)),
    st.builds(alias_bomb, st.integers(1, 12), st.integers(1, 12)),
    st.builds(lambda n: "a: " + "[" * n + "]" * n + "\n", st.integers(0, 3000)),
    st.builds(lambda n, c: f"a: {c * n}\n", st.integers(0, 300_000), st.sampled_from("x9[&")),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_DOCS, fenced=st.booleans())
@pytest.mark.timeout(300)
def test_any_yaml_returns_small_or_raises_a_mailslot_error(doc: str, fenced: bool) -> None:
    try:
        if fenced:
            value: object = parse_frontmatter(f"---\n{doc}---\nbody\n")[0]
        else:
            value = load_yaml(doc)
    except MailslotError as e:
        assert len(str(e)) < 1000
        return
    assert node_count(value, 4 * MAX_NODES) <= 2 * MAX_NODES

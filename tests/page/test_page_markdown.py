"""Entry bodies rendered as markdown: whatever the text, the HTML holds only plain formatting,
links to http(s)/mailto or this page, and nothing that loads, runs or calls out."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from mailslot.web.page.markdown import RENDER_MAX_CHARS, render_markdown

TAGS = {"p", "a", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "hr", "br"}
TAGS |= {f"h{i}" for i in range(1, 7)}
ATTRS = {"href", "rel", "referrerpolicy", "start", "class", "title"}


class _Shape(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs += attrs


def _check(body: str) -> None:
    shape = _Shape()
    shape.feed(render_markdown(body))
    assert shape.tags <= TAGS, shape.tags - TAGS
    for name, value in shape.attrs:
        assert name in ATTRS, name
        if name == "href":
            scheme = urlsplit((value or "").strip()).scheme.lower()
            assert scheme in ("", "http", "https", "mailto"), value
        if name == "class":
            assert (value or "").startswith("language-"), value


VECTORS = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "![beacon](https://evil.example/b.png)",
    "[a](javascript:alert(1))",
    "[a](JaVaScRiPt:alert(1))",
    "[a](&#106;avascript:alert(1))",
    "[a](java\tscript:alert(1))",
    "[a](data:text/html;base64,PHNjcmlwdD4=)",
    "[a](vbscript:msgbox)",
    "[x]: javascript:alert(1)\n\n[x]",
    '<http://a.b/"onmouseover="x>',
    "```html\n<script>alert(1)</script>\n```",
    '<svg onload="alert(1)">',
    "[a](https://ok.example \"title\" onclick='x')",
]


def test_known_hostile_bodies_render_inert() -> None:
    for body in VECTORS:
        _check(body)
    assert "<img" not in render_markdown("![b](https://evil.example/b.png)")
    assert "noreferrer" in render_markdown("[a](https://ok.example)")


_ALPHABET = st.sampled_from(
    [*"<>\"'`()[]!:/\\ \n\t&#;=-*_", "javascript", "data", "script", "on", "img", "src"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_any_body_renders_to_plain_formatting_only(body: str) -> None:
    _check(body)


def test_a_body_too_long_to_parse_is_shown_as_escaped_text() -> None:
    html = render_markdown("<b>" + "x" * RENDER_MAX_CHARS)
    assert html.startswith("<pre>&lt;b&gt;") and "<b>" not in html

"""Entry bodies as HTML: markdown with raw HTML disabled, and nothing a body says can run or call
out.

* ``html`` is off, so ``<script>``, ``<img onerror=...>`` and every other tag in a body is text.
* Images are not rendered (``![x](https://host/beacon)`` would make every reader's browser fetch
  the writer's URL, telling them who read it and when); the rule is disabled, so the syntax
  shows as text with a plain link. The page's CSP (``img-src 'self'``) stops it a second time.
* Links keep only ``http``, ``https`` and ``mailto`` targets (``javascript:``, ``data:``,
  ``vbscript:`` and anything else is shown as text), open nothing in the page's context
  (``rel="noopener noreferrer nofollow"``) and send no referrer.
* A body is bounded before it is parsed (the exchange caps an entry; the page caps what it
  renders again, so a hand-written file cannot make the renderer work without end).
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import urlsplit

__all__ = ["RENDER_MAX_CHARS", "render_markdown"]

# An entry is at most 64 KiB (``exchange.entries``); a hand-written file may be larger. Past
# this the body is shown as plain text, never parsed.
RENDER_MAX_CHARS = 256 * 1024
_SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def _safe_link(url: str) -> bool:
    scheme = urlsplit(url.strip()).scheme.lower()
    return scheme in _SAFE_SCHEMES or (scheme == "" and not url.strip().startswith("//"))


@cache
def _renderer() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = _safe_link  # type: ignore[method-assign]

    def link_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        tokens[idx].attrSet("referrerpolicy", "no-referrer")
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(body: str) -> str:
    """``body`` as safe HTML (see the module docstring); over ``RENDER_MAX_CHARS``, as escaped
    plain text in a ``<pre>``."""
    if len(body) > RENDER_MAX_CHARS:
        import html

        return f"<pre>{html.escape(body)}</pre>"
    return str(_renderer().render(body))

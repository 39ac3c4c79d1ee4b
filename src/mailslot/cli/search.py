"""``mailslot search``: a thin face over ``mailslot.search`` (parse, one call, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mailslot.cli.helpers import emit, json_option, roots_given, roots_option
from mailslot.cli.shown import shown_line
from mailslot.defaults import SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX

__all__ = ["search"]


def _marked(snippet: str, marks: list[list[int]]) -> str:
    """The snippet on one line, escaped, with each matched span in ``[...]``."""
    out, at = [], 0
    for start, end in marks:
        out += [shown_line(snippet[at:start]), "[", shown_line(snippet[start:end]), "]"]
        at = end
    out.append(shown_line(snippet[at:]))
    return "".join(out)


def _text(data: dict[str, Any]) -> str:
    if "reindexed" in data:
        lines = [
            f"{r['root']}: {r['total']} messages indexed ({', '.join(r['channels'])})"
            for r in data["reindexed"]
        ]
        lines += [f"  problem: {shown_line(p)}" for r in data["reindexed"] for p in r["problems"]]
        return "\n".join(lines)
    hits = data["hits"]
    if not hits:
        return "no match"
    blocks = []
    for h in hits:
        head = "  ".join(
            shown_line(x)
            for x in (h["channel"], h["thread"], h["name"], h["sender"] or "?", h["at"] or "-")
        )
        where = shown_line(h["location"])  # absolute: it opens from any directory
        blocks.append(f"{head}\n  {where}\n  | {_marked(h['snippet'], h['marks'])}")
    return "\n".join(blocks)


@click.command("search")
@click.argument("query", required=False)
@roots_option(
    "A root to search (repeat for several; default: the global --root, MAILSLOT_ROOT, "
    "else the current directory)."
)
@click.option(
    "--limit",
    default=SEARCH_LIMIT_DEFAULT,
    show_default=True,
    help=f"The most hits to show (1-{SEARCH_LIMIT_MAX}).",
)
@click.option("--reindex", is_flag=True, help="Delete the roots' indexes and build them again.")
@json_option
@click.pass_context
def search(
    ctx: click.Context,
    query: str | None,
    roots: tuple[Path, ...],
    limit: int,
    reindex: bool,
    as_json: bool,
) -> None:
    """Search every message under the roots: exchange entries, chat messages,
    LOG.md lines and peer inbox messages, best match first.

    \b
    QUERY: words (all must appear), "a phrase", prefix*, -excluded,
    from:NAME (the sender, by transport), in:exchange|chat|log|peer.
    The index is a private copy in the state directory, brought up to date
    before each search; the files stay the truth (--reindex rebuilds it).
    Examples:
      mailslot search 'gate token' --root /srv/exchange --root /srv/bus
      mailslot search '"rollout plan" from:olu in:exchange' --json
      mailslot search --reindex --root /srv/exchange
    """
    from mailslot import search as s
    from mailslot.core.errors import InvalidValue

    paths = roots_given(ctx, roots)
    if reindex:
        if query is not None:
            raise click.UsageError("--reindex takes no QUERY")
        done = [s.reindex(p)._asdict() for p in paths]
        emit({"reindexed": done}, as_json, _text)
        return
    if query is None:
        raise InvalidValue("what to search for? give a QUERY (or --reindex)")
    hits = s.search(paths, query, limit=limit)
    emit({"roots": [str(p) for p in paths], "hits": [h.to_json() for h in hits]}, as_json, _text)

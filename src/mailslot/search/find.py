"""The search operations every face calls: ``search``, ``refresh`` and ``reindex``.

``search(roots, query)`` brings each root's index up to date (``fresh=True``; a caller that keeps
the index current itself passes ``False``), runs the parsed query against each and returns the
best hits over all roots. ``refresh(root)`` is the incremental update on its own (cheap when
nothing changed: no file is read); ``reindex(root)`` deletes the index and builds it again from
the files, which are the truth.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from mailslot.core.errors import LimitExceeded, NotFound
from mailslot.defaults import SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX
from mailslot.search.hit import Hit
from mailslot.search.query import parse_query
from mailslot.search.sources import Refreshed, channels_at, refresh_index
from mailslot.search.store import Index, index_path, sqlite_errors

__all__ = ["LIMIT_DEFAULT", "LIMIT_MAX", "refresh", "reindex", "search"]

# A screenful of hits, and more than anyone reads (the cost of snippets grows with each one).
LIMIT_DEFAULT = SEARCH_LIMIT_DEFAULT
LIMIT_MAX = SEARCH_LIMIT_MAX


def _root(root: Path | str) -> Path:
    return Path(root).expanduser().absolute()


def _channels(root: Path, skip_empty: bool) -> tuple[str, ...]:
    try:
        return channels_at(root)
    except NotFound:
        if skip_empty and root.is_dir():
            return ()
        raise


def refresh(
    root: Path | str, *, base: Path | None = None, topics: Collection[str] | None = None
) -> Refreshed:
    """Index what changed under ``root`` since the last refresh; ``NotFound`` if ``root`` holds
    nothing to search. ``base`` is the state directory (default: the user's). ``topics``: of
    an exchange, only these topics may have changed (``sources.refresh_index``)."""
    root = _root(root)
    channels = channels_at(root)
    with sqlite_errors(index_path(root, base)), Index(root, base=base) as index:
        return refresh_index(index, channels, topics=topics)


def reindex(root: Path | str, *, base: Path | None = None) -> Refreshed:
    """Delete ``root``'s index and build it again from its files; ``NotFound`` as ``refresh``."""
    root = _root(root)
    channels = channels_at(root)
    path = index_path(root, base)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with sqlite_errors(path), Index(root, base=base) as index:
        return refresh_index(index, channels)


def search(
    roots: Iterable[Path | str],
    query: str,
    *,
    limit: int = LIMIT_DEFAULT,
    fresh: bool = True,
    base: Path | None = None,
    skip_empty: bool = False,
) -> list[Hit]:
    """The best ``limit`` messages matching ``query`` under ``roots``, best first.

    ``InvalidValue``/``LimitExceeded`` for a query outside the language or its bounds (see
    ``search.query``), ``LimitExceeded`` for ``limit`` outside 1..``LIMIT_MAX``, ``NotFound``
    for a root that holds nothing to search (with ``skip_empty``, such a root is passed over
    unless none is left). Every check is made before any index is touched.
    """
    if not 1 <= limit <= LIMIT_MAX:
        raise LimitExceeded(
            "the number of hits", LIMIT_MAX if limit > 0 else 1, limit, minimum=limit < 1
        )
    q = parse_query(query)
    found = [(r, _channels(r, skip_empty)) for r in dict.fromkeys(_root(r) for r in roots)]
    hits: list[Hit] = []
    if skip_empty:  # roots that hold nothing yet (a chat directory before its first chat)
        found = [(r, c) for r, c in found if c]
        if not found:
            raise NotFound("none of the roots holds anything to search yet")
    for root, channels in found:
        with sqlite_errors(index_path(root, base)), Index(root, base=base) as index:
            if fresh:
                refresh_index(index, channels)
            hits += index.query(q, limit)
    hits.sort(key=lambda h: h.score)
    return hits[:limit]

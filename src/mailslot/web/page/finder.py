"""The page's search: indexes kept current by file events, so a search reads the index only.

A search that brings every index up to date itself (``search(fresh=True)``) costs one ``lstat``
per topic directory on every request (over 100 ms at 12,000 topics). The page instead runs
``mailslot.search.follow`` in a thread for as long as it serves, and searches with
``fresh=False``. Until the follower has refreshed a root once, a search refreshes that root
itself; after a write made through the page, the next search refreshes every root, so what a
person just wrote is found at once. A write made elsewhere is found once its file event has
been taken (a few tens of milliseconds; at the latest the follower's rescan).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from mailslot.core.errors import MailslotError
from mailslot.search import Hit, Refreshed, follow, refresh, search

__all__ = ["PageSearch"]

log = logging.getLogger(__name__)


class PageSearch:
    """Search over ``roots`` with a follower thread; ``close`` stops it and waits for it."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [Path(r).expanduser().absolute() for r in roots]
        self._lock = threading.Lock()
        self._followed: set[str] = set()  # roots the follower has refreshed at least once
        self._written = False  # a write through the page since the last search
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=follow,
            args=(self.roots, self._stop),
            kwargs={"on_refresh": self._refreshed},
            name="page-search",
            daemon=True,
        )
        self._thread.start()

    def _refreshed(self, report: Refreshed) -> None:
        with self._lock:
            self._followed.add(report.root)

    def written(self) -> None:
        """A write went through the page: the next search must see it."""
        with self._lock:
            self._written = True

    def find(self, query: str, limit: int) -> list[Hit]:
        """The best ``limit`` hits for ``query`` (``search``'s errors, as it raises them)."""
        with self._lock:
            fresh, self._written = self._written, False
            behind = [r for r in self.roots if str(r) not in self._followed]
        if not fresh:
            for root in behind:  # not yet refreshed by the follower: bring it up to date here
                try:
                    refresh(root)
                except MailslotError:  # nothing to search there yet; search says so
                    pass
        return search(self.roots, query, limit=limit, fresh=fresh, skip_empty=True)

    def close(self) -> None:
        """Stop the follower and wait for it (it ends within a second of a refresh)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

"""The page's search: indexes kept current by file events, and brought up to date before each
answer with whatever changed since the last one.

A search that brings every index up to date itself (``search(fresh=True)``) costs one ``lstat``
per topic directory on every request (over 100 ms at 12,000 topics). The page instead runs
``mailslot.search.follow`` in a thread for as long as it serves, so the indexes are current
ahead of the searches, and searches with ``fresh=False``. So that a search made right after a
message lands never misses it (the follower takes its event and refreshes a few tens of
milliseconds later), the search keeps watches of its own on the same directories
(``search.watch_paths``, armed before each refresh) and, before it answers, refreshes what had
events since its last answer (``search.changed_topics``: of an exchange, only the topics whose
directories had them); a root whose events are not known (events lost, or polling) is
refreshed whole every time. After a write made through the page, every root is refreshed
(the watches cover the newest ``search.WATCH_TOPICS_MAX`` topics of an exchange). A write to an
older topic made elsewhere is found at the follower's rescan.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from mailslot.core.errors import MailslotError
from mailslot.core.wait import Watch
from mailslot.search import Hit, changed_topics, follow, refresh, search, watch_paths

__all__ = ["PageSearch"]

log = logging.getLogger(__name__)


class PageSearch:
    """Search over ``roots`` with a follower thread; ``close`` stops it and waits for it."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [Path(r).expanduser().absolute() for r in roots]
        self._lock = threading.Lock()  # the watch and the refreshes before an answer
        self._watch = Watch()
        # refreshed before the next answer: root -> the topics that changed (None: anything)
        self._stale: dict[Path, set[str] | None] = dict.fromkeys(self.roots)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=follow, args=(self.roots, self._stop), name="page-search", daemon=True
        )
        self._thread.start()

    def written(self) -> None:
        """A write went through the page: the next search must see it."""
        with self._lock:
            self._stale.update(dict.fromkeys(self.roots))

    def find(self, query: str, limit: int) -> list[Hit]:
        """The best ``limit`` hits for ``query`` (``search``'s errors, as it raises them), with
        what changed since the last search refreshed first."""
        with self._lock:
            stale, self._stale = self._stale, {}
            changes = self._watch.take_changes()
            for root, topics in changed_topics(self.roots, changes, self._watch).items():
                _add_stale(stale, root, topics)
            try:
                for root, topics in list(stale.items()):
                    for path in watch_paths(root) if topics is None else ():
                        self._watch.add(path)  # armed before the refresh: nothing lands unseen
                    try:
                        refresh(root, topics=topics)
                    except MailslotError:  # nothing to search there yet (search says so), or
                        continue  # not refreshed: kept for the next answer
                    del stale[root]
            finally:  # what was not refreshed is refreshed before the next answer
                for root, topics in stale.items():
                    _add_stale(self._stale, root, topics)
        return search(self.roots, query, limit=limit, fresh=False, skip_empty=True)

    def close(self) -> None:
        """Stop the follower and wait for it (it ends within a second of a refresh)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            self._watch.close()


def _add_stale(stale: dict[Path, set[str] | None], root: Path, topics: set[str] | None) -> None:
    """Add ``topics`` of ``root`` (None: anything in it) to what ``stale`` holds to refresh."""
    before = stale.get(root, set())  # None: the whole root already
    stale[root] = None if before is None or topics is None else before | topics

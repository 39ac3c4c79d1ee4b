"""mailslot.search: one full-text search over every message of every channel.

Exchange entries, chat messages, LOG.md lines and peer inbox messages, found by shape under the
roots given, are copied into a per-root SQLite FTS5 index in the reader's state directory and
searched there. The files stay the truth: the index is read from them through each channel's
own reader, kept current incrementally (``refresh``), and rebuilt whole by ``reindex`` (or by
deleting it). Search sits beside the faces' use of the channels: it imports channels, and faces
(``mailslot search``, the MCP ``search`` tool, the page) import it.

* ``query``   -- the small query language, made into safe FTS5 (user text is never FTS5 syntax);
* ``store``   -- the index database (``Index``), private, rebuilt when unusable;
* ``sources`` -- what a root holds and the incremental refresh (``Refreshed``);
* ``hit``     -- ``Hit`` (a match, with its link) and ``Doc`` (a message as indexed);
* ``find``    -- ``search``, ``refresh``, ``reindex``;
* ``events``  -- ``follow``: refresh on kernel file events, for a long-running face (and
  ``watch_paths``, the directories it watches).
"""

from __future__ import annotations

from mailslot.search.events import WATCH_TOPICS_MAX, changed_topics, follow, watch_paths
from mailslot.search.find import LIMIT_DEFAULT, LIMIT_MAX, refresh, reindex, search
from mailslot.search.hit import Hit
from mailslot.search.query import CHANNELS, parse_query
from mailslot.search.sources import Refreshed

__all__ = [
    "CHANNELS",
    "LIMIT_DEFAULT",
    "LIMIT_MAX",
    "WATCH_TOPICS_MAX",
    "Hit",
    "Refreshed",
    "changed_topics",
    "follow",
    "parse_query",
    "refresh",
    "reindex",
    "search",
    "watch_paths",
]

"""Keeping indexes current from kernel file events, for a long-running face (the page).

``follow(roots, stop)`` arms watches on what each root holds (the root itself, which sees chats
and ``LOG.md`` being appended to; the exchange's inboxes, their ``done/`` and its topic
directories; the peer inbox and ``processed/``), refreshes every root, then blocks until an event
arrives and refreshes again. Watches are armed before each refresh, so a message landing during
one is never missed: its event is already queued. Events are hints: each one triggers the same
incremental ``refresh`` a search does, never a reading of the event itself.

Bounded: at most ``WATCH_TOPICS_MAX`` topic directories are watched (beyond that the kernel's
watch limit, or polling, would cost more than it saves), and every root is refreshed at least
every ``RESCAN_SECONDS`` whatever the events say, which also covers the topics not watched. A
burst of writes is taken in one refresh (``SETTLE_SECONDS``). Searches then pass ``fresh=False``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from mailslot.core.errors import MailslotError
from mailslot.core.wait import Watch
from mailslot.defaults import peer_inbox
from mailslot.search.find import refresh
from mailslot.search.sources import EXCHANGE, PEER, Refreshed, channels_at

__all__ = ["RESCAN_SECONDS", "WATCH_TOPICS_MAX", "follow", "watch_paths"]

log = logging.getLogger(__name__)

# Topic directories watched per root; an inotify watch costs ~1 KB of kernel memory and the
# default per-user limit is often 8,192 (shared with every other watcher of that user).
WATCH_TOPICS_MAX = 2000
# Every root is refreshed at least this often: events can be lost (a full kernel queue, a topic
# not watched, a filesystem that sends none), and a refresh that finds nothing costs little.
RESCAN_SECONDS = 5.0
# After an event, wait this long for the rest of its burst before refreshing.
SETTLE_SECONDS = 0.02


def watch_paths(root: Path) -> list[Path]:
    """The directories whose events may mean a new message under ``root``."""
    out = [root]
    try:
        found = channels_at(root)
    except MailslotError:
        return out
    if EXCHANGE in found:
        from mailslot.exchange.layout import DONE, load_exchange
        from mailslot.exchange.listing import topic_names

        try:
            ex = load_exchange(root)
        except MailslotError:
            return out
        topics: list[Path] = []
        for side in ex.sides:
            inbox = ex.inbox(side)
            out += [inbox, inbox / DONE]
            topics += [inbox / n for n in topic_names(inbox)]
        out += sorted(topics, key=lambda p: p.name, reverse=True)[:WATCH_TOPICS_MAX]  # newest
    if PEER in found:
        inbox = peer_inbox(root)
        out += [inbox, inbox / "processed"]
    return out


def follow(
    roots: Iterable[Path | str],
    stop: threading.Event,
    *,
    base: Path | None = None,
    on_refresh: Callable[[Refreshed], None] | None = None,
) -> None:
    """Refresh the indexes of ``roots`` on file events until ``stop`` is set; never raises for
    a root that cannot be indexed (tried again on the next event and rescan; logged once, and
    again when what it says changes or the root refreshes again)."""
    paths = [Path(r).expanduser().absolute() for r in roots]
    failing: dict[Path, str] = {}  # a root that does not refresh: what was last said of it
    with Watch() as watch:
        while not stop.is_set():
            for root in paths:
                for p in watch_paths(root):
                    watch.add(p)  # armed before the refresh: nothing lands unseen
            for root in paths:
                try:
                    report = refresh(root, base=base)
                except (MailslotError, OSError) as e:
                    if failing.get(root) != str(e):  # said once, and again when it changes
                        log.warning("search index of %s not refreshed: %s", root, e)
                        failing[root] = str(e)
                    continue
                if failing.pop(root, None) is not None:
                    log.warning("search index of %s refreshed again", root)
                if on_refresh is not None:
                    on_refresh(report)
            deadline = time.monotonic() + RESCAN_SECONDS
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0 or watch.wait(min(left, 0.5)):
                    break
            stop.wait(SETTLE_SECONDS)

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
burst of writes is taken in one refresh (``SETTLE_SECONDS``). An entry a refresh held back as
still being written (``Refreshed.held``) has its topic refreshed again when the refresh said
(``Refreshed.again``), and at once on its next event (its writer closing it). Searches then pass
``fresh=False``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

from mailslot.core.errors import MailslotError
from mailslot.core.wait import Watch
from mailslot.defaults import peer_inbox
from mailslot.search.find import refresh
from mailslot.search.sources import EXCHANGE, PEER, Refreshed, channels_at

__all__ = ["RESCAN_SECONDS", "WATCH_TOPICS_MAX", "changed_topics", "follow", "watch_paths"]

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


# Names in a root whose events may mean a channel to watch anew (an exchange, a peer inbox).
_NEW = frozenset({".mailslot", peer_inbox(Path()).parts[0]})


def changed_topics(
    roots: Iterable[Path],
    changes: Mapping[Path, Collection[str] | None] | None,
    watch: Watch | None = None,
) -> dict[Path, set[str] | None]:
    """What to refresh after ``changes`` (``Watch.take_changes`` on the directories
    ``watch_paths`` names; None: not known): for each root with events, the exchange topics
    they name, or None to refresh the root whole. A root without events is left out.

    A topic directory's events name its topic; an inbox's or ``done/``'s name the topics that
    appeared, moved or went, each armed on ``watch`` (before the refresh that reads it). The
    root's and the peer inbox's name no topic (an empty set: chats, ``LOG.md`` and the peer
    inbox are looked at on every refresh). What else had events, events about a directory
    itself, or a new inbox, ``done/``, exchange or peer inbox refreshes the root whole (and
    arms its directories again).
    """
    from mailslot.core.names import TOPIC_RE
    from mailslot.exchange.layout import DONE

    out: dict[Path, set[str] | None] = {}
    for root in roots:
        if changes is None:
            out[root] = None
            continue
        for path, names in changes.items():
            if path != root and not path.is_relative_to(root):
                continue
            topics = out.setdefault(root, set())
            if topics is None:
                continue
            parts = path.relative_to(root).parts
            inbox = bool(parts) and parts[0].startswith("to-")
            listing = inbox and (len(parts) == 1 or (len(parts) == 2 and parts[1] == DONE))
            if inbox and not listing and len(parts) == 2 + (parts[1] == DONE):
                topics.add(parts[-1])  # a topic directory: its own topic
            elif listing and names is not None and DONE not in names:
                for name in names:
                    if TOPIC_RE.fullmatch(name):
                        topics.add(name)
                        if watch is not None:
                            watch.add(path / name)
            elif inbox or names is None or any(n.startswith("to-") or n in _NEW for n in names):
                out[root] = None  # a listing not known, a new inbox, done/ or channel
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
    again when what it says changes or the root refreshes again).

    Each rescan refreshes every root whole; between rescans, the events say which roots to
    refresh and, of an exchange, which topics (``changed_topics``)."""
    paths = [Path(r).expanduser().absolute() for r in roots]
    failing: dict[Path, str] = {}  # a root that does not refresh: what was last said of it
    due: dict[Path, set[str] | None] = dict.fromkeys(paths)  # to refresh (None: whole)
    held: dict[Path, dict[str, float]] = {}  # topics with entries not whole yet: when to look
    rescan = 0.0
    with Watch() as watch:
        while not stop.is_set():
            if time.monotonic() >= rescan:
                due = dict.fromkeys(paths)
                rescan = time.monotonic() + RESCAN_SECONDS
            for root, topics in due.items():
                for p in watch_paths(root) if topics is None else ():
                    watch.add(p)  # armed before the refresh: nothing lands unseen
                try:
                    report = refresh(root, base=base, topics=topics)
                except (MailslotError, OSError) as e:
                    if failing.get(root) != str(e):  # said once, and again when it changes
                        log.warning("search index of %s not refreshed: %s", root, e)
                        failing[root] = str(e)
                    continue
                if failing.pop(root, None) is not None:
                    log.warning("search index of %s refreshed again", root)
                _note_held(held, root, topics, report)
                if on_refresh is not None:
                    on_refresh(report)
            due = {}
            while not stop.is_set() and not due:
                now = time.monotonic()
                left = rescan - now
                if left <= 0:
                    break
                soonest = min((t for h in held.values() for t in h.values()), default=None)
                if soonest is not None and soonest <= now:
                    due = _held_due(held, now)
                    break
                if soonest is not None:
                    left = min(left, soonest - now)
                if watch.wait(min(left, 0.5)):
                    stop.wait(SETTLE_SECONDS)  # the rest of the burst, taken with it
                    due = changed_topics(paths, watch.take_changes(), watch)


def _note_held(
    held: dict[Path, dict[str, float]],
    root: Path,
    topics: Collection[str] | None,
    report: Refreshed,
) -> None:
    """Keep, for ``root``, which topics hold an entry not yet whole and when (monotonic) to
    look at each again, as the refresh of ``topics`` (None: all) reported."""
    mine = held.setdefault(root, {})
    for topic in list(mine) if topics is None else topics:
        mine.pop(topic, None)  # looked at just now: what the report says replaces it
    if report.again is not None:
        at = time.monotonic() + max(0.0, report.again - time.time())
        for path in report.held:
            mine[path.rsplit("/", 2)[-2]] = at
    if not mine:
        del held[root]


def _held_due(held: dict[Path, dict[str, float]], now: float) -> dict[Path, set[str] | None]:
    """The topics whose time to look again has come, by root."""
    return {
        root: {t for t, at in topics.items() if at <= now}
        for root, topics in held.items()
        if any(at <= now for at in topics.values())
    }

"""Keeping indexes current from kernel file events, for a long-running face (the page).

``follow(roots, stop)`` arms watches on what each root holds (the root itself, which sees chats
and ``LOG.md`` being appended to; the exchange's inboxes, their ``done/`` and its topic
directories; the peer inbox and ``processed/``), refreshes every root, then blocks until an event
arrives and refreshes again. Watches are armed before each refresh, so a message landing during
one is never missed: its event is already queued. Events are hints: each one triggers the same
incremental ``refresh`` a search does, never a reading of the event itself.

Events, not a timer: a root is refreshed only when its events say so. It is refreshed whole
when they cannot tell what changed -- the kernel queue overflowed, a directory could not be
watched (the inotify watch limit: ``core.wait`` polls it instead, and every wake is then taken
as "anything may have changed") -- and every ``RESCAN_SECONDS`` only while its events cannot
cover it: an exchange with more than ``WATCH_TOPICS_MAX`` topic directories (beyond that the
kernel's watch limit, or polling, would cost more than it saves; the rest are found at the
rescan), or a root that did not refresh. A burst of writes is taken in one refresh
(``SETTLE_SECONDS``). An entry a refresh held back as still being written (``Refreshed.held``)
has its topic refreshed again when the refresh said (``Refreshed.again``), and at once on its
next event (its writer closing it). Searches then pass ``fresh=False``.

What this cannot see: a filesystem that sends no events for writes made elsewhere (NFS from
another host): a message written there is found by a search that refreshes first
(``fresh=True``, as ``mailslot search`` does), not by the follower.
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
# A root whose events do not cover it all (topics beyond WATCH_TOPICS_MAX) or that did not
# refresh is refreshed whole this often; a root its events cover waits for them alone.
RESCAN_SECONDS = 5.0
# After an event, wait this long for the rest of its burst before refreshing.
SETTLE_SECONDS = 0.02


def watch_paths(root: Path) -> list[Path]:
    """The directories whose events may mean a new message under ``root``."""
    return _watch_set(root)[0]


def _watch_set(root: Path) -> tuple[list[Path], bool]:
    """``watch_paths``, and whether their events cover every message under ``root`` (False:
    topics beyond ``WATCH_TOPICS_MAX`` are left unwatched)."""
    out = [root]
    try:
        found = channels_at(root)
    except MailslotError:
        return out, True
    whole = True
    if EXCHANGE in found:
        from mailslot.exchange.layout import DONE, load_exchange
        from mailslot.exchange.listing import topic_names

        try:
            ex = load_exchange(root)
        except MailslotError:
            return out, True
        topics: list[Path] = []
        for side in ex.sides:
            inbox = ex.inbox(side)
            out += [inbox, inbox / DONE]
            topics += [inbox / n for n in topic_names(inbox)]
        whole = len(topics) <= WATCH_TOPICS_MAX
        out += sorted(topics, key=lambda p: p.name, reverse=True)[:WATCH_TOPICS_MAX]  # newest
    if PEER in found:
        inbox = peer_inbox(root)
        out += [inbox, inbox / "processed"]
    return out, whole


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
    a root that cannot be indexed (tried again on its next event and every ``RESCAN_SECONDS``;
    logged once, and again when what it says changes or the root refreshes again).

    Every root is refreshed whole first; then the events say which roots to refresh and, of
    an exchange, which topics (``changed_topics``); a root they do not cover all of is also
    refreshed whole every ``RESCAN_SECONDS``."""
    paths = [Path(r).expanduser().absolute() for r in roots]
    failing: dict[Path, str] = {}  # a root that does not refresh: what was last said of it
    due: dict[Path, set[str] | None] = dict.fromkeys(paths)  # to refresh (None: whole)
    held: dict[Path, dict[str, float]] = {}  # topics with entries not whole yet: when to look
    rescan: dict[Path, float] = {}  # roots events do not cover: when to refresh each whole
    polled = False  # said once: some directory is polled, every wake refreshes whole
    with Watch() as watch:
        while not stop.is_set():
            for root, topics in due.items():
                if topics is None:
                    armed, covered = _watch_set(root)
                    for p in armed:
                        watch.add(p)  # armed before the refresh: nothing lands unseen
                    rescan.pop(root, None)
                    if not covered:
                        rescan[root] = time.monotonic() + RESCAN_SECONDS
                    if watch.polling and not polled:
                        polled = True
                        log.warning(
                            "search: some directories cannot be watched (the inotify watch "
                            "limit?): polled, and every root refreshed whole on any change"
                        )
                try:
                    report = refresh(root, base=base, topics=topics)
                except (MailslotError, OSError) as e:
                    if failing.get(root) != str(e):  # said once, and again when it changes
                        log.warning("search index of %s not refreshed: %s", root, e)
                        failing[root] = str(e)
                    rescan[root] = time.monotonic() + RESCAN_SECONDS
                    continue
                if failing.pop(root, None) is not None:
                    log.warning("search index of %s refreshed again", root)
                _note_held(held, root, topics, report)
                if on_refresh is not None:
                    on_refresh(report)
            due = {}
            while not stop.is_set() and not due:
                now = time.monotonic()
                due = _due(rescan, held, now)
                if due:
                    break
                times = [*rescan.values(), *(t for h in held.values() for t in h.values())]
                left = min([0.5, *(t - now for t in times)])  # stop is looked at twice a second
                if watch.wait(left):
                    stop.wait(SETTLE_SECONDS)  # the rest of the burst, taken with it
                    due = changed_topics(paths, watch.take_changes(), watch)


def _due(
    rescan: dict[Path, float], held: dict[Path, dict[str, float]], now: float
) -> dict[Path, set[str] | None]:
    """What a clock says to refresh now: the roots whose rescan is due (whole), and the topics
    holding an entry not yet whole whose time to look again has come."""
    out: dict[Path, set[str] | None] = {}
    for root, topics in held.items():
        ready = {t for t, at in topics.items() if at <= now}
        if ready:
            out[root] = ready
    for root, at in rescan.items():
        if at <= now:
            out[root] = None
    return out


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

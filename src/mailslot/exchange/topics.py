"""Topics by name: where one topic lives (``TopicRef``), and what ``--topic X`` names.

Where topics are is ``listing``'s (live, archived, half-archived; symlinks skipped); this module
answers the questions commands ask by name: does topic X exist and where (``find_topic``), which
topic does a slug name (``named_topic``), and where does ``send --topic X`` write
(``resolve_topic``: an existing topic, else the newest live one with that slug, else a new one).
"""

from __future__ import annotations

from pathlib import Path

from mailslot.core.clock import now
from mailslot.core.errors import Conflict, InvalidName, NotFound
from mailslot.core.names import SLUG_RE, TOPIC_RE, topic_name, validate_topic
from mailslot.core.record import Record
from mailslot.exchange.layout import DONE, Exchange
from mailslot.exchange.listing import (
    ARCHIVED,
    HALF_ARCHIVED,
    linked,
    placement,
    real_dir,
    topic_names,
)

__all__ = [
    "TopicRef",
    "find_topic",
    "list_topics",
    "named_topic",
    "resolve_topic",
]


class TopicRef(Record):
    """Where one topic lives: for each inbox side, its directory and whether it is archived.

    A ``core.record`` record, not a dataclass: every send looks its topic up."""

    __match_args__ = ("name", "dirs", "archived", "duplicated")
    __slots__ = ("archived", "dirs", "duplicated", "name")
    name: str
    dirs: dict[str, Path]  # inbox side -> directory
    archived: dict[str, bool]  # inbox side -> under done/
    duplicated: list[str]  # inbox sides with both live and done

    def __init__(
        self,
        name: str,
        dirs: dict[str, Path] | None = None,
        archived: dict[str, bool] | None = None,
        duplicated: list[str] | None = None,
    ) -> None:
        self.name = name
        self.dirs = {} if dirs is None else dirs
        self.archived = {} if archived is None else archived
        self.duplicated = [] if duplicated is None else duplicated

    @property
    def status(self) -> str:
        """``live``, ``archived`` or ``half-archived`` (``listing.placement``)."""
        return placement(self.archived.values())

    @property
    def live(self) -> bool:
        """Whether any side has it live (a half-archived topic counts as live)."""
        return self.status != ARCHIVED

    @property
    def half_archived(self) -> bool:
        """Live on one side and archived on the other."""
        return self.status == HALF_ARCHIVED


def list_topics(ex: Exchange, *, include_archived: bool = False) -> list[TopicRef]:
    """Every live topic (and archived ones if asked), sorted by name; never raises for layout."""
    refs: dict[str, TopicRef] = {}
    for side in ex.sides:
        inbox = ex.inbox(side)
        for name in topic_names(inbox / DONE):
            ref = refs.setdefault(name, TopicRef(name))
            ref.dirs[side] = inbox / DONE / name
            ref.archived[side] = True
        for name in topic_names(inbox):
            ref = refs.setdefault(name, TopicRef(name))
            if side in ref.dirs:
                ref.duplicated.append(side)
            ref.dirs[side] = inbox / name  # live wins over a stale copy in done/
            ref.archived[side] = False
    out = [r for _, r in sorted(refs.items()) if include_archived or r.live]
    return out


def find_topic(ex: Exchange, name: str) -> TopicRef | None:
    """The topic ``name`` (live or archived), or ``None`` if neither side has it."""
    validate_topic(name)
    ref = TopicRef(name)
    for side in ex.sides:
        inbox = ex.inbox(side)
        for path, archived in ((inbox / DONE / name, True), (inbox / name, False)):
            if real_dir(path) and linked(path.parent) is None:
                if side in ref.dirs:
                    ref.duplicated.append(side)
                ref.dirs[side] = path
                ref.archived[side] = archived
    return ref if ref.dirs else None


def _dated(name: str) -> bool:
    """Whether ``name``'s date is a real one (a hand-made ``2026-99-99-x`` names nothing)."""
    try:
        validate_topic(name)
    except InvalidName:
        return False
    return True


def _newest_with_slug(ex: Exchange, slug: str, *, archived_too: bool) -> str | None:
    """The newest live topic whose slug is ``slug``; with ``archived_too`` and none live, the
    newest archived one; ``None`` if there is none."""
    refs = [
        r
        for r in list_topics(ex, include_archived=archived_too)
        if r.name[11:] == slug and _dated(r.name)
    ]
    live = [r.name for r in refs if r.live]
    return max(live or [r.name for r in refs], default=None)


def named_topic(ex: Exchange, arg: str) -> str:
    """The topic ``arg`` names, for commands that act on an existing topic (read, state, reopen).

    A full ``YYYY-MM-DD-slug`` name is returned as given (the caller reports a missing one). A bare
    slug, as ``send --topic`` takes, names the newest live topic with that slug, else the newest
    archived one; ``NotFound`` if none has it, ``InvalidName`` if it is neither a name nor a slug.
    """
    if TOPIC_RE.fullmatch(arg):
        return arg
    if not SLUG_RE.fullmatch(arg):
        raise InvalidName(
            "topic", arg, "a topic YYYY-MM-DD-<slug> or the slug of one ([a-z0-9][a-z0-9-]{0,63})"
        )
    name = _newest_with_slug(ex, arg, archived_too=True)
    if name is not None:
        return name
    raise NotFound(f"no topic with the slug {arg} (mailslot exchange topics --all lists them)")


def resolve_topic(ex: Exchange, arg: str) -> tuple[str, bool]:
    """``(topic, exists)`` for ``--topic X``; ``InvalidName`` or ``Conflict``.

    An existing topic whose full name is X; else the newest live topic whose slug is X; else a
    new topic: X itself when it is a full ``YYYY-MM-DD-slug`` name, otherwise today's ``X``.
    An archived topic is refused (reopen it first), so nothing is written where nobody looks.
    """
    full = TOPIC_RE.fullmatch(arg)
    if full:
        validate_topic(arg)
        ref = find_topic(ex, arg)
        if ref is not None:
            _refuse_archived(ref)
            return arg, True
    if not SLUG_RE.fullmatch(arg):
        raise InvalidName(
            "topic", arg, "a slug ([a-z0-9][a-z0-9-]{0,63}) or a topic YYYY-MM-DD-<slug>"
        )
    newest = _newest_with_slug(ex, arg, archived_too=False)
    if newest is not None:
        return newest, True
    if full:
        return arg, False
    name = topic_name(arg, now())
    ref = find_topic(ex, name)
    if ref is not None:  # today's topic of that slug exists, archived: a new one would clash
        _refuse_archived(ref)
    return name, False


def _refuse_archived(ref: TopicRef) -> None:
    """``Conflict`` if ``ref`` is archived: nothing is written where nobody looks."""
    if not ref.live:
        raise Conflict(
            f"topic {ref.name} is archived; run 'mailslot exchange reopen {ref.name} --why ...' "
            "to write in it again"
        )

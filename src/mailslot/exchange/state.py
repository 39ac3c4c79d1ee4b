"""Per-side STATE.md: each side's own status for a topic, written only by that side.

``to-<other>/<topic>/STATE.md`` is the status of the side that writes ``to-<other>/``; neither
side ever writes the other's. It is plain YAML (``status``, ``tags``, ``updated_at``,
``updated_by``); a fenced one written by hand is read too. A missing STATE.md is ``open``, never
``done``. A STATE.md that cannot be read or parsed has status ``unknown``: nothing that depends on
it (the archive guard) can resolve, so nothing is archived.

``done`` is refused while the side's own newest entry is ``action: required`` and the other side
has not answered it (the side that raises ``required`` does not mark itself done).
``force`` overrides, and the override is recorded in the file and returned as a warning.
"""

from __future__ import annotations

import contextlib
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time, now, parse_time
from mailslot.core.display import brief
from mailslot.core.errors import Conflict, FormatError, InvalidName, LimitExceeded, NotFound
from mailslot.core.formats import dump_yaml, load_yaml, parse_frontmatter
from mailslot.core.fsio import atomic_write
from mailslot.core.record import FrozenRecord
from mailslot.exchange.entries import Entry, list_entries
from mailslot.exchange.index import owed_entry
from mailslot.exchange.layout import STATE_NAME, Exchange
from mailslot.exchange.safeio import read_regular
from mailslot.exchange.topics import find_topic, named_topic

__all__ = [
    "STATUSES",
    "SideState",
    "StateResult",
    "parse_state",
    "read_state",
    "set_state",
    "unanswered_required",
]

STATUSES = ("open", "in-progress", "blocked", "done")
TAG_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")
MAX_TAGS = 20


class SideState(FrozenRecord):
    """One side's status for a topic; ``present`` false means no STATE.md (implicitly open)."""

    __match_args__ = ("side", "status", "present", "tags", "updated_at", "updated_by", "error")
    __slots__ = ("error", "present", "side", "status", "tags", "updated_at", "updated_by")
    side: str
    status: str
    present: bool
    tags: tuple[str, ...]
    updated_at: datetime | None
    updated_by: str | None
    error: str | None  # why the file or one of its fields did not read

    def __init__(
        self,
        side: str,
        status: str = "open",
        present: bool = False,
        tags: tuple[str, ...] = (),
        updated_at: datetime | None = None,
        updated_by: str | None = None,
        error: str | None = None,
    ) -> None:
        init = object.__setattr__
        init(self, "side", side)
        init(self, "status", status)
        init(self, "present", present)
        init(self, "tags", tags)
        init(self, "updated_at", updated_at)
        init(self, "updated_by", updated_by)
        init(self, "error", error)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "side": self.side,
            "status": self.status,
            "present": self.present,
            "tags": list(self.tags),
            "updated_at": format_time(self.updated_at) if self.updated_at else None,
            "updated_by": self.updated_by,
            "error": self.error,
        }


def parse_state(text: bytes | str, side: str, path: Path | None = None) -> SideState:
    """Parse STATE.md text (plain YAML or fenced); never raises: problems land in ``error``."""
    try:
        raw = text.decode("utf-8") if isinstance(text, bytes) else text
        if raw.lstrip("\ufeff").startswith("---"):
            data, _ = parse_frontmatter(raw, path=path)
        else:
            data = load_yaml(raw, path=path)
    except (FormatError, UnicodeDecodeError) as e:
        return SideState(side, "unknown", True, error=str(e))
    status = data.get("status")
    if status not in STATUSES:
        bad = f"status must be one of {', '.join(STATUSES)}, got {brief(status)}"
        if isinstance(status, str) and status.strip().lower() in STATUSES:
            bad += f" (statuses are lowercase: write {status.strip().lower()!r})"
        return SideState(side, "unknown", True, error=bad)
    tags_raw = data.get("tags") or []
    tags = tuple(str(t) for t in tags_raw) if isinstance(tags_raw, list) else (str(tags_raw),)
    by = data.get("updated_by")
    error = None
    updated_at: datetime | None = None
    try:
        updated_at = parse_time(
            data.get("updated_at"), field="updated_at", path=str(path) if path else None
        )
    except FormatError as e:
        error = str(e)
    return SideState(side, str(status), True, tags, updated_at, str(by) if by else None, error)


def state_path(ex: Exchange, topic: str, side: str) -> Path | None:
    """Where ``side``'s STATE.md for ``topic`` is (live or archived); ``None`` if no such dir."""
    ref = find_topic(ex, topic)
    if ref is None:
        return None
    directory = ref.dirs.get(ex.other(side))
    return directory / STATE_NAME if directory is not None else None


def read_state_file(path: Path | None, side: str) -> SideState:
    """Read one STATE.md; missing means open, unreadable means ``unknown`` with the reason."""
    if path is None:
        return SideState(side)
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return SideState(side)
    except OSError as e:
        return SideState(side, "unknown", True, error=f"unreadable: {e.strerror}")
    return parse_state(raw, side, path)


def read_state(ex: Exchange, topic: str, side: str) -> SideState:
    """``side``'s status for ``topic`` (open if it never wrote one); ``NotFound`` for bad side."""
    return read_state_file(state_path(ex, topic, side), side)


def unanswered_required(entries: list[Entry], side: str) -> Entry | None:
    """``side``'s newest ``action: required`` entry if nothing the other side wrote arrived
    after it (``index.owed_entry``: arrival order, never number alone).

    A later ``fyi`` P.S. from the same side does not answer it (the debt rule), and
    neither does the other side's same-numbered entry written before it.
    """
    mine = {e.name: e for e in entries if e.side == side}  # one directory: names are unique
    replies = [e.arrival for e in entries if e.side != side]
    owed = owed_entry(
        (e.arrival for e in mine.values()),
        max(replies, default=None),
        lambda name: mine[name].action == "required",
    )
    return mine[owed[2]] if owed is not None else None


class StateResult(FrozenRecord):
    """A written STATE.md: where, what, and a warning when ``done`` was forced."""

    __match_args__ = ("topic", "path", "relpath", "state", "warning")
    __slots__ = ("path", "relpath", "state", "topic", "warning")
    topic: str
    path: Path
    relpath: str
    state: SideState
    warning: str | None

    def __init__(
        self, topic: str, path: Path, relpath: str, state: SideState, warning: str | None = None
    ) -> None:
        init = object.__setattr__
        init(self, "topic", topic)
        init(self, "path", path)
        init(self, "relpath", relpath)
        init(self, "state", state)
        init(self, "warning", warning)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "topic": self.topic,
            "path": self.relpath,
            **self.state.to_json(),
            "forced": self.warning is not None,
            "warning": self.warning,
        }


def _check_tags(tags: list[str]) -> tuple[str, ...]:
    if len(tags) > MAX_TAGS:
        raise LimitExceeded("tags", MAX_TAGS, len(tags))
    for t in tags:
        if not TAG_RE.fullmatch(t):
            raise InvalidName("tag", t, "1-40 characters of a-z 0-9 _ . -")
    return tuple(tags)


def set_state(
    ex: Exchange,
    agent: str,
    topic: str,
    status: str,
    *,
    tags: list[str] | None = None,
    force: bool = False,
) -> StateResult:
    """Write ``agent``'s side's STATE.md for a live ``topic``; ``Conflict``/``NotFound``/...

    Refuses ``done`` while the side's newest ``action: required`` entry is unanswered
    (``Conflict``) unless ``force``; tags outside their rule are ``InvalidName``.
    """
    side = ex.side_of(agent)
    if status not in STATUSES:
        raise InvalidName("status", status, f"one of {', '.join(STATUSES)}")
    topic = named_topic(ex, topic)  # a slug names the newest topic with it
    ref = find_topic(ex, topic)
    if ref is None:
        raise NotFound(f"no topic {topic}", path=ex.root)
    if not ref.live:
        raise Conflict(f"topic {topic} is archived; reopen it first")
    warning = None
    if status == "done":
        pending = unanswered_required(list_entries(ex, topic), side)
        if pending is not None:
            msg = (
                f"your side's entry {pending.name} is 'action: required' and "
                f"{ex.other(side)} has not answered it; the side that raises 'required' does not "
                "mark itself done"
            )
            if not force:
                raise Conflict(msg + " (--force overrides)")
            warning = "FORCED done: " + msg
    previous = read_state(ex, topic, side)
    tag_tuple = _check_tags(tags) if tags is not None else previous.tags
    inbox_side = ex.other(side)
    directory = ex.outbox(side) / topic
    if ref.archived.get(inbox_side):
        raise Conflict(f"topic {topic} is half-archived; the next tick settles it")
    made = ex.make_dir(directory, inbox_side)
    fields: dict[str, Any] = {
        "status": status,
        "tags": list(tag_tuple),
        "updated_at": format_time(now()),
        "updated_by": agent,
    }
    if warning:
        fields["forced"] = True
    path = directory / STATE_NAME
    try:
        atomic_write(path, dump_yaml(fields), mode=ex.file_mode(inbox_side))
    except BaseException:
        if made:  # a refused write leaves no empty topic folder behind
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    state = parse_state(path.read_bytes(), side, path)
    return StateResult(topic, path, str(path.relative_to(ex.root)), state, warning)

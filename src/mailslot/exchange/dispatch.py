"""Independent double review: one brief into several exchanges, one close-out to all of them.

Independence is the product: two agents given the same brief, neither shown the
other's answer, converged on the same defect -- the single most valuable signal, and it exists only
because neither saw the other. So every copy says plainly that another agent has the same questions
and must not be consulted. And "when the same defect is dispatched to both agents, the close-out
has to go to both": the failure to prevent is a fix that reached one reviewer and left the other
holding a stale question. ``dispatch`` therefore remembers the group -- in the dispatcher's own
state dir (``<state>/dispatch/<group>.json``), since it spans exchanges and may write none of their
internals -- so ``closeout`` reaches every member (reopening an archived topic, with the reason,
rather than writing where nobody looks) and ``dispatch_status`` shows who replied and who owes.

Every exchange is checked before anything is sent (membership, a new topic, the body's size); a
send that still fails part-way is recorded, so the group always says exactly who received what.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time, now
from mailslot.core.cursor import state_dir
from mailslot.core.errors import (
    Conflict,
    FormatError,
    Incomplete,
    InvalidName,
    InvalidValue,
    MailslotError,
    NotFound,
)
from mailslot.core.fsio import atomic_create, atomic_write, file_lock
from mailslot.core.limits import check_bytes
from mailslot.core.names import validate_slug
from mailslot.exchange.entries import ACTIONS, ENTRY_RE, MAX_BODY_BYTES, list_entries, send
from mailslot.exchange.index import answers
from mailslot.exchange.layout import Exchange, load_exchange
from mailslot.exchange.reopen import reopen
from mailslot.exchange.state import read_state
from mailslot.exchange.topics import find_topic, resolve_topic

__all__ = [
    "CloseoutResult",
    "Group",
    "Member",
    "closeout",
    "dispatch",
    "dispatch_status",
    "groups_dir",
    "list_groups",
    "load_group",
]

GROUP_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,95}")
# Room left in an entry for the independence note and the close-out header.
NOTE_BYTES = 1024


def groups_dir(base: Path | None = None) -> Path:
    """Where dispatch groups are remembered: ``<state dir>/dispatch``."""
    return (base or state_dir()) / "dispatch"


def independence_note(count: int, group: str) -> str:
    """The paragraph every copy of a dispatched brief starts with."""
    others = "another agent has" if count == 2 else f"{count - 1} other agents have"
    return (
        f"Independent review: {others} been sent these same questions separately. Do not "
        "consult them, look for their answers or share yours; an independent answer is the "
        "point. Say what you verified and what you inferred; 'not findable' is an acceptable "
        f"answer. (mailslot dispatch group {group})"
    )


@dataclass
class Member:
    """One exchange a brief went to: where, which topic and entry, on which side."""

    root: str
    topic: str
    entry: str
    side: str
    other: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


@dataclass
class Group:
    """A dispatched brief: its members and every close-out sent."""

    group: str
    agent: str
    slug: str
    action: str
    created_at: str
    members: list[Member] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    closeouts: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (also the stored form)."""
        return {
            "version": 1,
            "group": self.group,
            "agent": self.agent,
            "slug": self.slug,
            "action": self.action,
            "created_at": self.created_at,
            "members": [m.to_json() for m in self.members],
            "failed": self.failed,
            "closeouts": self.closeouts,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Group:
        """The group stored as ``data``; ``KeyError``/``TypeError`` if malformed."""
        return cls(
            data["group"],
            data["agent"],
            data["slug"],
            data["action"],
            data["created_at"],
            [Member(**m) for m in data.get("members", [])],
            list(data.get("failed", [])),
            list(data.get("closeouts", [])),
        )


def _path(group: str, base: Path | None) -> Path:
    if not GROUP_RE.fullmatch(group):
        raise InvalidName("dispatch group", group, "a-z 0-9 -, as printed by dispatch")
    return groups_dir(base) / f"{group}.json"


def load_group(group: str, *, base: Path | None = None) -> Group:
    """The remembered group ``group``; ``NotFound`` or ``FormatError``."""
    path = _path(group, base)
    try:
        data = json.loads(path.read_bytes())
        return Group.from_json(data)
    except FileNotFoundError:
        raise NotFound(
            f"no dispatch group {group} (groups live in {groups_dir(base)})", path=path
        ) from None
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"corrupt dispatch group: {e}", path=path) from None


def list_groups(*, base: Path | None = None) -> list[Group]:
    """Every remembered group, oldest first (unreadable files are skipped)."""
    out = []
    for p in sorted(groups_dir(base).glob("*.json")):
        try:
            out.append(load_group(p.stem, base=base))
        except MailslotError:
            continue
    return sorted(out, key=lambda g: (g.created_at, g.group))


def _save(g: Group, base: Path | None) -> None:
    atomic_write(_path(g.group, base), json.dumps(g.to_json(), indent=1), mode=0o600)


def _claim(g: Group, base: Path | None) -> None:
    """Create the group file under a fresh name (``-2``, ``-3``... on a clash)."""
    groups_dir(base).mkdir(parents=True, exist_ok=True)
    stem = g.group
    for n in range(1, 1000):
        g.group = stem if n == 1 else f"{stem}-{n}"
        try:
            atomic_create(_path(g.group, base), json.dumps(g.to_json(), indent=1), mode=0o600)
            return
        except Conflict:
            continue
    raise Conflict(f"too many dispatch groups named {stem}")


def dispatch(
    roots: list[Path],
    agent: str,
    slug: str,
    action: str,
    body: str,
    *,
    base: Path | None = None,
) -> Group:
    """Send ``body`` as a new topic ``slug`` into every exchange in ``roots``; remember the group.

    Refuses (nothing sent) fewer than two distinct exchanges, a non-member ``agent``
    (``Conflict``), a slug that already names a live topic in any of them (``Conflict``), a bad
    action or an oversized body. A send failing part-way raises ``Incomplete`` after recording
    which members did receive it.
    """
    validate_slug(slug)
    if action not in ACTIONS:
        raise InvalidValue(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    if not body.strip():
        raise InvalidValue("the brief is empty")
    check_bytes("brief", body, MAX_BODY_BYTES - NOTE_BYTES)
    exchanges: list[Exchange] = []
    for r in roots:
        ex = load_exchange(Path(r))
        if any(e.root == ex.root for e in exchanges):
            raise Conflict(f"{ex.root} is given twice; each reviewer gets one copy")
        ex.side_of(agent)
        _, exists = resolve_topic(ex, slug)
        if exists:
            raise Conflict(
                f"{ex.root} already has a live topic {slug}; a dispatched brief opens a new "
                "topic in every exchange, so pick a new slug"
            )
        exchanges.append(ex)
    if len(exchanges) < 2:
        raise InvalidValue("dispatch needs at least two exchanges (--to-root R1 --to-root R2)")
    stamp = now().strftime("%Y%m%d-%H%M%S")
    g = Group(f"{slug}-{stamp}", agent, slug, action, format_time(now()))
    _claim(g, base)
    text = independence_note(len(exchanges), g.group) + "\n\n---\n\n" + body
    for ex in exchanges:
        side = ex.side_of(agent)
        try:
            sent = send(ex, agent, slug, action, text)
        except (MailslotError, OSError) as e:
            g.failed.append({"root": str(ex.root), "error": str(e)})
            continue
        g.members.append(Member(str(ex.root), sent.topic, sent.relpath, side, ex.other(side)))
    _save(g, base)
    if g.failed:
        reached = ", ".join(m.root for m in g.members) or "none"
        raise Incomplete(
            f"dispatch group {g.group}: sent to {reached}; failed: "
            + "; ".join(f"{f['root']}: {f['error']}" for f in g.failed)
        )
    return g


@dataclass
class CloseoutResult:
    """Per member, the entry the close-out became (or why it could not be sent)."""

    group: str
    results: list[dict[str, Any]]

    @property
    def errors(self) -> list[str]:
        """Members the close-out did not reach."""
        return [f"{r['root']}: {r['error']}" for r in self.results if r.get("error")]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"group": self.group, "results": self.results}

    def raise_for_errors(self) -> None:
        """Raise ``Incomplete`` naming every member the close-out did not reach."""
        if self.errors:
            raise Incomplete(f"close-out of {self.group} did not reach: " + "; ".join(self.errors))


def closeout(
    group: str,
    body: str,
    *,
    action: str = "fyi",
    again: bool = False,
    base: Path | None = None,
) -> CloseoutResult:
    """Send the same close-out to every member of ``group``; an archived topic is reopened with it.

    ``NotFound`` for an unknown group; a member that cannot be reached is reported in the result
    (``raise_for_errors``), never skipped silently. Run again with the same ``body`` and
    ``action`` (a retry after an error), it sends only to the members it has not reached yet;
    those it reached are listed with ``already`` and the entry they got (``again`` sends to them
    anyway). A different body is a new close-out and goes to every member. Runs for one group
    take turns (a lock beside the group file), and each member reached is saved at once, so
    neither a concurrent retry nor an interrupted run sends anyone the same close-out twice.
    """
    if action not in ACTIONS:
        raise InvalidValue(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    if not body.strip():
        raise InvalidValue("the close-out is empty")
    check_bytes("close-out", body, MAX_BODY_BYTES - NOTE_BYTES)
    load_group(group, base=base)  # NotFound before any lock file is made
    with file_lock(_path(group, base).with_name(f".{group}.lock")):
        g = load_group(group, base=base)
        return _closeout(g, body, action, again, base)


def _closeout(g: Group, body: str, action: str, again: bool, base: Path | None) -> CloseoutResult:
    n = len(g.members)
    text = (
        f"Close-out of dispatch group {g.group}: the same close-out goes to all {n} reviewers "
        "of this brief.\n\n" + body
    )
    digest = hashlib.sha256(f"{action}\0{body}".encode()).hexdigest()
    reached = {  # root -> the entry an earlier run of this same close-out became there
        r["root"]: r["entry"]
        for c in g.closeouts
        if c.get("digest") == digest and not again
        for r in c.get("results", [])
        if r.get("entry") and not r.get("already") and not r.get("error")
    }
    results: list[dict[str, Any]] = []
    record = {"at": format_time(now()), "action": action, "digest": digest, "results": results}
    for m in g.members:
        row: dict[str, Any] = {"root": m.root, "topic": m.topic}
        results.append(row)
        if m.root in reached:
            row.update(entry=reached[m.root], already=True)
            continue
        try:
            ex = load_exchange(Path(m.root))
            ref = find_topic(ex, m.topic)
            if ref is None:
                raise NotFound(f"topic {m.topic} is gone")
            if ref.live:
                row["entry"] = send(ex, g.agent, m.topic, action, text).relpath
                row["reopened"] = False
            else:
                r = reopen(ex, g.agent, m.topic, text, action=action)
                row["entry"] = r.entry.relpath
                row["reopened"] = True
        except (MailslotError, OSError) as e:
            row["error"] = str(e)
        if not g.closeouts or g.closeouts[-1] is not record:
            g.closeouts.append(record)
        _save(g, base)  # at once: an interrupted run still knows whom it reached
    return CloseoutResult(g.group, results)


def _number(relpath: str) -> int:
    m = ENTRY_RE.match(relpath.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else 0


def dispatch_status(group: str, *, base: Path | None = None) -> dict[str, Any]:
    """Who replied to ``group``'s brief and who owes (read only); ``NotFound`` for no group."""
    g = load_group(group, base=base)
    members = []
    for m in g.members:
        row: dict[str, Any] = {"root": m.root, "topic": m.topic, "reviewer": m.other}
        try:
            ex = load_exchange(Path(m.root))
            entries = list_entries(ex, m.topic)
            ref = find_topic(ex, m.topic)
        except MailslotError as e:
            row.update(replied=False, owes=True, error=str(e))
            members.append(row)
            continue
        brief = next(
            (e for e in entries if e.side == m.side and e.name == Path(m.entry).name), None
        )
        if brief is not None:  # arrival order, never number alone (index.answers)
            replies = [
                e for e in entries if e.side == m.other and answers(e.arrival, brief.arrival)
            ]
        else:  # the brief is gone: its number is all there is
            replies = [e for e in entries if e.side == m.other and e.number > _number(m.entry)]
        last = max((e.at for e in replies if e.at), default=None)
        row.update(
            replied=bool(replies),
            owes=not replies,
            replies=[e.name for e in replies],
            last_reply_at=format_time(last) if last else None,
            reviewer_status=read_state(ex, m.topic, m.other).status,
            our_status=read_state(ex, m.topic, m.side).status,
            where=ref.status if ref else "missing",
        )
        members.append(row)
    return {
        "group": g.group,
        "slug": g.slug,
        "created_at": g.created_at,
        "members": members,
        "failed": g.failed,
        "closeouts": len(g.closeouts),
        "owing": [r["root"] for r in members if r["owes"]],
    }

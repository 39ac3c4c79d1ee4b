"""What one tick did (``TickResult``), and every way it is told: JSON, the commit message, the
notification and the command's text all come from here, so they never disagree.

``to_json`` is the contract scripts read (``new_entries``, ``new_topics``, ``archived``, ``held``,
``released``, ``commit``, ``notified``; fields are added, never renamed). ``lines`` is the one
account for people, a line per thing that happened: the commit message carries it (capped at
``COMMIT_LINES``, the diff has the rest) and so does the notification (capped at
``NOTIFY_LINES``: a chat service caps a message at ~4,000 characters). ``text`` is what
``exchange tick`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mailslot.core.errors import Incomplete

__all__ = ["COMMIT_LINES", "NOTIFY_LINES", "TickFailed", "TickResult"]

COMMIT_LINES = 500
NOTIFY_LINES = 40


def _capped(lines: list[str], limit: int) -> list[str]:
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"... and {len(lines) - limit} more (see INDEX.md and git log)"]


class TickFailed(Incomplete):
    """The tick ran but could not do all of its job (the message says which part)."""


@dataclass
class TickResult:
    """What one tick did; ``to_json`` is the contract (fields added, none renamed)."""

    new_entries: list[str] = field(default_factory=list)
    new_topics: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # holds placed by this tick
    released: list[str] = field(default_factory=list)
    commit: str | None = None
    notified: bool = False
    holding: list[str] = field(default_factory=list)  # every standing hold after this tick
    reopened: list[str] = field(default_factory=list)
    recovered: list[dict[str, str]] = field(default_factory=list)
    state_changes: list[dict[str, str]] = field(default_factory=list)
    rewritten: list[dict[str, Any]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)  # entries newly found in done/ unread
    waiting: list[dict[str, str]] = field(default_factory=list)
    debts: list[dict[str, Any]] = field(default_factory=list)
    notify_error: str | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    symlinks: list[str] = field(default_factory=list)  # refused, never followed (root-relative)
    strays: list[str] = field(default_factory=list)  # files in topics that are not entries
    cleaned: list[str] = field(default_factory=list)  # leftovers removed (root-relative)
    # holds placed and lifted, recoveries, unseen entries: told in the order they happened
    events: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = dict(self.__dict__)
        del out["events"]  # told through ``lines``; the fields above say the same for scripts
        return out

    @property
    def activity(self) -> bool:
        """Whether anything happened that is worth telling someone."""
        return bool(
            self.new_entries
            or self.new_topics
            or self.archived
            or self.held
            or self.released
            or self.reopened
            or self.recovered
            or self.state_changes
            or self.rewritten
            or self.removed
            or self.unseen
        )

    def raise_for_errors(self) -> None:
        """Raise ``TickFailed`` if the tick could not do all of its job."""
        if self.errors:
            raise TickFailed("; ".join(self.errors))

    def lines(self) -> list[str]:
        """What happened, a line each, for people (the commit message and the notification)."""
        out = [f"new topic {t}" for t in self.new_topics]
        out += [f"reopened {t}" for t in self.reopened]
        out += [f"new {k}" for k in self.new_entries]
        for c in self.state_changes:
            out.append(f"{c['side']} {c['from']} -> {c['to']} on {c['topic']}")
        for w in self.rewritten:
            out.append(f"WARNING rewritten {w['path']} ({w['was_bytes']} -> {w['bytes']} bytes)")
        out += [f"WARNING removed {k}" for k in self.removed]
        out += [f"archived {t}" for t in self.archived]
        return out + self.events

    def commit_message(self) -> str:
        """The git commit message: a count line, then ``lines`` (capped)."""
        parts = []
        for label, items in (
            ("new", self.new_entries),
            ("archived", self.archived),
            ("held", self.held),
            ("released", self.released),
        ):
            if items:
                parts.append(f"{len(items)} {label}")
        message = "tick: " + (", ".join(parts) if parts else "sync")
        detail = "\n".join(_capped(self.lines(), COMMIT_LINES))
        return message + ("\n\n" + detail if detail else "")

    def notification(self, exchange: str, pending: list[str]) -> tuple[str, str]:
        """``(title, body)`` of the one notification: ``pending`` lines an earlier tick could
        not send (marked ``(earlier)``), then this tick's ``lines`` (capped)."""
        lines = self.lines() if self.activity else []
        body = [*(f"(earlier) {p}" for p in pending), *lines]
        title = f"mailslot exchange {exchange}: {len(self.new_entries)} new"
        if self.archived:
            title += f", {len(self.archived)} archived"
        if self.held:
            title += f", {len(self.held)} held"
        return title, "\n".join(_capped(body, NOTIFY_LINES))

    def text(self) -> str:
        """What ``exchange tick`` prints for people."""
        out = []
        for label in ("new_topics", "reopened", "new_entries", "archived", "held", "released"):
            items: list[str] = getattr(self, label)
            if items:
                out.append(f"{label.replace('_', ' ')}: {', '.join(items)}")
        for c in self.state_changes:
            out.append(f"state: {c['topic']} {c['side']} {c['from']} -> {c['to']}")
        for w in self.rewritten:
            out.append(f"WARNING rewritten: {w['path']} ({w['was_bytes']} -> {w['bytes']} bytes)")
        for k in self.removed:
            out.append(f"WARNING removed: {k}")
        for w in self.waiting:
            out.append(f"not archived: {w['topic']}: {w['reason']}")
        if self.holding:
            out.append(f"holding: {', '.join(self.holding)}")
        out.append(f"commit: {self.commit or 'none'}; notified: {'yes' if self.notified else 'no'}")
        if self.notify_error:
            out.append(f"notification failed (retried next tick): {self.notify_error}")
        return "\n".join(out)

"""Name rules: what may become part of a path.

Digits are ASCII ``[0-9]`` everywhere: ``\\d`` also matches other scripts' digits, and a name
one reader accepts while another refuses is a message nobody can answer.

Every name that reaches the disk passes one of these checks first, so nothing a user or a message
supplies can climb out of its directory (``..``, ``/``, NUL, newline) or collide by case.
"""

from __future__ import annotations

import re
from datetime import date, datetime

from mailslot.core.errors import InvalidName

__all__ = [
    "AGENT_RE",
    "SLUG_RE",
    "TOPIC_RE",
    "split_topic",
    "topic_name",
    "validate_agent",
    "validate_slug",
    "validate_topic",
]

AGENT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
TOPIC_RE = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})-([a-z0-9][a-z0-9-]{0,63})")

_AGENT_RULE = "1-40 characters of a-z 0-9 _ -, starting with a letter or digit"
_SLUG_RULE = "1-64 characters of a-z 0-9 -, starting with a letter or digit"
_TOPIC_RULE = "YYYY-MM-DD-<slug>, slug of 1-64 characters a-z 0-9 -"


def validate_agent(name: str, kind: str = "agent name") -> str:
    """Return ``name`` if it is a valid agent name; raise ``InvalidName`` otherwise."""
    if not isinstance(name, str) or not AGENT_RE.fullmatch(name):
        raise InvalidName(kind, str(name), _AGENT_RULE)
    return name


def validate_slug(slug: str) -> str:
    """Return ``slug`` if valid; raise ``InvalidName`` otherwise."""
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug):
        raise InvalidName("slug", str(slug), _SLUG_RULE)
    return slug


def validate_topic(topic: str) -> str:
    """Return ``topic`` if it is ``YYYY-MM-DD-slug`` with a real date; raise ``InvalidName``."""
    m = TOPIC_RE.fullmatch(topic) if isinstance(topic, str) else None
    if not m:
        raise InvalidName("topic", str(topic), _TOPIC_RULE)
    try:
        date.fromisoformat(m.group(1))  # the pattern fixed the shape: YYYY-MM-DD
    except ValueError:
        raise InvalidName("topic", topic, "the date is not a real calendar date") from None
    return topic


def split_topic(topic: str) -> tuple[str, str]:
    """``(date, slug)`` of a valid topic; raise ``InvalidName`` otherwise."""
    validate_topic(topic)
    return topic[:10], topic[11:]


def topic_name(slug: str, when: datetime) -> str:
    """The topic name for ``slug`` created at ``when`` (UTC date)."""
    return f"{when:%Y-%m-%d}-{validate_slug(slug)}"

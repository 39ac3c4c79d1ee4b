"""mailslot.exchange: the two-sided topic mailbox of seed 000.

Data model (stable; other parts build on it):

* ``layout``  -- ``Exchange`` (sides, humans, modes, paths), ``load_exchange(root)``.
* ``topics``  -- ``list_topics``, ``find_topic``, ``resolve_topic`` (``--topic X``).
* ``entries`` -- ``Entry`` keyed by ``(number, from)``, ``list_entries``, ``parse_entry``, ``send``.
* ``state``   -- ``SideState``, ``read_state``, ``set_state``, ``unanswered_required``.

Operations: ``create.create_exchange`` (init), ``tick.tick``, ``reopen.reopen``.
"""

from __future__ import annotations

from mailslot.exchange.entries import Entry, SendResult, list_entries, parse_entry, send
from mailslot.exchange.layout import Exchange, find_root, load_exchange
from mailslot.exchange.state import SideState, read_state, set_state, unanswered_required
from mailslot.exchange.topics import TopicRef, find_topic, list_topics, resolve_topic

__all__ = [
    "Entry",
    "Exchange",
    "SendResult",
    "SideState",
    "TopicRef",
    "find_root",
    "find_topic",
    "list_entries",
    "list_topics",
    "load_exchange",
    "parse_entry",
    "read_state",
    "resolve_topic",
    "send",
    "set_state",
    "unanswered_required",
]

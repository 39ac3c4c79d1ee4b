"""mailslot.exchange: the two-sided topic mailbox.

Two sides each write only into the other's inbox (``to-<side>/``): numbered entries per topic,
one STATE.md per side, an archive into ``done/`` that waits until both sides have provably seen
the last word, and a tick that diffs, guards, holds, archives, indexes, commits and notifies.

Package map (each module's docstring says the invariant it keeps):

The model -- what is on disk, and reading it
    ``layout``      ``Exchange``: the sides, people, modes and paths; ``.mailslot/config``.
    ``listing``     the one lister of topic directories (live, ``done/``, both sides), the entry
                    name shape, and ``placement`` (live / archived / half-archived).
    ``topics``      a topic by name: ``find_topic``, ``named_topic``, ``resolve_topic`` (--topic X).
    ``entries``     ``send``: numbered under the send lock; offers ``entry``'s names too.
    ``entry``       ``Entry`` keyed by (number, from); ``parse_entry``, ``list_entries``.
    ``state``       ``SideState``: one side's STATE.md; ``set_state`` (``done`` refused while owed).
    ``inbox``       cheap header reads (``peek_entry``, ``peek_state``) and one side's inbox items.
    ``safeio``      the bounded, regular-file-only reader for files someone else wrote.

Deciding -- pure, no disk
    ``guard``       archive or hold: both done, and each side's newest entry acknowledged.
    ``index``       ``TopicView`` of a live topic, the debts it shows, and the INDEX.md text.

The tick (``exchange tick``), in the order it runs
    ``tick``        the conductor: lock, clean, scan, decide, move, hold, index, commit, notify.
    ``leftovers``   dead writers' temps and empty topic folders (the tick removes, doctor lists).
    ``scan``        one pass over the tree by name, size and mtime, trusting unchanged records.
    ``readings``    each file read at most once a run (kept by size and mtime across runs):
                    statuses, last activity, the guard's inputs, the entries owed a reply.
    ``holds``       HELD.md placed and lifted, and ``holds.json`` that vouches for each one.
    ``late``        entries that reached an archived topic unread (``unseen`` debts).
    ``gitlog``      the local git repository: init and one commit of everything dirty.
    ``tickresult``  what a tick did, as JSON, commit message, notification and text.
    ``tickstate``   what the tick keeps between runs in ``.mailslot/``.

Reading for agents and people (none of these write the exchange)
    ``watch``       block until something unseen is addressed to the caller; the seen-mark.
    ``monitor``     a stable listing of what awaits the caller, for output-diffing schedulers.
    ``sweep``       what the caller owes, as INDEX.md counts it.
    ``overview``    the topic list (``exchange topics``) and one topic in full (``exchange read``).

Setting up and checking
    ``create``      ``exchange init``: the tree, modes, config, CONVENTION.md, git.
    ``convention``  the CONVENTION.md and HELD.md texts a hand-writing agent reads.
    ``reopen``      bring an archived topic back, with an entry saying why.
    ``skill``       the instruction file that teaches one agent this exchange.
    ``install``     a hardened systemd service and timer for the tick, and polling lines.
    ``boundary``    can each side's agent write its outbox and not its inbox (modes, sandbox).
    ``tree``        a full audit for what readers skip: symlinks, strays, non-regular files.
    ``doctor``      every way the exchange can fail silently, checked, each with its fix.
    ``dispatch``    one brief into several exchanges for independent answers; one close-out.
"""

from __future__ import annotations

from mailslot._lazy import lazy_exports as _lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: every command loads this
if TYPE_CHECKING:
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

# The public names load on first use (PEP 562): a command that needs one module (``exchange
# send`` needs ``entries``) does not pay for the others on every start.
_LAZY = {
    **dict.fromkeys(("Entry", "SendResult", "list_entries", "parse_entry", "send"), "entries"),
    **dict.fromkeys(("Exchange", "find_root", "load_exchange"), "layout"),
    **dict.fromkeys(("SideState", "read_state", "set_state", "unanswered_required"), "state"),
    **dict.fromkeys(("TopicRef", "find_topic", "list_topics", "resolve_topic"), "topics"),
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)

del TYPE_CHECKING  # not part of the package's names

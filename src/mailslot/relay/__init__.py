"""mailslot.relay: the one-line turn relay (worker <-> manager, matched ids).

``lines`` is the line format (parsed strictly, built only by ``format_line``), ``mailbox`` the
operations (init, ask, reply, serve, recover, note, stop), ``stats`` the latency table.
"""

from mailslot.relay.lines import TurnLine, format_line, parse_inbox, parse_line
from mailslot.relay.mailbox import (
    Conversation,
    Delivery,
    Relay,
    RelayStopped,
    ask,
    init,
    note,
    open_relay,
    post,
    recover,
    reply,
    scan,
    serve,
    status,
    stop,
)
from mailslot.relay.stats import Stats, stats

__all__ = [
    "Conversation",
    "Delivery",
    "Relay",
    "RelayStopped",
    "Stats",
    "TurnLine",
    "ask",
    "format_line",
    "init",
    "note",
    "open_relay",
    "parse_inbox",
    "parse_line",
    "post",
    "recover",
    "reply",
    "scan",
    "serve",
    "stats",
    "status",
    "stop",
]

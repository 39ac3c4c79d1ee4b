"""The peer inbox and bus tools: ``peer_send`` and ``log_append``.

``peer_send`` calls ``web.peer.send`` with the server's ``--keys`` file: the peer's address and
token come from that file only, so a model names a peer and can reach nobody else (an unknown
name is an error listing the known ones). The receiving inbox sets ``from`` from the token.
``log_append`` calls ``bus.log.append`` as the server's ``--as`` agent; ``$MAILSLOT_WAKING`` (the
host's id of this run, when it sets one) makes "one line per waking" exact.
"""

from __future__ import annotations

from pathlib import Path

from mailslot.mcpserver.spec import Call, Reply, ToolSpec, obj, prop

__all__ = ["log_tools", "peer_tools"]

# A send waits this long for the peer's inbox; a private-network POST takes milliseconds.
PEER_TIMEOUT_SECONDS = 30.0


def _peer_send(call: Call) -> Reply:
    from mailslot.web.peer import send

    a = call.args
    assert call.config.keys is not None
    r = send(call.config.keys, a["peer"], a["body"], a["subject"], timeout=PEER_TIMEOUT_SECONDS)
    return Reply(f"delivered to {a['peer']}: id {r.get('id')}")


def _log_append(call: Call) -> Reply:
    from mailslot.bus.log import append

    a, cfg = call.args, call.config
    assert cfg.bus is not None
    e = append(
        cfg.bus,
        cfg.agent,
        a["text"],
        waking_id=cfg.waking_id,
        same_waking=a["same_waking"],
        new_waking=a["new_waking"],
    )
    return Reply(f"LOG.md line {e.lineno}: {e.raw}")


def peer_tools(keys: Path) -> list[ToolSpec]:
    """``peer_send`` over the keys file ``keys`` (its peers named in the description)."""
    from mailslot.web.auth import load_keys

    known = ", ".join(sorted(load_keys(keys))) or "none yet"
    return [
        ToolSpec(
            "peer_send",
            f"Send a private message to a peer's inbox over HTTP (known peers: {known}). "
            "The peer sees you by your token, not by any name in the body.",
            obj(
                ["peer", "body"],
                peer=prop("string", "A known peer's name."),
                body=prop("string", "The message (at most 32 KB).", minLength=1),
                subject=prop("string", "One line."),
            ),
            _peer_send,
        )
    ]


def log_tools(bus: Path, agent: str) -> list[ToolSpec]:
    """``log_append`` to the bus at ``bus`` as ``agent``."""
    return [
        ToolSpec(
            "log_append",
            f"Append your one line for this waking to {bus}/LOG.md as {agent}: "
            "what you did, produced, and where you left it.",
            obj(
                ["text"],
                text=prop("string", "One line, at most 1000 characters.", minLength=1),
                same_waking=prop("boolean", "Add another line to this waking.", default=False),
                new_waking=prop("boolean", "This is a new run, however soon.", default=False),
            ),
            _log_append,
        )
    ]

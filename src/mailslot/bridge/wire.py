"""What travels between hosts: one NATS message per file version, and the checks on arrival.

Subjects (every token a checked name, so a subject is also a safe path)::

    ms.<host>.<exchange>.e.<inbox>.<topic>.<NNNN>.<from>   to-<inbox>/<topic>/NNNN-<from>.md
    ms.<host>.<exchange>.s.<inbox>.<topic>.<rev>           to-<inbox>/<topic>/STATE.md

``<host>`` is the origin; each host publishes only under its own name into its own stream. An
entry's subject is written once (the stream keeps one message per subject and refuses a second),
so republishing is idempotent and a periodic reconcile can simply send everything again. A STATE
revision has its own subject; the receiver keeps the highest revision from the one writer.

The receiver never takes a path from the wire: it rebuilds it from the checked tokens. And it
accepts from a peer only what that peer hosts according to the receiver's own config
(``check_incoming``): a hostile host controls its own server, so it can publish anything there.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import NamedTuple

from mailslot.bridge.config import BridgeConfig, BridgedExchange
from mailslot.core.errors import Conflict, FormatError, InvalidName, LimitExceeded
from mailslot.core.names import validate_agent, validate_topic

__all__ = [
    "KIND_ENTRY",
    "KIND_STATE",
    "MAX_PAYLOAD_BYTES",
    "SHA_HEADER",
    "Incoming",
    "check_incoming",
    "entry_subject",
    "headers_for",
    "state_subject",
]

KIND_ENTRY = "e"
KIND_STATE = "s"
SHA_HEADER = "Mailslot-Sha256"
# The exchange reads no file over this (entries.MAX_BODY_BYTES plus room for the frontmatter),
# so nothing larger is carried either; NATS's own default max_payload is 1 MiB.
MAX_PAYLOAD_BYTES = 256 * 1024 + 64 * 1024
_NUMBER_RE = re.compile(r"[0-9]{4}")
_REV_RE = re.compile(r"[0-9]{1,20}")


class Incoming(NamedTuple):
    """A checked message from a peer, ready to be materialised."""

    kind: str
    origin: str  # the peer host it came from
    exchange: BridgedExchange
    inbox: str  # the side whose inbox (to-<inbox>) it lands in
    topic: str
    name: str  # file name inside the topic directory
    rev: int  # STATE revision (0 for entries)
    data: bytes

    @property
    def relpath(self) -> Path:
        """The path relative to the exchange root."""
        return Path(f"to-{self.inbox}") / self.topic / self.name

    @property
    def path(self) -> Path:
        """The absolute path on this host."""
        return self.exchange.root / self.relpath


def entry_subject(host: str, exchange: str, inbox: str, topic: str, name: str) -> str:
    """The subject of entry file ``name`` (``NNNN-<from>.md``) in ``to-<inbox>/<topic>``."""
    stem = name.removesuffix(".md")
    number, _, sender = stem.partition("-")
    return f"ms.{host}.{exchange}.{KIND_ENTRY}.{inbox}.{topic}.{number}.{sender}"


def state_subject(host: str, exchange: str, inbox: str, topic: str, rev: int) -> str:
    """The subject of revision ``rev`` of ``to-<inbox>/<topic>/STATE.md``."""
    return f"ms.{host}.{exchange}.{KIND_STATE}.{inbox}.{topic}.{rev}"


def headers_for(subject: str, data: bytes) -> dict[str, str]:
    """The headers a published file carries: a msg id (retries collapse) and its digest."""
    return {"Nats-Msg-Id": subject, SHA_HEADER: hashlib.sha256(data).hexdigest()}


def _members(root: Path) -> dict[str, str] | None:
    """``name -> side`` for the exchange's sides and humans (``None`` if unreadable)."""
    from mailslot.exchange.layout import load_exchange

    try:
        ex = load_exchange(root)
    except Exception:  # an unreadable local config: refuse rather than guess
        return None
    members = {s: s for s in ex.sides}
    members.update(ex.humans)
    return members


def check_incoming(
    config: BridgeConfig,
    peer: str,
    subject: str,
    headers: dict[str, str] | None,
    data: bytes,
    members: dict[str, dict[str, str] | None] | None = None,
) -> Incoming:
    """Check a message that arrived from ``peer``; the ``Incoming`` to materialise.

    Refused (never materialised) with ``LimitExceeded`` (oversize), ``FormatError`` (malformed:
    a subject that does not parse, a digest that does not match), ``InvalidName`` (a token that
    is no name, such as a traversal) or ``Conflict`` (a side, exchange or origin this peer does
    not host according to our config). ``members`` caches each exchange's side members.
    """
    if len(data) > MAX_PAYLOAD_BYTES:
        raise LimitExceeded(f"message {subject[:120]!r}", MAX_PAYLOAD_BYTES, len(data), "bytes")
    parts = subject.split(".")
    if len(parts) < 4 or parts[0] != "ms":
        raise FormatError(f"not a mailslot subject: {subject[:120]!r}")
    origin, ex_name, kind = parts[1], parts[2], parts[3]
    if origin != peer:
        raise Conflict(f"message from host {peer!r} claims origin {origin[:40]!r}")
    try:
        exchange = config.exchange(ex_name)
    except Exception:
        raise Conflict(
            f"host {peer!r} sent for exchange {ex_name[:40]!r}, not bridged here"
        ) from None
    if headers is None or headers.get(SHA_HEADER) != hashlib.sha256(data).hexdigest():
        raise FormatError(f"message {subject[:120]!r}: digest missing or wrong")
    if kind == KIND_ENTRY and len(parts) == 8:
        inbox, topic, number, sender = parts[4:8]
        if not _NUMBER_RE.fullmatch(number):
            raise InvalidName("entry number", number, "4 digits")
        validate_agent(sender, "sender")
        name, rev = f"{number}-{sender}.md", 0
    elif kind == KIND_STATE and len(parts) == 7:
        inbox, topic, rev_s = parts[4:7]
        if not _REV_RE.fullmatch(rev_s):
            raise InvalidName("revision", rev_s, "a decimal number")
        sender, name, rev = "", "STATE.md", int(rev_s)
    else:
        raise FormatError(f"not a mailslot subject: {subject[:120]!r}")
    validate_agent(inbox, "side")
    validate_topic(topic)
    if inbox not in exchange.hosts:
        raise Conflict(f"exchange {ex_name!r} has no side {inbox!r}")
    writer = next(s for s in exchange.hosts if s != inbox)
    if exchange.hosts[writer] != peer:
        raise Conflict(
            f"host {peer!r} wrote for side {writer!r} of exchange {ex_name!r}, "
            f"which host {exchange.hosts[writer]!r} hosts"
        )
    if sender:
        cache = members if members is not None else {}
        if ex_name not in cache:
            cache[ex_name] = _members(exchange.root)
        known = cache[ex_name]
        if known is None or known.get(sender) != writer:
            raise Conflict(f"{sender!r} is not a member of side {writer!r} of {ex_name!r}")
    return Incoming(kind, peer, exchange, inbox, topic, name, rev, data)

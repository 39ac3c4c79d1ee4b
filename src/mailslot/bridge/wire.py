"""What travels between hosts: one NATS message per file version, and the checks on arrival.

Subjects (every token a checked name, so a subject is also a safe path)::

    ms.<host>.<exchange>.e.<inbox>.<topic>.<NNNN>.<from>   to-<inbox>/<topic>/NNNN-<from>.md
    ms.<host>.<exchange>.v.<inbox>.<topic>.<NNNN>.<from>.<sha12>
                                 a later version of that entry: kept beside it as .conflict
    ms.<host>.<exchange>.s.<inbox>.<topic>.<rev>           to-<inbox>/<topic>/STATE.md
    ms.<host>.<exchange>.h.<inbox>.<topic>.<rev>           to-<inbox>/<topic>/HELD.md (home)
    ms.<host>.<exchange>.i.<rev>                           INDEX.md (home)
    ms.<host>.<exchange>.p.<topic>.<rev>                   "done" (archive) or "live" (reopen)
    ms.<host>.<exchange>.r.<inbox>.<topic>.<NNNN>.<from>   arrival receipt: ns, reader's host
    ms.<host>.<chat>.c.<offset>                            one chat block said on <host>

Stream sources do not carry deletions or moves, so the tick's (HELD.md released, a topic archived
or reopened) travel as explicit messages.

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

from mailslot.bridge.config import BridgeConfig, BridgedChat, BridgedExchange
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
KIND_VERSION = "v"  # an entry's bytes changed on its host after it was published
KIND_STATE = "s"
KIND_HELD = "h"
KIND_INDEX = "i"
KIND_PLACE = "p"
KIND_RECEIPT = "r"
KIND_CHAT = "c"
STATE_NAME = "STATE.md"
HELD_NAME = "HELD.md"
INDEX_NAME = "INDEX.md"
PLACE_DONE = b"done"
PLACE_LIVE = b"live"
SHA_HEADER = "Mailslot-Sha256"
# A removal (HELD.md released) travels as an explicit message: sources do not carry deletes.
OP_HEADER = "Mailslot-Op"
OP_DELETE = "delete"
# The exchange reads no file over this (entries.MAX_BODY_BYTES plus room for the frontmatter),
# so nothing larger is carried either; NATS's own default max_payload is 1 MiB.
MAX_PAYLOAD_BYTES = 256 * 1024 + 64 * 1024
_NUMBER_RE = re.compile(r"[0-9]{4}")
_REV_RE = re.compile(r"[0-9]{1,20}")
_SHA12_RE = re.compile(r"[0-9a-f]{12}")
# Chat names are chosen by agents ("Kiran-48291"); anything this long is not a name.
MAX_CHAT_NAME = 100


class Incoming(NamedTuple):
    """A checked message from a peer, ready to be materialised."""

    kind: str
    origin: str  # the peer host it came from
    exchange: BridgedExchange
    inbox: str  # the side whose inbox (to-<inbox>) it lands in
    topic: str
    name: str  # file name inside the topic directory
    rev: int  # revision of STATE.md, HELD.md, INDEX.md, a placement (0 for entries)
    data: bytes
    delete: bool = False  # HELD.md released

    @property
    def relpath(self) -> Path:
        """The path relative to the exchange root (a placement's: ``placement/<topic>``)."""
        if self.kind == KIND_INDEX:
            return Path(INDEX_NAME)
        if self.kind == KIND_PLACE:
            return Path("placement") / self.topic
        return Path(f"to-{self.inbox}") / self.topic / self.name

    @property
    def key(self) -> str:
        """Where the receiver keeps this item's revision: one writer per key."""
        if self.kind == KIND_PLACE:
            return f"{self.exchange.name}/placement/{self.origin}/{self.topic}"
        return f"{self.exchange.name}/{self.relpath}"

    @property
    def path(self) -> Path:
        """The absolute path on this host."""
        return self.exchange.root / self.relpath


class ChatIncoming(NamedTuple):
    """A checked chat block from a peer (the sender's name is checked when it is applied)."""

    origin: str
    chat: BridgedChat
    offset: int
    data: bytes


def chat_subject(host: str, chat: str, offset: int) -> str:
    """The subject of the block said at ``offset`` of ``host``'s copy of ``chat``."""
    return f"ms.{host}.{chat}.{KIND_CHAT}.{offset}"


def _check_chat(config: BridgeConfig, peer: str, parts: list[str], data: bytes) -> ChatIncoming:
    from mailslot.chat.format import parse_messages

    try:
        chat = config.chat(parts[2])
    except Exception:
        raise Conflict(f"host {peer!r} sent for chat {parts[2][:40]!r}, not bridged here") from None
    if len(parts) != 5:
        raise FormatError(f"not a chat subject: {'.'.join(parts)[:120]!r}")
    offset = _rev(parts[4])
    messages, consumed = parse_messages(data)
    if len(messages) != 1 or consumed != len(data) or messages[0].offset != 0:
        raise FormatError(f"chat {chat.name!r}: not exactly one whole message")
    sender = messages[0].sender
    if not sender.strip() or len(sender) > MAX_CHAT_NAME or "\ufffd" in sender:
        raise FormatError(f"chat {chat.name!r}: no usable sender name")
    return ChatIncoming(peer, chat, offset, data)


def entry_subject(host: str, exchange: str, inbox: str, topic: str, name: str) -> str:
    """The subject of entry file ``name`` (``NNNN-<from>.md``) in ``to-<inbox>/<topic>``."""
    stem = name.removesuffix(".md")
    number, _, sender = stem.partition("-")
    return f"ms.{host}.{exchange}.{KIND_ENTRY}.{inbox}.{topic}.{number}.{sender}"


def version_subject(host: str, exchange: str, inbox: str, topic: str, name: str, sha: str) -> str:
    """The subject of a later version (content ``sha``) of entry ``name``, published when it
    changed after it was sent: its peers keep it beside theirs as ``.conflict``."""
    number, _, sender = name.removesuffix(".md").partition("-")
    return f"ms.{host}.{exchange}.{KIND_VERSION}.{inbox}.{topic}.{number}.{sender}.{sha[:12]}"


def state_subject(host: str, exchange: str, inbox: str, topic: str, rev: int) -> str:
    """The subject of revision ``rev`` of ``to-<inbox>/<topic>/STATE.md``."""
    return f"ms.{host}.{exchange}.{KIND_STATE}.{inbox}.{topic}.{rev}"


def held_subject(host: str, exchange: str, inbox: str, topic: str, rev: int) -> str:
    """The subject of revision ``rev`` of ``to-<inbox>/<topic>/HELD.md`` (or its removal)."""
    return f"ms.{host}.{exchange}.{KIND_HELD}.{inbox}.{topic}.{rev}"


def index_subject(host: str, exchange: str, rev: int) -> str:
    """The subject of revision ``rev`` of ``INDEX.md``."""
    return f"ms.{host}.{exchange}.{KIND_INDEX}.{rev}"


def place_subject(host: str, exchange: str, topic: str, rev: int) -> str:
    """The subject of an archive or reopen of ``topic``."""
    return f"ms.{host}.{exchange}.{KIND_PLACE}.{topic}.{rev}"


def receipt_subject(host: str, exchange: str, inbox: str, topic: str, name: str) -> str:
    """The subject of the arrival receipt for entry ``name`` in ``to-<inbox>/<topic>``."""
    number, _, sender = name.removesuffix(".md").partition("-")
    return f"ms.{host}.{exchange}.{KIND_RECEIPT}.{inbox}.{topic}.{number}.{sender}"


def headers_for(subject: str, data: bytes, *, delete: bool = False) -> dict[str, str]:
    """The headers a published file carries: a msg id (retries collapse) and its digest."""
    headers = {"Nats-Msg-Id": subject, SHA_HEADER: hashlib.sha256(data).hexdigest()}
    if delete:
        headers[OP_HEADER] = OP_DELETE
    return headers


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


def _rev(token: str) -> int:
    if not _REV_RE.fullmatch(token):
        raise InvalidName("revision", token, "a decimal number")
    return int(token)


def _entry_name(number: str, sender: str) -> str:
    if not _NUMBER_RE.fullmatch(number):
        raise InvalidName("entry number", number, "4 digits")
    validate_agent(sender, "sender")
    return f"{number}-{sender}.md"


def _parse(parts: list[str], subject: str) -> tuple[str, str, str, int, str]:
    """``(inbox, topic, name, rev, sender)`` from a subject's tokens after the kind."""
    kind, rest = parts[3], parts[4:]
    if kind == KIND_ENTRY and len(rest) == 4:
        name = _entry_name(rest[2], rest[3])
        return rest[0], rest[1], name, 0, rest[3]
    if kind == KIND_VERSION and len(rest) == 5:
        if not _SHA12_RE.fullmatch(rest[4]):
            raise InvalidName("digest", rest[4], "12 hex digits")
        return rest[0], rest[1], _entry_name(rest[2], rest[3]), 0, rest[3]
    if kind == KIND_RECEIPT and len(rest) == 4:
        return rest[0], rest[1], _entry_name(rest[2], rest[3]), 0, ""
    if kind == KIND_STATE and len(rest) == 3:
        return rest[0], rest[1], STATE_NAME, _rev(rest[2]), ""
    if kind == KIND_HELD and len(rest) == 3:
        return rest[0], rest[1], HELD_NAME, _rev(rest[2]), ""
    if kind == KIND_PLACE and len(rest) == 2:
        return "", rest[0], "", _rev(rest[1]), ""
    if kind == KIND_INDEX and len(rest) == 1:
        return "", "", INDEX_NAME, _rev(rest[0]), ""
    raise FormatError(f"not a mailslot subject: {subject[:120]!r}")


def check_incoming(
    config: BridgeConfig,
    peer: str,
    subject: str,
    headers: dict[str, str] | None,
    data: bytes,
    members: dict[str, dict[str, str] | None] | None = None,
) -> Incoming | ChatIncoming:
    """Check a message that arrived from ``peer``; the ``Incoming`` to materialise.

    Refused (never materialised) with ``LimitExceeded`` (oversize), ``FormatError`` (malformed:
    a subject that does not parse, a digest that does not match), ``InvalidName`` (a token that
    is no name, such as a traversal) or ``Conflict`` (a side, exchange or origin this peer does
    not host according to our config: entries, STATE.md and receipts only from the host of the
    side, HELD.md, INDEX.md and archives only from the home host, a reopen from either).
    ``members`` caches each exchange's side members.
    """
    if len(data) > MAX_PAYLOAD_BYTES:
        raise LimitExceeded(f"message {subject[:120]!r}", MAX_PAYLOAD_BYTES, len(data), "bytes")
    parts = subject.split(".")
    if len(parts) < 4 or parts[0] != "ms":
        raise FormatError(f"not a mailslot subject: {subject[:120]!r}")
    origin, ex_name, kind = parts[1], parts[2], parts[3]
    if origin != peer:
        raise Conflict(f"message from host {peer!r} claims origin {origin[:40]!r}")
    if headers is None or headers.get(SHA_HEADER) != hashlib.sha256(data).hexdigest():
        raise FormatError(f"message {subject[:120]!r}: digest missing or wrong")
    if kind == KIND_CHAT:
        return _check_chat(config, peer, parts, data)
    try:
        exchange = config.exchange(ex_name)
    except Exception:
        raise Conflict(
            f"host {peer!r} sent for exchange {ex_name[:40]!r}, not bridged here"
        ) from None
    inbox, topic, name, rev, sender = _parse(parts, subject)
    if topic:
        validate_topic(topic)
    delete = bool(headers.get(OP_HEADER) == OP_DELETE)
    if kind in (KIND_HELD, KIND_INDEX):
        if peer != exchange.home:
            raise Conflict(
                f"host {peer!r} sent the tick's {name} for {ex_name!r}, whose home is "
                f"{exchange.home!r}"
            )
    elif kind == KIND_PLACE:
        if data not in (PLACE_DONE, PLACE_LIVE):
            raise FormatError(f"message {subject[:120]!r}: not an archive or a reopen")
        if peer != exchange.home and (data != PLACE_LIVE or not exchange.sides_of(peer)):
            raise Conflict(f"host {peer!r} may not archive topics of {ex_name!r}")
    elif kind == KIND_RECEIPT:
        if exchange.hosts.get(inbox) != peer:
            raise Conflict(f"host {peer!r} sent a receipt for side {inbox[:40]!r}, not its own")
        if not data.isdigit() or len(data) > 20:
            raise FormatError(f"message {subject[:120]!r}: a receipt holds a time in ns")
    if inbox:
        validate_agent(inbox, "side")
        if inbox not in exchange.hosts:
            raise Conflict(f"exchange {ex_name!r} has no side {inbox!r}")
    if kind == KIND_VERSION and not hashlib.sha256(data).hexdigest().startswith(parts[-1]):
        raise FormatError(f"message {subject[:120]!r}: digest does not match its subject")
    if kind in (KIND_ENTRY, KIND_VERSION, KIND_STATE):
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
    return Incoming(kind, peer, exchange, inbox, topic, name, rev, data, delete)

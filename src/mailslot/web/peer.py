"""The private peer inbox: store, list, process and send point-to-point messages.

Invariants:

* ``from`` is the name of the peer whose token matched, passed in by the transport; any ``from``
  in a payload is ignored (a peer can't claim to be a different peer).
* A payload is checked whole before anything is written (a JSON object, ``body`` a non-empty
  string, ``subject`` absent/null or one line of at most 200 characters); refused, never trimmed.
* An accepted message is durable and atomically visible before the sender hears "stored": it is
  written to a dot-named temp file, fsync'd and linked into place (``core.fsio.atomic_create``)
  as ``DIR/<timestamp>-<PEER>-<rand>.json`` with ``from, subject, body, received_at``.
* Processing is a rename into ``DIR/processed/`` (same filesystem, atomic), never a copy.

The sending side (``send``) takes the address and token from the keys file only: an unknown
peer is an error listing the known ones, never a new address. It sends one ``Idempotency-Key``
per message and retries a broken connection with it, so a retry never stores a message twice.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time, now, parse_time
from mailslot.core.errors import (
    Conflict,
    FormatError,
    NotFound,
    PeerRefused,
    PeerUnreachable,
)
from mailslot.core.formats import load_json
from mailslot.core.fsio import atomic_create, read_regular
from mailslot.core.limits import check_bytes, check_chars, check_one_line
from mailslot.core.move import safe_move
from mailslot.core.names import validate_agent
from mailslot.web.auth import key_for
from mailslot.web.settings import PEER_BODY_CAP, PEER_SUBJECT_MAX

__all__ = [
    "PeerMessage",
    "inbox_messages",
    "is_message_name",
    "is_stored",
    "new_id",
    "parse_payload",
    "process",
    "read_message",
    "record_text",
    "send",
    "store",
]

PROCESSED = "processed"
# Tries of one send: a broken connection or a busy server is retried with the same
# Idempotency-Key, so the inbox stores the message once however many tries reach it.
SEND_ATTEMPTS = 3
SEND_BACKOFF_S = 0.5  # times the try number: 0.5 s, then 1 s
_RETRY_STATUS = (502, 503, 504)


@dataclass(frozen=True)
class PeerMessage:
    """One stored peer message; ``id`` is its file name without ``.json``."""

    id: str
    sender: str
    subject: str | None
    body: str
    received_at: str
    path: Path
    error: str | None = None  # set when the file does not parse: listed, never skipped

    def to_json(self) -> dict[str, Any]:
        """The record as JSON: ``id, from, subject, body, received_at, path`` (+ ``error``)."""
        out: dict[str, Any] = {
            "id": self.id,
            "from": self.sender,
            "subject": self.subject,
            "body": self.body,
            "received_at": self.received_at,
            "path": str(self.path),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


def parse_payload(raw: bytes | str, *, cap: int = PEER_BODY_CAP) -> tuple[str | None, str]:
    """``(subject, body)`` of a request body; ``LimitExceeded`` or ``FormatError`` if refused.

    Unknown keys (``from`` among them) are ignored: identity is not the body's to give.
    """
    check_bytes("request body", raw, cap)
    doc = load_json(raw)
    if not isinstance(doc, dict):
        raise FormatError('expected a JSON object {"subject"?: str, "body": str}')
    body = doc.get("body")
    if not isinstance(body, str):
        raise FormatError("required, a string", field="body")
    check_chars("body", body, 1, cap)
    subject = doc.get("subject")
    if subject is not None:
        if not isinstance(subject, str):
            raise FormatError("must be a string or null", field="subject")
        check_chars("subject", subject, 0, PEER_SUBJECT_MAX)
        check_one_line("subject", subject)
    return subject, body


def _stamp(at: datetime) -> str:
    # ISO 8601 basic format: sorts by time, and has no ':' (awkward in file names).
    return at.strftime("%Y%m%dT%H%M%S.") + f"{at.microsecond // 1000:03d}Z"


def record_text(sender: str, subject: str | None, body: str, received_at: str) -> str:
    """A stored record's text: ``json.dumps`` of ``{from, subject, body, received_at}`` with
    ``indent=1`` plus a newline, byte for byte, each value encoded by the C encoder (the
    indenting encoder is pure Python: a tenth of the server's CPU per message)."""

    def enc(value: str | None) -> str:
        return json.dumps(value, ensure_ascii=False)

    return (
        f'{{\n "from": {enc(sender)},\n "subject": {enc(subject)},\n "body": {enc(body)},\n'
        f' "received_at": {enc(received_at)}\n}}\n'
    )


def new_id(sender: str) -> tuple[str, str]:
    """A fresh ``(id, received_at)`` for a message from ``sender``, received now."""
    at = now()
    return f"{_stamp(at)}-{sender}-{secrets.token_hex(4)}", format_time(at)


def store(
    inbox: Path,
    sender: str,
    subject: str | None,
    body: str,
    *,
    planned: tuple[str, str] | None = None,
) -> PeerMessage:
    """Write one accepted message durably into ``inbox``; ``InvalidName`` for a bad sender.

    ``planned`` is the ``(id, received_at)`` a receipt already promised (``new_id``): the message
    gets exactly that id, and ``Conflict`` if a message has it.
    """
    validate_agent(sender, "peer name")
    while True:
        msg_id, received_at = planned or new_id(sender)
        data = record_text(sender, subject, body, received_at)
        path = inbox / f"{msg_id}.json"
        try:  # unnamed until whole; concurrent messages share the inbox's directory fsync
            atomic_create(path, data, mode=0o640, concurrent=True)
        except Conflict:
            if planned is not None:
                raise
            continue  # 32 random bits collided within one millisecond: draw again
        return PeerMessage(msg_id, sender, subject, body, received_at, path)


def is_stored(inbox: Path, msg_id: str) -> bool:
    """Whether message ``msg_id`` is in ``inbox`` or was processed (moved to ``processed/``).

    ``process`` links into ``processed/`` before it unlinks, so looking here first and there
    second finds a message being processed at the same moment.
    """
    if not msg_id or "/" in msg_id or msg_id.startswith(".") or "\0" in msg_id:
        return False
    name = f"{msg_id}.json"
    return (inbox / name).is_file() or (inbox / PROCESSED / name).is_file()


# A stored record is a capped body plus a few short fields; anything much larger is not ours.
_MAX_RECORD_BYTES = 4 * PEER_BODY_CAP


def _read_record(path: Path) -> bytes:
    """The bytes of a stored record; ``FormatError`` for anything but a regular file of sane
    size (a FIFO would block the reader, a symlink could point anywhere)."""
    try:
        return read_regular(path, _MAX_RECORD_BYTES)
    except OSError as e:
        raise FormatError(e.strerror or str(e), path=path) from None


def _load(path: Path) -> PeerMessage:
    doc = load_json(_read_record(path), path=path)
    if not isinstance(doc, dict):
        raise FormatError("expected a JSON object", path=path)
    sender, body = doc.get("from"), doc.get("body")
    subject, received_at = doc.get("subject"), doc.get("received_at")
    if not isinstance(sender, str) or not isinstance(body, str):
        raise FormatError("needs string 'from' and 'body'", path=path)
    if subject is not None and not isinstance(subject, str):
        raise FormatError("'subject' must be a string or null", path=path)
    parse_time(received_at, field="received_at", path=str(path))
    return PeerMessage(path.stem, sender, subject, body, str(received_at), path)


def is_message_name(name: str) -> bool:
    """Whether ``name`` is a stored message's file name (``<id>.json``, not a dot-name)."""
    return name.endswith(".json") and not name.startswith(".") and len(name) > len(".json")


def read_message(path: Path) -> PeerMessage:
    """The stored message at ``path``, read bounded; one that does not parse comes back with its
    ``error`` set (never raises for content)."""
    try:
        return _load(path)
    except FormatError as e:
        return PeerMessage(path.name.removesuffix(".json"), "?", None, "", "", path, error=str(e))


def inbox_messages(inbox: Path, *, processed: bool = False) -> list[PeerMessage]:
    """The messages waiting in ``inbox`` (or already processed), oldest first.

    A file that does not parse is listed with its ``error`` (never skipped silently, and never
    hiding the messages beside it).
    """
    directory = inbox / PROCESSED if processed else inbox
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    return [read_message(directory / n) for n in names if is_message_name(n)]


def _find(inbox: Path, msg_id: str) -> Path:
    name = msg_id.removesuffix(".json")
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise FormatError(f"not a message id: {msg_id!r}")
    path = inbox / f"{name}.json"
    if path.is_file():
        return path
    matches = (
        sorted(
            n for n in os.listdir(inbox) if n.endswith(f"-{name}.json") and not n.startswith(".")
        )
        if inbox.is_dir()
        else []
    )
    if len(matches) == 1:
        return inbox / matches[0]
    if (inbox / PROCESSED / f"{name}.json").exists():
        raise Conflict(f"message {name} is already processed")
    raise NotFound(f"no message {name!r} in the inbox", path=inbox)


def process(inbox: Path, msg_id: str) -> Path:
    """Move message ``msg_id`` (its id, or its random suffix) into ``processed/``; ``NotFound``."""
    src = _find(inbox, msg_id)
    dest_dir = inbox / PROCESSED
    dest_dir.mkdir(mode=0o750, exist_ok=True)
    dest = dest_dir / src.name
    try:  # a name in processed/ is never overwritten, even in a race
        safe_move(src, dest)
    except Conflict:
        raise Conflict("already in processed/; mailslot never overwrites", path=dest) from None
    return dest


def send(
    keys_file: Path,
    peer: str,
    body: str,
    subject: str | None = None,
    *,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """POST one message to peer ``peer``'s inbox; return the server's receipt.

    Raises ``NotFound`` for a peer missing from the keys file, ``LimitExceeded``/``FormatError``
    for a payload the server would refuse (checked here first), ``PeerRefused`` for a refusal,
    ``PeerUnreachable`` for a server that does not answer.
    """
    import httpx

    key = key_for(keys_file, peer)
    payload = {"body": body} if subject is None else {"subject": subject, "body": body}
    raw = json.dumps(payload, ensure_ascii=False).encode()
    parse_payload(raw)
    headers = {
        "Authorization": f"Bearer {key.token}",
        "Content-Type": "application/json",
        # One per message, the same on every try: the inbox stores a retried message once.
        "Idempotency-Key": secrets.token_urlsafe(16),
    }
    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            r = httpx.post(
                key.url, content=raw, headers=headers, timeout=timeout, follow_redirects=False
            )
        except httpx.TransportError as e:  # reset, refused, timed out: stored or not, unknown
            if attempt == SEND_ATTEMPTS:
                raise PeerUnreachable(f"cannot reach peer {peer!r} at {key.url}: {e}") from None
        except httpx.HTTPError as e:
            raise PeerUnreachable(f"cannot reach peer {peer!r} at {key.url}: {e}") from None
        else:
            if r.status_code not in _RETRY_STATUS or attempt == SEND_ATTEMPTS:
                break
        time.sleep(SEND_BACKOFF_S * attempt)
    try:
        answer: Any = r.json()
    except ValueError:
        answer = {}
    if not r.is_success or not isinstance(answer, dict):
        reason = answer.get("error") if isinstance(answer, dict) else None
        raise PeerRefused(
            f"peer {peer!r} refused the message: HTTP {r.status_code}: {reason}",
            status=r.status_code,
        )
    return answer

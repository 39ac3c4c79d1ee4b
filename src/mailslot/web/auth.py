"""Peer tokens: who may post to this inbox (peers file) and how this box posts to others (keys).

Two files, on purpose, because the two sides hold different secrets:

* The **peers file** (``--peers``, server side, kind ``mailslot-peers``) lists who may post to
  *this* inbox. It stores each token's SHA-256 only, with the peer's name, address and limits.
  A stolen peers file cannot be used to post. Tokens are 256 random bits, so a plain hash is
  enough (no password stretching: there is nothing to guess).
* The **keys file** (``--keys``, sender side, kind ``mailslot-peer-keys``) holds, per remote
  peer, the inbox URL and the plaintext token that remote peer issued to us. It is written 0600.

Each file names its kind, and each loader refuses the other kind, so pasting one where the other
belongs is an error, not a silent misconfiguration. Identity: ``match_token`` hashes the
presented token and compares it with every stored hash in constant time (no early exit), so the
response time says nothing about which peer or how many bytes matched.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mailslot.core.clock import format_time
from mailslot.core.errors import Conflict, FormatError, NotFound
from mailslot.core.formats import load_json
from mailslot.core.fsio import atomic_write, file_lock
from mailslot.core.names import validate_agent
from mailslot.web.settings import PEER_PER_HOUR

__all__ = [
    "KEYS_KIND",
    "PEERS_KIND",
    "KeyEntry",
    "PeerEntry",
    "PeerRegistry",
    "add_key",
    "hash_token",
    "inbox_url",
    "key_for",
    "load_keys",
    "load_peers",
    "match_token",
    "new_token",
    "revoke_token",
]

PEERS_KIND = "mailslot-peers"
KEYS_KIND = "mailslot-peer-keys"
# 32 bytes = 256 bits from the OS CSPRNG: unguessable, so one SHA-256 is a sufficient store.
TOKEN_BYTES = 32
TOKEN_PREFIX = "mst_"  # noqa: S105 - recognisable in a leaked log or paste, so it can be found and revoked


@dataclass(frozen=True)
class PeerEntry:
    """One peer allowed to post here: its name, the hash of its token, its address and limit."""

    name: str
    token_sha256: str
    address: str | None
    per_hour: int | None
    created_at: str


@dataclass(frozen=True)
class KeyEntry:
    """One remote inbox this box may post to: its URL and the token it issued to us."""

    name: str
    url: str
    token: str


def hash_token(token: str) -> str:
    """The hex SHA-256 of ``token`` (what the peers file stores)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _read_doc(path: Path, kind: str, other: str, hint: str) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {"kind": kind, "version": 1, "peers": {}}
    doc = load_json(raw, path=path)
    if not isinstance(doc, dict) or not isinstance(doc.get("peers"), dict):
        raise FormatError("expected an object with a 'peers' object", path=path)
    if doc.get("kind") == other:
        raise FormatError(f"this is a {other} file; {hint}", path=path)
    if doc.get("kind") != kind:
        raise FormatError(f"expected kind {kind!r}, got {doc.get('kind')!r}", path=path)
    return doc


def _write_doc(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc, indent=2, sort_keys=True) + "\n", mode=0o600)


def load_peers(path: Path) -> dict[str, PeerEntry]:
    """The peers allowed to post (server side); ``FormatError`` if the file is not a peers file."""
    doc = _read_doc(path, PEERS_KIND, KEYS_KIND, "the server needs the peers file (hashes)")
    out: dict[str, PeerEntry] = {}
    for name, rec in doc["peers"].items():
        validate_agent(name, "peer name")
        if not isinstance(rec, dict) or "token" in rec:
            raise FormatError("a peers file holds token hashes only", path=path, field=name)
        digest = rec.get("token_sha256")
        if not isinstance(digest, str) or len(digest) != 64:
            raise FormatError("token_sha256 must be 64 hex digits", path=path, field=name)
        per_hour = rec.get("per_hour")
        if per_hour is not None and (not isinstance(per_hour, int) or per_hour < 1):
            raise FormatError("per_hour must be a positive integer", path=path, field=name)
        address = rec.get("address")
        out[name] = PeerEntry(
            name,
            digest.lower(),
            address if isinstance(address, str) else None,
            per_hour,
            str(rec.get("created_at", "")),
        )
    return out


def new_token(
    path: Path,
    name: str,
    *,
    address: str | None = None,
    per_hour: int | None = None,
    replace: bool = False,
) -> str:
    """Make a token for peer ``name``, store its hash, return the token (shown once).

    Raises ``InvalidName`` for a bad name, ``Conflict`` if the peer exists and not ``replace``.
    """
    validate_agent(name, "peer name")
    if per_hour is not None and per_hour < 1:
        raise FormatError("per_hour must be a positive integer", field="per_hour")
    if address is not None:
        _check_url(address, "address")
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_name(f".{path.name}.lock")):
        doc = _read_doc(path, PEERS_KIND, KEYS_KIND, "tokens are issued into the peers file")
        if name in doc["peers"] and not replace:
            raise Conflict(f"peer {name!r} already has a token; pass --replace to issue a new one")
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        rec: dict[str, Any] = {"token_sha256": hash_token(token), "created_at": format_time()}
        if address is not None:
            rec["address"] = address
        # The limit is written out, so the file says what each peer may do (it stores each
        # peer's name, address and limits); edit it to change one peer's limit.
        rec["per_hour"] = per_hour if per_hour is not None else PEER_PER_HOUR
        doc["peers"][name] = rec
        _write_doc(path, doc)
    return token


def revoke_token(path: Path, name: str) -> None:
    """Remove peer ``name`` from the peers file; ``NotFound`` if it is not there."""
    with file_lock(path.with_name(f".{path.name}.lock")):
        doc = _read_doc(path, PEERS_KIND, KEYS_KIND, "tokens are revoked in the peers file")
        if name not in doc["peers"]:
            raise NotFound(f"no peer {name!r}; known: {', '.join(sorted(doc['peers'])) or 'none'}")
        del doc["peers"][name]
        _write_doc(path, doc)


def match_token(peers: dict[str, PeerEntry], token: str) -> PeerEntry | None:
    """The peer whose token this is, or None; compares every hash in constant time."""
    digest = hash_token(token).encode()
    found: PeerEntry | None = None
    for entry in peers.values():  # no early exit: the time is the same wherever it matches
        if hmac.compare_digest(digest, entry.token_sha256.encode()):
            found = entry
    return found


class PeerRegistry:
    """The peers file as the server sees it, re-read when it changes (a revoke takes effect at
    once, no restart). A file that cannot be read admits nobody (fail safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._peers: dict[str, PeerEntry] = {}
        self.current()  # a broken file fails at start-up, loudly

    def current(self) -> dict[str, PeerEntry]:
        """The peers now; ``MailslotError`` if the file is unreadable or malformed."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise NotFound(
                "no peers file; issue a token with 'peer token new'", path=self.path
            ) from None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            return self._peers
        # Worker threads call this concurrently: build the new view, then swap it in whole.
        peers = load_peers(self.path)
        self._peers, self._stamp = peers, stamp
        return peers


def _check_url(url: str, field: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FormatError(f"expected an http(s) URL, got {url!r}", field=field)
    if parts.username or parts.password:
        raise FormatError("a URL must not carry credentials", field=field)
    return url


def inbox_url(url: str) -> str:
    """``url`` with ``/inbox`` as its path when it has none; ``FormatError`` if not http(s)."""
    _check_url(url, "url")
    parts = urlsplit(url)
    path = parts.path if parts.path not in ("", "/") else "/inbox"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def load_keys(path: Path) -> dict[str, KeyEntry]:
    """The remote inboxes this box may post to (sender side); ``FormatError`` if malformed."""
    doc = _read_doc(path, KEYS_KIND, PEERS_KIND, "'peer send' needs the keys file (plaintext)")
    out: dict[str, KeyEntry] = {}
    for name, rec in doc["peers"].items():
        validate_agent(name, "peer name")
        if not isinstance(rec, dict):
            raise FormatError("expected an object", path=path, field=name)
        url, token = rec.get("url"), rec.get("token")
        if not isinstance(url, str) or not isinstance(token, str) or not token:
            raise FormatError("needs 'url' and 'token'", path=path, field=name)
        out[name] = KeyEntry(name, url, token)
    return out


def _token_problem(token: str) -> str | None:
    """What is wrong with ``token`` as read (stripped), in words; ``None`` when it looks whole.

    The token itself is never echoed: the message says only what shape it had.
    """
    if not token:
        return "the input was empty; give the token 'peer token new' printed (< token.txt)"
    lines = [line for line in token.splitlines() if line.strip()]
    if len(lines) > 1:
        hint = (
            "; a line starting with '#' is a note, not part of the token"
            if any(line.lstrip().startswith("#") for line in lines)
            else ""
        )
        return f"expected the token alone on one line, got {len(lines)} lines{hint}"
    if any(c.isspace() for c in token):
        return "the token contains spaces; expected one word, as 'peer token new' printed it"
    return None


def add_key(path: Path, name: str, url: str, token: str, *, replace: bool = False) -> KeyEntry:
    """Record the token peer ``name`` issued us for its inbox at ``url``.

    Raises ``InvalidName``, ``FormatError`` (URL, empty token) or ``Conflict`` (exists).
    """
    validate_agent(name, "peer name")
    token = token.strip()
    problem = _token_problem(token)
    if problem is not None:
        raise FormatError(problem, field="token")
    entry = KeyEntry(name, inbox_url(url), token)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_name(f".{path.name}.lock")):
        doc = _read_doc(path, KEYS_KIND, PEERS_KIND, "keys are added to the keys file")
        if name in doc["peers"] and not replace:
            raise Conflict(f"peer {name!r} is already in the keys file; pass --replace")
        doc["peers"][name] = {"url": entry.url, "token": entry.token, "added_at": format_time()}
        _write_doc(path, doc)
    return entry


def key_for(path: Path, name: str) -> KeyEntry:
    """The key for peer ``name``; ``NotFound`` listing the known peers (never a new address)."""
    keys = load_keys(path)
    if name not in keys:
        known = ", ".join(sorted(keys)) or "none"
        raise NotFound(f"unknown peer {name!r} (known peers: {known})", path=path)
    return keys[name]

"""The people who may act on the page: one credential per human (``mailslot web token NAME``).

The humans file (kind ``mailslot-web-humans``, 0600, in the user's state dir by default) stores
each credential's SHA-256 only, with the human's name: a stolen file cannot be used to log in.
Credentials are 256 random bits, so a plain hash is enough (nothing to guess). ``match`` compares
every stored hash in constant time, so the answer's timing says nothing about who matched.

A human named here is a person, never an agent: the page writes as them only where a channel
admits that name as a human (an exchange's ``humans`` table, a chat's human blocks).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time
from mailslot.core.cursor import state_dir
from mailslot.core.errors import Conflict, FormatError, NotFound
from mailslot.core.formats import load_json
from mailslot.core.fsio import atomic_write, file_lock, read_regular
from mailslot.core.names import validate_agent
from mailslot.web.auth import hash_token

__all__ = [
    "HUMANS_KIND",
    "Human",
    "HumanRegistry",
    "default_humans_file",
    "load_humans",
    "match",
    "new_credential",
    "revoke",
]

HUMANS_KIND = "mailslot-web-humans"
# 256 bits from the OS CSPRNG: unguessable, so one SHA-256 is a sufficient store.
CREDENTIAL_BYTES = 32
# Recognisable in a leaked paste, so it can be found and revoked.
CREDENTIAL_PREFIX = "msh_"
# A humans file lists a handful of people; anything this large is not one.
HUMANS_FILE_MAX = 1 << 20


@dataclass(frozen=True)
class Human:
    """One person who may log in: their name and the hash of their credential."""

    name: str
    token_sha256: str
    created_at: str


def default_humans_file() -> Path:
    """``<state dir>/web/humans.json``: the user's own, outside any shared folder."""
    return state_dir() / "web" / "humans.json"


def _read_doc(path: Path) -> dict[str, Any]:
    try:
        raw = read_regular(path, HUMANS_FILE_MAX)
    except FileNotFoundError:
        return {"kind": HUMANS_KIND, "version": 1, "humans": {}}
    doc = load_json(raw, path=path)
    if not isinstance(doc, dict) or not isinstance(doc.get("humans"), dict):
        raise FormatError("expected an object with a 'humans' object", path=path)
    if doc.get("kind") != HUMANS_KIND:
        raise FormatError(f"expected kind {HUMANS_KIND!r}, got {doc.get('kind')!r}", path=path)
    return doc


def _write_doc(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps(doc, indent=2, sort_keys=True) + "\n", mode=0o600)


def load_humans(path: Path) -> dict[str, Human]:
    """Everyone who may log in; ``FormatError`` if the file is not a humans file."""
    out: dict[str, Human] = {}
    for name, rec in _read_doc(path)["humans"].items():
        validate_agent(name, "human name")
        digest = rec.get("token_sha256") if isinstance(rec, dict) else None
        if not isinstance(digest, str) or len(digest) != 64:
            raise FormatError("token_sha256 must be 64 hex digits", path=path, field=name)
        out[name] = Human(name, digest.lower(), str(rec.get("created_at", "")))
    return out


def new_credential(path: Path, name: str, *, replace: bool = False) -> str:
    """Make a credential for human ``name``, store its hash, return it (shown once).

    Raises ``InvalidName`` for a bad name, ``Conflict`` if the human has one and not ``replace``.
    """
    validate_agent(name, "human name")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with file_lock(path.with_name(f".{path.name}.lock")):
        doc = _read_doc(path)
        if name in doc["humans"] and not replace:
            raise Conflict(f"{name!r} already has a credential; pass --replace to issue a new one")
        token = CREDENTIAL_PREFIX + secrets.token_urlsafe(CREDENTIAL_BYTES)
        doc["humans"][name] = {"token_sha256": hash_token(token), "created_at": format_time()}
        _write_doc(path, doc)
    return token


def revoke(path: Path, name: str) -> None:
    """Remove human ``name``'s credential; ``NotFound`` if they have none."""
    with file_lock(path.with_name(f".{path.name}.lock")):
        doc = _read_doc(path)
        if name not in doc["humans"]:
            known = ", ".join(sorted(doc["humans"])) or "none"
            raise NotFound(f"no human {name!r} (known: {known})", path=path)
        del doc["humans"][name]
        _write_doc(path, doc)


def match(humans: dict[str, Human], token: str) -> Human | None:
    """The human whose credential this is, or None; compares every hash in constant time."""
    digest = hash_token(token).encode()
    found: Human | None = None
    for human in humans.values():  # no early exit
        if hmac.compare_digest(digest, human.token_sha256.encode()):
            found = human
    return found


class HumanRegistry:
    """The humans file as the server sees it, re-read when it changes: a revoke takes effect on
    the next request. A file that cannot be read admits nobody (fail safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._humans: dict[str, Human] = {}

    def current(self) -> dict[str, Human]:
        """The humans now; empty when the file is missing or unreadable."""
        try:
            st = os.stat(self.path)
        except OSError:
            return {}
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            try:
                humans = load_humans(self.path)
            except (OSError, FormatError, ValueError):
                humans = {}
            self._humans, self._stamp = humans, stamp
        return self._humans

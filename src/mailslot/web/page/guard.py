"""Who may read and who may write, checked before any route runs.

* **Host** (DNS rebinding): a request whose ``Host`` is not the address the server listens on
  (or, on loopback, ``localhost``) is refused with 421 Misdirected Request, before any data.
* **Reading** is open on a loopback bind; on any other bind it needs a logged-in human.
* **Writing** always needs a logged-in human, even on loopback: any local agent can reach
  loopback, and an agent must never act as a person.
* **CSRF**: every POST carries the session's token in a form field, compared in constant time,
  and its ``Origin`` (or, without one, its ``Referer``) must be this server. The login form,
  which has no session yet, carries a token that must equal its cookie (double submit).
* Sessions live in this process only (a restart logs everyone out), in an HttpOnly,
  ``SameSite=Strict`` cookie, and end after ``SESSION_SECONDS``; a revoked credential ends its
  sessions at the next request. Kept on disk they would be a second store of bearer secrets
  that outlives the server, to guard and to leak, for little: a restart is rare and costs each
  person one paste of a credential that stays valid.
* Every response carries a strict CSP (no inline script, nothing from elsewhere).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import threading
import time
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from mailslot.core.errors import LimitExceeded

__all__ = [
    "CSP",
    "FORM_MAX_BYTES",
    "LOGIN_COOKIE",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "Session",
    "Sessions",
    "cookie_name",
    "host_allowed",
    "is_loopback",
    "new_login_token",
    "origin_allowed",
    "parse_form",
    "same_token",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SESSION_COOKIE = "mailslot_session"
LOGIN_COOKIE = "mailslot_login"
# A working day: a person who leaves the page open overnight logs in again in the morning.
SESSION_SECONDS = 12 * 3600
# The largest form: an exchange entry at its cap (256 KiB of UTF-8, which percent-encoding makes
# up to three times larger) plus the other fields.
FORM_MAX_BYTES = 1024 * 1024
# Sessions one server keeps at most: a handful of people, each with a few browsers.
SESSIONS_MAX = 1024


@dataclass(frozen=True)
class Session:
    """One logged-in browser: who, its CSRF token, when it ends."""

    human: str
    csrf: str
    expires: float


class Sessions:
    """Sessions by their random id; expired ones are dropped as they are met."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, Session] = {}

    def start(self, human: str) -> tuple[str, Session]:
        """A new session for ``human``: (cookie value, session)."""
        sid = secrets.token_urlsafe(32)
        session = Session(human, secrets.token_urlsafe(32), time.monotonic() + SESSION_SECONDS)
        with self._lock:
            if len(self._by_id) >= SESSIONS_MAX:
                self._expire()
                if len(self._by_id) >= SESSIONS_MAX:  # the oldest goes first
                    del self._by_id[next(iter(self._by_id))]
            self._by_id[sid] = session
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session for cookie value ``sid``, or None."""
        if not sid:
            return None
        with self._lock:
            session = self._by_id.get(sid)
            if session is not None and session.expires < time.monotonic():
                del self._by_id[sid]
                return None
        return session

    def end(self, sid: str | None) -> None:
        """Forget the session ``sid`` (logout)."""
        with self._lock:
            self._by_id.pop(sid or "", None)

    def _expire(self) -> None:
        t = time.monotonic()
        for sid in [s for s, v in self._by_id.items() if v.expires < t]:
            del self._by_id[sid]


def cookie_name(base: str, port: int) -> str:
    """``base`` for the server on ``port``: a browser keeps cookies per host, not per port, so
    two pages on one host would otherwise log each other out."""
    return f"{base}_{port}" if port else base


def new_login_token() -> str:
    """A token for one login form (double submit: the form field must equal the cookie)."""
    return secrets.token_urlsafe(32)


def same_token(given: str | None, expected: str | None) -> bool:
    """Whether two tokens are equal (constant time); never for a missing one."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def _names(bind_host: str) -> set[str]:
    ip = ipaddress.ip_address(bind_host)
    shown = f"[{bind_host}]" if ip.version == 6 else bind_host
    names = {shown}
    if ip.is_loopback:
        names |= {"localhost", "127.0.0.1", "[::1]"}
    return names


def host_allowed(host_header: str | None, bind_host: str, port: int) -> bool:
    """Whether ``Host`` names this server: its bind address (or localhost on loopback) and port."""
    if not host_header:
        return False
    return host_header.lower() in {f"{n}:{port}" for n in _names(bind_host)}


def origin_allowed(origin: str | None, referer: str | None, host_header: str) -> bool:
    """Whether a POST comes from a page of this server (``Origin``, else ``Referer``)."""
    source = origin if origin and origin != "null" else referer
    if not source:
        return False
    parts = urlsplit(source)
    return parts.scheme == "http" and parts.netloc.lower() == host_header.lower()


def is_loopback(bind_host: str) -> bool:
    """Whether ``bind_host`` is a loopback address (reading is open there)."""
    return ipaddress.ip_address(bind_host).is_loopback


def parse_form(body: bytes) -> dict[str, str]:
    """A urlencoded form's fields (the last value of each); ``LimitExceeded`` over the cap."""
    if len(body) > FORM_MAX_BYTES:
        raise LimitExceeded("form", FORM_MAX_BYTES, len(body), "bytes")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=32)
    return {k: v[-1] for k, v in fields.items()}

"""The public board, the Agora: posts in SQLite, moderation, the escaped page.

Invariants:

* A post is checked whole before it is stored (``parse_post``): ``agent`` 2-40 characters with no
  control, bidi-control or invisible characters (every format, Cf, character among them: a name
  must look like no other name) and no surrounding space, ``message`` 1-1200 characters with no
  control characters but newline and tab and no bidi control (other format characters, such
  as the zero-width joiner inside an emoji, are kept), ``link`` absent, null or ``""`` (all
  three: no link) or an absolute http(s) URL without credentials, whitespace or control
  characters.
  Refused, never truncated.
* The server assigns ``id`` (never reused: AUTOINCREMENT) and ``posted_at``; the client's
  ``id``/``posted_at`` are ignored. The source address is stored for moderation only and is not
  part of the public post.
* Writes are durable before the poster hears "stored" (WAL, ``synchronous=FULL``).
* The page escapes every field (``html.escape`` with quotes) and is served with a strict
  Content-Security-Policy, so a post is text on the page, never markup or script. The agent's
  name is a bidi isolate (``<bdi>``), so a right-to-left name cannot reorder the line it is on.
* Moderation (hide, ban) goes through the same database, so a running server sees it at once.
"""

from __future__ import annotations

import hashlib
import html
import ipaddress
import sqlite3
import threading
import unicodedata
from base64 import b64encode
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mailslot.core.clock import format_time
from mailslot.core.errors import CannotOpen, FormatError, NoSpace, NotFound
from mailslot.core.formats import load_json
from mailslot.core.limits import check_bytes, check_chars
from mailslot.web.settings import BOARD_BODY_CAP, BOARD_NEWEST

__all__ = [
    "CSP",
    "Board",
    "NewPost",
    "moderate",
    "moderation_view",
    "parse_post",
    "parse_source",
    "render_page",
]

AGENT_MIN, AGENT_MAX = 2, 40  # the board's rule: an agent name of 2-40 characters
MESSAGE_MIN, MESSAGE_MAX = 1, 1200  # the board's rule: a message of 1-1200 characters
LINK_MAX = 2048  # the longest URL every browser and proxy handles
# Bidi controls (embeddings, overrides, isolates, marks): text that can reorder what follows it.
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# Invisible characters that are not format (Cf) characters: fillers, a grapheme joiner and
# variation selectors. Like the Cf ones (zero-width space and joiners, soft hyphen, word
# joiner, tags), they make "a\u200bb" display as "ab", a second name that looks like the first.
_INVISIBLE = {
    "\u034f",  # combining grapheme joiner
    "\u115f",
    "\u1160",
    "\u3164",
    "\uffa0",  # Hangul fillers
    "\u17b4",
    "\u17b5",  # Khmer inherent vowels
    *map(chr, range(0x180B, 0x1810)),  # Mongolian variation selectors
    *map(chr, range(0xFE00, 0xFE10)),  # variation selectors
    *map(chr, range(0xE0100, 0xE01F0)),  # variation selectors supplement
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS posts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL,
    message TEXT NOT NULL,
    link TEXT,
    posted_at TEXT NOT NULL,
    source TEXT NOT NULL,
    hidden INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS bans (
    source TEXT PRIMARY KEY,
    banned_at TEXT NOT NULL,
    reason TEXT
);
"""


@dataclass(frozen=True)
class NewPost:
    """A post as sent, already checked."""

    agent: str
    message: str
    link: str | None


def _bad_chars(text: str, allowed: str = "", *, invisible: bool = False) -> bool:
    """Whether ``text`` holds a control, surrogate, line/paragraph separator or bidi control
    (other than ``allowed``); with ``invisible``, also any format (Cf) or other invisible
    character."""
    for ch in text:
        if ch in allowed:
            continue
        category = unicodedata.category(ch)
        if category in ("Cc", "Cs", "Zl", "Zp") or ch in _BIDI:
            return True
        if invisible and (category == "Cf" or ch in _INVISIBLE):
            return True
    return False


def _check_link(link: str) -> str:
    check_chars("link", link, 1, LINK_MAX)
    if _bad_chars(link) or any(ch.isspace() for ch in link):
        raise FormatError("contains whitespace or control characters", field="link")
    parts = urlsplit(link)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise FormatError("must be an absolute http:// or https:// URL", field="link")
    if "@" in parts.netloc:
        raise FormatError("must not carry credentials (user@host)", field="link")
    try:
        if not parts.hostname:
            raise ValueError
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        raise FormatError("has no valid host", field="link") from None
    return link


def parse_post(raw: bytes | str, *, cap: int = BOARD_BODY_CAP) -> NewPost:
    """The post in a request body; ``LimitExceeded`` or ``FormatError`` when it is refused."""
    check_bytes("request body", raw, cap)
    doc = load_json(raw)
    if not isinstance(doc, dict):
        raise FormatError('expected a JSON object {"agent", "message", "link"?}')
    agent, message, link = doc.get("agent"), doc.get("message"), doc.get("link")
    if not isinstance(agent, str):
        raise FormatError("required, a string", field="agent")
    if not isinstance(message, str):
        raise FormatError("required, a string", field="message")
    check_chars("agent", agent, AGENT_MIN, AGENT_MAX)
    if agent != agent.strip() or _bad_chars(agent, invisible=True):
        raise FormatError(
            "no surrounding spaces, control, direction-override or invisible (format) characters",
            field="agent",
        )
    check_chars("message", message, MESSAGE_MIN, MESSAGE_MAX)
    if _bad_chars(message, allowed="\n\t"):
        raise FormatError("no control characters other than newline and tab", field="message")
    if link == "":  # the link is optional; an empty one is how many clients say "none"
        link = None
    if link is not None:
        if not isinstance(link, str):
            raise FormatError("must be a string or null", field="link")
        _check_link(link)
    return NewPost(agent, message, link)


def parse_source(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """A source to ban: an address or a network (``203.0.113.7``, ``2001:db8::/64``)."""
    try:
        net = ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise FormatError(f"not an IP address or network: {value!r}", field="source") from None
    return net


class Board:
    """The board's database. One connection, serialised by a lock; safe across threads, and
    other processes (moderation) may write the same file concurrently."""

    def __init__(self, db: Path, *, create: bool = True) -> None:
        if not create and not db.exists():
            raise NotFound("no board database here (start 'board serve' first)", path=db)
        db.parent.mkdir(parents=True, exist_ok=True)
        self.path = db
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA busy_timeout = 5000")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as e:
            raise CannotOpen(f"cannot open the board database: {e}", path=db) from None
        self._own_writes = 0
        self._bans_at: tuple[int, int] | None = None
        self._bans: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def version(self) -> tuple[int, int]:
        """Changes by anyone since opening: equal values mean the same posts and bans."""
        with self._lock:
            (data_version,) = self._db.execute("PRAGMA data_version").fetchone()
            return int(data_version), self._own_writes

    def _write(self, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        with self._lock:
            try:
                cur = self._db.execute(sql, args)
            except sqlite3.OperationalError as e:
                if e.sqlite_errorcode == sqlite3.SQLITE_FULL:
                    raise NoSpace("the board's disk is full", path=self.path) from None
                raise
            self._own_writes += 1
            return cur

    def add(self, post: NewPost, source: str) -> dict[str, Any]:
        """Store ``post`` from ``source``; return it as published ``{id, agent, ...}``."""
        posted_at = format_time()
        cur = self._write(
            "INSERT INTO posts (agent, message, link, posted_at, source) VALUES (?, ?, ?, ?, ?)",
            (post.agent, post.message, post.link, posted_at, source),
        )
        return {
            "id": cur.lastrowid,
            "agent": post.agent,
            "message": post.message,
            "link": post.link,
            "posted_at": posted_at,
        }

    def newest(self, limit: int = BOARD_NEWEST) -> list[dict[str, Any]]:
        """The ``limit`` newest visible posts, newest first, as published."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, agent, message, link, posted_at FROM posts WHERE hidden = 0 "
                "ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [dict(r) for r in rows]

    def moderation_list(self, *, limit: int = 200, hidden: bool = True) -> list[dict[str, Any]]:
        """Posts newest first with their source and hidden flag (the moderator's view)."""
        where = "" if hidden else "WHERE hidden = 0"
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, agent, message, link, posted_at, source, hidden FROM posts {where} "  # noqa: S608
                "ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [{**dict(r), "hidden": bool(r["hidden"])} for r in rows]

    def hide(self, post_id: int, *, hidden: bool = True) -> dict[str, Any]:
        """Hide (or show again) post ``post_id``; ``NotFound`` if there is none."""
        cur = self._write("UPDATE posts SET hidden = ? WHERE id = ?", (int(hidden), post_id))
        if cur.rowcount == 0:
            raise NotFound(f"no post {post_id}", path=self.path)
        return {"id": post_id, "hidden": hidden}

    def ban(self, source: str, reason: str | None = None) -> dict[str, Any]:
        """Refuse posts from ``source`` (an address or network); ``FormatError`` if not one."""
        net = str(parse_source(source))
        banned_at = format_time()
        self._write(
            "INSERT OR REPLACE INTO bans (source, banned_at, reason) VALUES (?, ?, ?)",
            (net, banned_at, reason),
        )
        return {"source": net, "banned_at": banned_at, "reason": reason}

    def unban(self, source: str) -> dict[str, Any]:
        """Lift the ban on ``source``; ``NotFound`` if it was not banned."""
        net = str(parse_source(source))
        if self._write("DELETE FROM bans WHERE source = ?", (net,)).rowcount == 0:
            raise NotFound(f"{net} is not banned", path=self.path)
        return {"source": net, "banned": False}

    def bans(self) -> list[dict[str, Any]]:
        """Every ban, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT source, banned_at, reason FROM bans ORDER BY banned_at"
            ).fetchall()
        return [dict(r) for r in rows]

    def is_banned(self, source: str) -> bool:
        """Whether ``source`` falls in a banned address or network."""
        version = self.version()
        if self._bans_at != version:
            self._bans = [parse_source(b["source"]) for b in self.bans()]
            self._bans_at = version
        try:
            ip = ipaddress.ip_address(source)
        except ValueError:
            return False
        return any(ip.version == n.version and ip in n for n in self._bans)


def moderation_view(db: Path, *, limit: int = 100, bans: bool = False) -> dict[str, Any]:
    """``{"posts": [...]}`` with sources and hidden flags, or ``{"bans": [...]}``; ``NotFound``."""
    board = Board(db, create=False)
    try:
        return {"bans": board.bans()} if bans else {"posts": board.moderation_list(limit=limit)}
    finally:
        board.close()


def moderate(db: Path, action: str, target: str, reason: str | None = None) -> dict[str, Any]:
    """Apply ``hide``/``unhide`` (target: a post id) or ``ban``/``unban`` (an address or
    network) to the board in ``db``; ``NotFound`` or ``FormatError`` when the target is not."""
    board = Board(db, create=False)
    try:
        if action in ("hide", "unhide"):
            if not target.isdigit():
                raise FormatError(f"not a post id: {target!r}", field="id")
            return board.hide(int(target), hidden=action == "hide")
        if action == "ban":
            return board.ban(target, reason)
        if action == "unban":
            return board.unban(target)
        raise FormatError(f"unknown action {action!r}", field="action")
    finally:
        board.close()


_STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}"
    "article{border-top:1px solid #ccc;padding:.6rem 0}"
    ".meta{color:#555;font-size:.85rem}"
    "p{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0}"
)
_STYLE_HASH = b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
# No script, no images, no forms, no frames: the page is text. Only our own inline style runs.
CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def render_page(posts: list[dict[str, Any]], title: str = "Agora") -> str:
    """The board as an HTML page; every field of every post is escaped."""
    items = []
    for p in posts:
        link = p.get("link")
        link_html = ""
        if isinstance(link, str) and urlsplit(link).scheme.lower() in ("http", "https"):
            link_html = (
                f' · <a href="{_e(link)}" rel="nofollow noopener noreferrer ugc">{_e(link)}</a>'
            )
        items.append(
            # <bdi>: right-to-left letters are allowed in a name, but isolated, so they cannot
            # pull the time after the name into their run and show "time · name".
            f'<article id="post-{_e(p["id"])}"><div class="meta"><b class="agent"><bdi>'
            f"{_e(p['agent'])}</bdi></b> · <time>{_e(p['posted_at'])}</time>{link_html}</div>"
            f'<p class="message">{_e(p["message"])}</p></article>'
        )
    body = "\n".join(items) or "<p>No posts yet.</p>"
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1>"
        '<p class="meta">Public board. Posts are data: stored verbatim, shown as text, '
        "moderated on a schedule, never executed. Post with "
        '<code>POST /api/agora {"agent", "message", "link"?}</code>; discovery at '
        '<a href="/.well-known/agent-card.json">/.well-known/agent-card.json</a>.</p>'
        f"{body}</body></html>\n"
    )

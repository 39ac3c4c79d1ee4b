"""Every setting of the two web apps, with its default and the reason for it (after rq's
``defaults.py``). Apps are built from these objects (``create_app(settings)``); nothing is read
from globals, so a test or the benchmark builds an app with other limits by passing other values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BOARD_BODY_CAP",
    "BOARD_NEWEST",
    "BOARD_POSTS_PER_DAY",
    "BOARD_POST_EVERY_S",
    "BOARD_REQUESTS_PER_MINUTE",
    "PEER_BODY_CAP",
    "PEER_PER_HOUR",
    "SERVER_BODY_TIMEOUT_S",
    "SERVER_HEADER_BYTES",
    "SERVER_HEADER_TIMEOUT_S",
    "SERVER_MAX_CONNECTIONS",
    "BoardSettings",
    "PeerSettings",
    "ServerLimits",
]

# A body is capped at 32 KB. A message says where the payload is; it is not the payload.
PEER_BODY_CAP = 32 * 1024
# Each peer is limited to 30 accepted messages an hour. A few-times-a-day cadence
# needs far fewer; 30 leaves room for a burst after a long outage without inviting a flood.
PEER_PER_HOUR = 30
# The subject is a one-line label shown in listings, not a second body.
PEER_SUBJECT_MAX = 200

# The board's body cap is 8 KB: 1,200 characters of message in UTF-8 (at most 4,800
# bytes) plus a name and a link fit; anything larger is not a board post.
BOARD_BODY_CAP = 8 * 1024
# Roughly one post every 20 seconds and 30 a day per source.
BOARD_POST_EVERY_S = 20
BOARD_POSTS_PER_DAY = 30
# Requests of any outcome a source may make to POST per minute: an honest poster needs 3 (one
# post per 20 s) plus a few refused tries; a flood of refused posts stops here, before parsing.
BOARD_REQUESTS_PER_MINUTE = 20
# GET /api/agora returns the 50 most recent posts.
BOARD_NEWEST = 50

# What one client may hold of a server (``web.guard``), for both servers.
# A request line and headers are under 1 KB and leave any real client in one write; 10 s covers a
# slow link on a loaded box, and bounds how long a client that trickles them (a slow-loris)
# holds a connection.
SERVER_HEADER_TIMEOUT_S = 10.0
# The largest body (32 KB) at a pessimistic 2 KB/s is 16 s; twice that. The same time bounds a
# client that stops taking its answer (the board's page is a few hundred KB at most).
SERVER_BODY_TIMEOUT_S = 30.0
# An honest request's headers are a few hundred bytes (the bearer token is the longest);
# nginx's default buffers hold 4 x 8 KB.
SERVER_HEADER_BYTES = 16 * 1024
# A fleet that wakes a few times a day opens a handful at once; 256 leaves room for a burst and
# stays well under the usual limit of 1,024 open files, so a crowd never exhausts them.
SERVER_MAX_CONNECTIONS = 256


@dataclass(frozen=True)
class ServerLimits:
    """What one client may hold of a server: deadlines, header bytes, a share of connections."""

    header_timeout: float = SERVER_HEADER_TIMEOUT_S
    body_timeout: float = SERVER_BODY_TIMEOUT_S
    header_bytes: int = SERVER_HEADER_BYTES
    max_connections: int = SERVER_MAX_CONNECTIONS


@dataclass(frozen=True)
class PeerSettings:
    """The peer inbox app: whose tokens it accepts, where messages land, its bounds."""

    peers_file: Path
    inbox: Path
    body_cap: int = PEER_BODY_CAP
    # Accepted messages per peer per hour when the peers file names no limit for the peer
    # (``token new`` always writes one). ``override_per_hour`` replaces every peer's limit
    # (``serve --per-hour``: the benchmark raises it).
    per_hour: int = PEER_PER_HOUR
    override_per_hour: int | None = None
    server: ServerLimits = ServerLimits()


@dataclass(frozen=True)
class BoardSettings:
    """The board app: its database, bounds, rate limits, proxy trust and discovery card."""

    db: Path
    body_cap: int = BOARD_BODY_CAP
    post_every_s: int = BOARD_POST_EVERY_S
    posts_per_day: int = BOARD_POSTS_PER_DAY
    requests_per_minute: int = BOARD_REQUESTS_PER_MINUTE
    # Addresses or networks of reverse proxies whose X-Forwarded-For is believed. Empty: the
    # TCP peer is the source, always (a forged header from anyone else changes nothing).
    trust_proxy: tuple[str, ...] = ()
    # The discovery card's config file (YAML); None serves a card built from defaults.
    card_file: Path | None = None
    # Peers file whose names and addresses the card lists as known peers (hashes never leave).
    peers_file: Path | None = None
    # Base URL the card advertises; None: derived from each request's own host.
    public_url: str | None = None
    server: ServerLimits = ServerLimits()

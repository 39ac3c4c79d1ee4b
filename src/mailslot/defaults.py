"""Values a channel and its faces share, in one module that imports nothing but the standard
library, so the command line and the MCP server can name them without importing a channel.

A face that needs a bound or a file name to build its help or its tool list imports it from
here; the channel imports the same name, so the two can never drift apart.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "SEARCH_LIMIT_DEFAULT",
    "SEARCH_LIMIT_MAX",
    "board_db",
    "peer_inbox",
    "peer_keys",
    "peers_file",
]

# The most hits one search returns, and how many the command line shows unless told.
SEARCH_LIMIT_MAX = 500
SEARCH_LIMIT_DEFAULT = 20


# Where the web channel keeps its files under a mailslot root (pass ``Path()`` for the path
# relative to the root).
def peer_inbox(root: Path) -> Path:
    """The peer inbox's directory of received messages."""
    return root / "peer" / "inbox"


def peers_file(root: Path) -> Path:
    """The peer inbox's list of peers and their token hashes."""
    return root / "peer" / "peers.json"


def peer_keys(root: Path) -> Path:
    """The peer inbox's signing keys."""
    return root / "peer" / "keys.json"


def board_db(root: Path) -> Path:
    """The board's SQLite database."""
    return root / "board" / "agora.db"

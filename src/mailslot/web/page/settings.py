"""The page's settings, with their defaults and why (``create_app(settings)``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mailslot.web.page.guard import is_loopback
from mailslot.web.settings import ServerLimits

__all__ = ["DEFAULT_BIND", "PAGE_ROWS", "SSE_PING_SECONDS", "SSE_STREAMS_MAX", "PageSettings"]

DEFAULT_BIND = "127.0.0.1:8700"
# Topics per page of the exchange table: a screenful or two; 10,000 rows would be a megabyte of
# HTML that nobody reads.
PAGE_ROWS = 100
# An idle event stream sends a comment this often, so a proxy or the browser keeps it open and
# a closed tab is noticed within this time.
SSE_PING_SECONDS = 15.0
# Open event streams one server serves at once: each holds a worker thread while it waits.
SSE_STREAMS_MAX = 32


@dataclass(frozen=True)
class PageSettings:
    """Which roots the page shows, where it listens, who may log in."""

    roots: tuple[Path, ...]
    humans_file: Path
    bind_host: str = "127.0.0.1"
    # The port the server listens on; 0: whatever the listening socket has (tests, port 0).
    port: int = 0
    rows: int = PAGE_ROWS
    sse_ping: float = SSE_PING_SECONDS
    sse_streams: int = SSE_STREAMS_MAX
    server: ServerLimits = field(default_factory=ServerLimits)

    @property
    def reading_open(self) -> bool:
        """Reading needs no login on a loopback bind; everywhere else it does."""
        return is_loopback(self.bind_host)

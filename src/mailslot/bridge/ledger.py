"""What the bridge remembers between runs: revisions, and the conflicts and refusals it saw.

Files are the truth and the streams carry them; the ledger only saves work and keeps alerts
visible. Losing it is safe: STATE revisions restart from the clock (still above the ones sent,
unless the clock went back), a receiver then takes the next revision it sees, and entries are
idempotent by subject. So it is written atomically but without a synchronous fsync, at most once
per ``FLUSH_SECONDS`` and on the way out.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time
from mailslot.core.fsio import atomic_write, read_regular

__all__ = ["LEDGER_NAME", "Ledger"]

LEDGER_NAME = "ledger.json"
# Alerts kept for status; the totals count them all.
KEEP_ALERTS = 100
MAX_LEDGER_BYTES = 64 << 20
FLUSH_SECONDS = 1.0


class Ledger:
    """The bridge's memory: revisions sent and received, alert lists and their totals."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LEDGER_NAME
        self.received: dict[str, int] = {}  # "<exchange>/<relpath>" -> STATE revision in place
        self.sent: dict[str, list[Any]] = {}  # "<exchange>/<relpath>" -> [sha256, revision]
        # "<exchange>/<relpath>" -> sha256 of the entry as this host published it (write-once)
        self.published: dict[str, str] = {}
        # "<exchange>/<relpath>" -> what an entry published from here differs in now: its
        # peers keep the published version, so this stays until the bytes are put back
        self.diverged: dict[str, dict[str, Any]] = {}
        self.conflicts: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.totals: dict[str, int] = {"conflicts": 0, "refused": 0}
        self.places: dict[str, str] = {}  # "<exchange>/<topic>" -> "live" | "done", as seen
        self.place_rev = 0  # the last archive/reopen revision this host sent
        self._dirty = False
        self._flushed = 0.0

    @classmethod
    def load(cls, state_dir: Path) -> Ledger:
        """The ledger in ``state_dir`` (empty when missing or unreadable)."""
        ledger = cls(state_dir)
        try:
            data = json.loads(read_regular(ledger.path, MAX_LEDGER_BYTES))
        except (OSError, ValueError):
            return ledger
        if isinstance(data, dict):
            ledger.received = {str(k): int(v) for k, v in (data.get("received") or {}).items()}
            ledger.sent = {str(k): list(v) for k, v in (data.get("sent") or {}).items()}
            ledger.published = {str(k): str(v) for k, v in (data.get("published") or {}).items()}
            ledger.diverged = {str(k): dict(v) for k, v in (data.get("diverged") or {}).items()}
            ledger.conflicts = list(data.get("conflicts") or [])[-KEEP_ALERTS:]
            ledger.refused = list(data.get("refused") or [])[-KEEP_ALERTS:]
            ledger.totals.update({k: int(v) for k, v in (data.get("totals") or {}).items()})
            ledger.places = {str(k): str(v) for k, v in (data.get("places") or {}).items()}
            ledger.place_rev = int(data.get("place_rev") or 0)
        return ledger

    def touch(self) -> None:
        """Mark the ledger changed (after ``received`` was updated in place)."""
        self._dirty = True

    def next_revision(self, key: str, sha: str) -> int | None:
        """The revision to send ``key`` with content ``sha`` under; ``None`` if sent already."""
        last = self.sent.get(key)
        if last is not None and last[0] == sha:
            return None
        previous = int(last[1]) if last is not None else 0
        return max(time.time_ns(), previous + 1)

    def mark_sent(self, key: str, sha: str, rev: int) -> None:
        """Record that ``key`` went out with ``sha`` as revision ``rev``."""
        self.sent[key] = [sha, rev]
        self._dirty = True

    def mark_published(self, key: str, sha: str) -> None:
        """Record that entry ``key`` went out with content ``sha`` (its one version)."""
        self.published[key] = sha
        self._dirty = True

    def diverge(self, key: str, sha: str, **fields: Any) -> bool:
        """Record that entry ``key`` now holds ``sha``, not what was published; ``True`` the
        first time it holds these bytes (raise the alert then, once)."""
        last = self.diverged.get(key)
        if last is not None and last.get("now") == sha:
            return False
        self.diverged[key] = {"at": format_time(), "now": sha, **fields}
        self._dirty = True
        return True

    def settle(self, key: str) -> None:
        """Entry ``key`` is as published again (or gone from this host's live folders)."""
        if self.diverged.pop(key, None) is not None:
            self._dirty = True

    def set_place(self, key: str, place: str) -> None:
        """Record where a topic is now (``live`` or ``done``) on this host."""
        self.places[key] = place
        self._dirty = True

    def alert(self, kind: str, **fields: Any) -> None:
        """Record a conflict or a refusal (kept for status, counted in ``totals``)."""
        bucket = self.conflicts if kind == "conflicts" else self.refused
        bucket.append({"at": format_time(), **fields})
        del bucket[:-KEEP_ALERTS]
        self.totals[kind] = self.totals.get(kind, 0) + 1
        self._dirty = True

    def flush(self, *, force: bool = False) -> None:
        """Write the ledger if it changed (at most every ``FLUSH_SECONDS`` unless ``force``)."""
        now = time.monotonic()
        if not self._dirty or (not force and now - self._flushed < FLUSH_SECONDS):
            return
        data = {
            "received": self.received,
            "sent": self.sent,
            "published": self.published,
            "diverged": self.diverged,
            "conflicts": self.conflicts,
            "refused": self.refused,
            "totals": self.totals,
            "places": self.places,
            "place_rev": self.place_rev,
        }
        with contextlib.suppress(FileNotFoundError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, sort_keys=True), mode=0o600, durable=False)
        self._dirty = False
        self._flushed = now

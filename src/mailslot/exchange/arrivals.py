"""An exchange bridged across hosts: which host runs the tick, and when entries reached readers.

A bridge (``mailslot bridge``) marks an exchange it carries with ``.mailslot/bridge``: this host,
the home host (the one that runs the tick) and which host hosts each side. The tick runs on the
home host only. There, an entry's arrival for the guard is when it reached its *reader's* host,
not the home host: the reading host's bridge sends an arrival receipt, kept here in
``.mailslot/arrivals/to-<side>/<topic>.jsonl``, one line ``{"name": entry name, "ns": arrival ns}``
appended per receipt by the bridge only (the first line for an entry stands; a last line without
its newline is a write cut short and is not read; a file grown large with such waste is rewritten
whole). A side that marked ``done`` before an entry reached it is held; an entry whose receipt has
not come back yet is unresolved, so the topic is not archived (the fail-safe direction).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from mailslot.core.errors import Conflict
from mailslot.core.formats import load_yaml
from mailslot.core.fsio import append_unsynced, atomic_write, read_regular
from mailslot.core.names import validate_agent, validate_topic

__all__ = [
    "ARRIVALS_DIR",
    "MARKER_NAME",
    "Bridged",
    "arrivals",
    "bridged",
    "record_arrival",
    "record_arrivals",
]

MARKER_NAME = "bridge"
ARRIVALS_DIR = "arrivals"
_MAX_MARKER_BYTES = 64 * 1024
# A topic with this many entries is far past any real conversation.
_MAX_ARRIVALS_BYTES = 16 << 20
# Past this size a file mostly of damaged or repeated lines is rewritten with its receipts only.
_COMPACT_BYTES = 256 * 1024


class Bridged(NamedTuple):
    """What ``.mailslot/bridge`` says."""

    host: str
    home: str
    hosts: dict[str, str]  # side -> host

    @property
    def is_home(self) -> bool:
        """Whether this host runs the tick."""
        return self.host == self.home

    def off_home(self, side: str) -> bool:
        """Whether ``side`` reads and writes on a host other than the home host."""
        return self.hosts.get(side, self.home) != self.home


def bridged(meta: Path) -> Bridged | None:
    """The bridge marker in ``meta`` (an exchange's ``.mailslot``), or ``None`` when the exchange
    is not bridged. An unreadable marker is ``Conflict``: the tick must not guess its home."""
    path = meta / MARKER_NAME
    try:
        raw = read_regular(path, _MAX_MARKER_BYTES)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Conflict(f"cannot read the bridge marker: {e.strerror}", path=path) from None
    try:
        data = load_yaml(raw, path=path)
        hosts = {
            validate_agent(str(s), "side"): validate_agent(str(h), "host")
            for s, h in (data.get("hosts") or {}).items()
        }
        return Bridged(
            validate_agent(str(data.get("host")), "host"),
            validate_agent(str(data.get("home")), "host"),
            hosts,
        )
    except Exception as e:
        raise Conflict(f"unreadable bridge marker: {e}", path=path) from None


def _arrivals_path(meta: Path, inbox_side: str, topic: str) -> Path:
    validate_agent(inbox_side, "side")
    validate_topic(topic)
    return meta / ARRIVALS_DIR / f"to-{inbox_side}" / f"{topic}.jsonl"


def _line(name: str, ns: int) -> bytes:
    return json.dumps({"name": name, "ns": ns}).encode() + b"\n"


def _parse(raw: bytes) -> dict[str, int]:
    """The receipts in ``raw``: whole lines only, the first per entry; a damaged line skipped."""
    known: dict[str, int] = {}
    for line in raw.split(b"\n")[:-1]:  # the piece after the last newline is not whole
        try:
            item = json.loads(line)
            name, ns = item["name"], item["ns"]
        except (ValueError, TypeError, KeyError):
            continue
        if isinstance(name, str) and type(ns) is int and name not in known:
            known[name] = ns
    return known


def arrivals(meta: Path, inbox_side: str, topic: str) -> dict[str, int]:
    """``{entry name: ns}``: when each entry of ``to-<inbox_side>/<topic>`` reached its reader's
    host, per the receipts received so far (empty when none, or the file is over its bound:
    every entry then unresolved, the fail-safe direction)."""
    try:
        raw = read_regular(_arrivals_path(meta, inbox_side, topic), _MAX_ARRIVALS_BYTES)
    except OSError:
        return {}
    return _parse(raw)


def record_arrival(meta: Path, inbox_side: str, topic: str, name: str, ns: int) -> bool:
    """Record that entry ``name`` reached its reader's host at ``ns``; whether it was new (the
    first receipt stands: a later one for the same entry is a redelivery)."""
    return name in record_arrivals(meta, inbox_side, topic, {name: ns})


def record_arrivals(meta: Path, inbox_side: str, topic: str, found: dict[str, int]) -> set[str]:
    """Record receipts ``{entry name: ns}`` of one topic with one read and one append; the names
    that were new (the first receipt stands: a later one for the same entry is a redelivery). A
    file whose damaged or repeated lines are over a quarter of it, past ``_COMPACT_BYTES``, is
    rewritten with its receipts only. None is new when the file is over its bound."""
    path = _arrivals_path(meta, inbox_side, topic)
    try:
        raw = read_regular(path, _MAX_ARRIVALS_BYTES)
    except FileNotFoundError:
        raw = b""
    except OSError:
        return set()  # unreadable or over its bound: nothing read, nothing added
    known = _parse(raw)
    new = {name: ns for name, ns in found.items() if name not in known}
    if not new:
        return set()
    known.update(new)
    path.parent.mkdir(parents=True, exist_ok=True)
    # no fsync: a receipt arrives for every entry; one lost to a power cut leaves the entry
    # unresolved (no archive, shown as waiting), the fail-safe direction
    lines = b"".join(_line(n, t) for n, t in new.items())
    clean = b"".join(_line(n, t) for n, t in known.items())
    if len(raw) > _COMPACT_BYTES and len(raw) + len(lines) - len(clean) > len(raw) // 4:
        atomic_write(path, clean, mode=0o644, durable=False)
    else:
        append_unsynced(path, lines, mode=0o644, fresh_line=True)
    return set(new)

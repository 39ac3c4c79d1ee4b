"""The shared-directory bus: one directory is the whole message bus.

Agents that run as the same user on one host and trust each other share a directory holding an
append-only ``LOG.md`` (:mod:`.log`), a drop folder ``outbox/`` (:mod:`.outbox`), per-recipient
task checklists (:mod:`.tasks`) and the ownership charter ``DIVISION-OF-WORK.md``
(:mod:`.owners`); :mod:`.layout` names every path and lays a new bus out; :mod:`.roster` says
who the bus knows (task files are addressed only to them). No broker, no daemon:
files everyone reads and a rule about who writes which one. It gives nothing across a trust or
machine boundary (a shared directory is full access); the peer inbox and the board do that.
"""

from __future__ import annotations

__all__ = ["layout", "log", "outbox", "owners", "roster", "tasks"]

"""Who a bus knows: the agents a task file may be addressed to.

Strict addressing: ``tasks add --for NAME`` would otherwise create ``tasks-NAME.md``
for any name at all, and a typo (``lantren``) becomes a phantom inbox nobody ever reads. A bus
has no member list of its own, so an agent is *known* when the bus already shows it in one of
the places agents read first: a writer in ``DIVISION-OF-WORK.md``, a name on a line of
``LOG.md``, or the owner of an existing ``tasks-NAME.md`` (created by hand or earlier). A new
agent becomes known by logging its first waking or by a row in the charter. An unreadable
charter is not skipped: its ``FormatError`` stops the write (fail safe).
"""

from __future__ import annotations

from pathlib import Path

from mailslot.bus import log, owners
from mailslot.bus.layout import Layout
from mailslot.core.errors import NotFound
from mailslot.core.names import AGENT_RE

__all__ = ["known_agents", "require_known"]


def known_agents(root: Path) -> list[str]:
    """The agents the bus at ``root`` names, sorted; ``NotFound``/``FormatError`` as its files."""
    layout = Layout.at(root)
    names = {r.writer for r in owners.load(root).rules}
    names |= {e.agent for e in log.read(root) if e.agent and AGENT_RE.fullmatch(e.agent)}
    for path in layout.root.glob("tasks-*.md"):
        name = path.name[len("tasks-") : -len(".md")]
        if AGENT_RE.fullmatch(name):
            names.add(name)
    return sorted(names)


def require_known(root: Path, name: str) -> None:
    """Return if ``name`` is known on the bus; else ``NotFound`` listing the known agents."""
    known = known_agents(root)
    if name not in known:
        raise NotFound(
            f"unknown agent {name!r} (known on this bus: {', '.join(known) or 'none'}); an "
            "agent becomes known by a row in DIVISION-OF-WORK.md or a line in LOG.md",
            path=Path(root).absolute(),
        )

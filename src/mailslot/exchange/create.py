"""``exchange init``: lay out a new exchange, all or nothing visible to the sides.

Creates ``to-<a>/``, ``to-<b>/`` (each with ``done/``) with the chosen modes, ``.mailslot/`` with
the config and a send lock both sides can read, CONVENTION.md, an empty INDEX.md, and a local git
repository with a first commit. Refuses a directory that already holds an exchange.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from mailslot.core.errors import Conflict, InvalidName, InvalidValue
from mailslot.core.fsio import atomic_write
from mailslot.core.names import validate_agent
from mailslot.exchange.convention import render_convention
from mailslot.exchange.gitlog import GITIGNORE, commit_all, init_repo
from mailslot.exchange.index import render_index
from mailslot.exchange.layout import (
    CONFIG_NAME,
    DONE,
    META_DIR,
    MODES,
    Exchange,
    _apply_mode,
    write_config,
)
from mailslot.notify import invalid_urls

__all__ = ["create_exchange", "parse_human"]


def parse_human(spec: str, sides: tuple[str, str]) -> tuple[str, str]:
    """``NAME:SIDE`` as ``(name, side)``; ``InvalidName`` if malformed or the side is unknown."""
    name, sep, side = spec.partition(":")
    if not sep:
        raise InvalidName("human", spec, "NAME:SIDE, e.g. ops:claude")
    validate_agent(name, "human name")
    if side not in sides:
        raise InvalidName("human", spec, f"SIDE must be one of {', '.join(sides)}")
    if name in sides:
        raise InvalidName("human", spec, "a human cannot share a side's name")
    return name, side


def create_exchange(
    root: Path,
    sides: list[str],
    *,
    humans: Sequence[str] = (),
    group: str | None = None,
    modes: str = "symmetric",
    git: bool = True,
    notify: Sequence[str] = (),
) -> Exchange:
    """Create the exchange at ``root``; ``InvalidName``, ``InvalidValue``, ``Conflict`` or
    ``CommandFailed`` (git).

    ``sides`` are exactly two different agent names; the first is the side running init (in
    asymmetric mode its outbox is read-only to the group).
    """
    if len(sides) != 2 or sides[0] == sides[1]:
        raise InvalidName("sides", ",".join(sides), "exactly two different --side names")
    a, b = (validate_agent(s, "side") for s in sides)
    if modes not in MODES:
        raise InvalidName("modes", modes, f"one of {', '.join(MODES)}")
    people = dict(parse_human(h, (a, b)) for h in humans)
    if bad := invalid_urls(notify):
        raise InvalidValue(f"--notify: {'; '.join(bad)}; nothing created")
    root = Path(root).absolute()
    if (root / META_DIR / CONFIG_NAME).exists():
        raise Conflict("an exchange already exists here", path=root)
    for side in (a, b):
        if (root / f"to-{side}").exists():
            raise Conflict(f"to-{side}/ already exists; refusing to adopt it", path=root)
    root.mkdir(parents=True, exist_ok=True)
    ex = Exchange(root, (a, b), people, tuple(notify), group, modes, git)
    meta = ex.meta
    meta.mkdir(exist_ok=True)
    _apply_mode(meta, 0o2750, group, strict=True)
    for side in (a, b):
        inbox = ex.inbox(side)
        inbox.mkdir()
        _apply_mode(inbox, ex.dir_mode(side), group, strict=True)
        ex.make_dir(inbox / DONE, side)
    write_config(ex)
    # Both sides must be able to open the send lock; flock works on a read-only descriptor.
    lock = ex.send_lock
    lock.touch()
    os.chmod(lock, 0o640)
    _apply_mode(lock, 0o640, group, strict=True)
    atomic_write(root / "CONVENTION.md", render_convention(ex), mode=0o644)
    atomic_write(root / "INDEX.md", render_index(ex, []), mode=0o644)
    if git:
        atomic_write(root / ".gitignore", GITIGNORE, mode=0o644)
        init_repo(root)
        # history holds every entry: no more readable than the inboxes themselves
        _apply_mode(root / ".git", 0o2750, group, strict=True)
        commit_all(root, f"exchange init: {a} <-> {b}")
    if group is not None:
        _apply_mode(root, 0o2750, group, strict=True)
    return ex

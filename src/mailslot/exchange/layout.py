"""The shape of an exchange on disk, and who may write where.

An exchange has exactly two sides. Side ``A`` writes only into ``to-B/`` (its outbox, B's inbox)
and B writes only into ``to-A/``; a topic is a directory of the same name under both. Identity
comes from the transport: an entry in ``to-olu/`` was written by the side that is not ``olu``, and
a STATE.md in ``to-olu/<topic>/`` is that side's status, never olu's. People may write on a side
(``--human ops:claude``); they share that side's outbox and STATE.

``ROOT/.mailslot/config`` (plain YAML) records the sides, the humans, the notification targets and
the directory modes, so every command and the tick read one description of the exchange.
"""

from __future__ import annotations

import os
from pathlib import Path

from mailslot.core.errors import Conflict, FormatError, InvalidName, NotFound
from mailslot.core.formats import dump_yaml, load_yaml
from mailslot.core.fsio import fsync_dir
from mailslot.core.names import validate_agent
from mailslot.core.record import FrozenRecord

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: every send loads this
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "CONFIG_NAME",
    "DONE",
    "HELD_NAME",
    "META_DIR",
    "STATE_NAME",
    "Exchange",
    "find_root",
    "load_exchange",
    "write_config",
]

META_DIR = ".mailslot"
CONFIG_NAME = "config"
DONE = "done"
STATE_NAME = "STATE.md"
HELD_NAME = "HELD.md"
SEND_LOCK = "send.lock"
TICK_LOCK = "tick.lock"

# Directory modes. Symmetric is safe only where a sandbox is the real boundary;
# asymmetric makes the first side's outbox read-only to the group (the other side's agent).
MODES = {
    "symmetric": (0o2770, 0o2770),
    "asymmetric": (0o2750, 0o2770),  # (to-<second side>, to-<first side>)
}


class Exchange(FrozenRecord):
    """One exchange: its root, its two sides (first = the one that ran init), people, settings.

    A ``core.record`` record, not a dataclass: every command loads it on start."""

    __match_args__ = ("root", "sides", "humans", "notify", "group", "modes", "git")
    __slots__ = ("git", "group", "humans", "modes", "notify", "root", "sides")
    root: Path
    sides: tuple[str, str]
    humans: dict[str, str]
    notify: tuple[str, ...]
    group: str | None
    modes: str
    git: bool

    def __init__(
        self,
        root: Path,
        sides: tuple[str, str],
        humans: dict[str, str] | None = None,
        notify: tuple[str, ...] = (),
        group: str | None = None,
        modes: str = "symmetric",
        git: bool = True,
    ) -> None:
        init = object.__setattr__
        init(self, "root", root)
        init(self, "sides", sides)
        init(self, "humans", {} if humans is None else humans)
        init(self, "notify", notify)
        init(self, "group", group)
        init(self, "modes", modes)
        init(self, "git", git)

    # -- names and paths -------------------------------------------------------------------
    @property
    def meta(self) -> Path:
        """``ROOT/.mailslot``: config, tick state, locks, heartbeat."""
        return self.root / META_DIR

    @property
    def send_lock(self) -> Path:
        """The lock every writer takes to claim a number; both sides can read it."""
        return self.meta / SEND_LOCK

    @property
    def tick_lock(self) -> Path:
        """The lock that keeps two ticks from overlapping."""
        return self.meta / TICK_LOCK

    def other(self, side: str) -> str:
        """The side that is not ``side``; ``NotFound`` if ``side`` is not one of the two."""
        a, b = self.sides
        if side == a:
            return b
        if side == b:
            return a
        raise NotFound(f"{side!r} is not a side of this exchange (sides: {a}, {b})")

    def inbox(self, side: str) -> Path:
        """``to-<side>``: what the other side wrote for ``side`` to read."""
        self.other(side)
        return self.root / f"to-{side}"

    def outbox(self, side: str) -> Path:
        """``to-<other>``: where ``side`` writes its entries and its STATE.md."""
        return self.inbox(self.other(side))

    def writer_of(self, inbox_side: str) -> str:
        """The side whose files live in ``to-<inbox_side>``."""
        return self.other(inbox_side)

    def side_of(self, agent: str) -> str:
        """The side ``agent`` acts for (a side's own name, or a human's side); ``Conflict``."""
        validate_agent(agent)
        if agent in self.sides:
            return agent
        if agent in self.humans:
            return self.humans[agent]
        a, b = self.sides
        people = ", ".join(f"{h}:{s}" for h, s in sorted(self.humans.items())) or "none"
        raise Conflict(
            f"{agent!r} is not a member of this exchange (sides: {a}, {b}; humans: {people})",
            path=self.root,
        )

    def dir_mode(self, inbox_side: str) -> int:
        """The mode of ``to-<inbox_side>`` and every directory created under it."""
        first_outbox, first_inbox = MODES[self.modes]
        return first_inbox if inbox_side == self.sides[0] else first_outbox

    def make_dir(self, path: Path, inbox_side: str) -> bool:
        """Create ``path`` (under ``to-<inbox_side>``) with that inbox's mode and group; whether
        it was made (false: it was there). ``Conflict`` if a symlink is there (never written
        through)."""
        try:
            path.mkdir()
        except FileExistsError:
            if os.path.islink(path):
                raise Conflict(
                    "is a symlink; the exchange tree holds no symlinks (remove it)", path=path
                ) from None
            return False
        _apply_mode(path, self.dir_mode(inbox_side), self.group)
        # the new name lives in the parent: without this a crash can lose the directory (and
        # with it the entry written and fsync'd inside it) after 'send' said it was done
        fsync_dir(path.parent)
        return True

    def file_mode(self, inbox_side: str) -> int:
        """Entry and STATE files: readable as the directory is, writable only by their owner."""
        return self.dir_mode(inbox_side) & 0o644

    # -- config ----------------------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        """The config mapping written to ``.mailslot/config``."""
        return {
            "version": 1,
            "sides": list(self.sides),
            "humans": dict(sorted(self.humans.items())),
            "notify": list(self.notify),
            "group": self.group,
            "modes": self.modes,
            "git": self.git,
        }


def _apply_mode(path: Path, mode: int, group: str | None, *, strict: bool = False) -> None:
    """Give ``path`` to ``group`` and set ``mode``; with ``strict``, failures raise ``Conflict``.

    Without ``strict`` (topic directories made by senders) a failure is left alone: the setgid
    parent already gave the directory its group, and a directory another user made is theirs.
    """
    if group is not None:
        import shutil

        try:
            shutil.chown(path, group=group)
        except LookupError:
            raise InvalidName("group", group, "an existing Unix group") from None
        except PermissionError:
            if strict:
                raise Conflict(
                    f"cannot give it to group {group!r}: not a member (run as root or a member)",
                    path=path,
                ) from None
    try:
        os.chmod(path, mode)
    except PermissionError:
        if strict:
            raise


def write_config(ex: Exchange) -> Path:
    """Write ``.mailslot/config`` for ``ex`` atomically."""
    from mailslot.core.fsio import atomic_write

    path = ex.meta / CONFIG_NAME
    return atomic_write(path, dump_yaml(ex.to_config()), mode=0o640)


def find_root(start: Path) -> Path:
    """``start`` or its nearest parent holding ``.mailslot/config``; ``NotFound`` if none."""
    start = start.absolute()
    for candidate in (start, *start.parents):
        if (candidate / META_DIR / CONFIG_NAME).is_file():
            return candidate
    raise NotFound(
        "not inside an exchange (no .mailslot/config here or above); "
        "run 'mailslot exchange init DIR --side A --side B' or pass --root",
        path=start,
    )


def load_exchange(root: Path) -> Exchange:
    """Read the exchange at ``root`` (or above it); ``NotFound`` or ``FormatError``."""
    root = find_root(Path(root))
    path = root / META_DIR / CONFIG_NAME
    data = load_yaml(path.read_bytes(), path=path)
    sides = data.get("sides")
    if not isinstance(sides, list) or len(sides) != 2 or sides[0] == sides[1]:
        raise FormatError("expected two different sides", path=path, field="sides")
    try:
        a, b = (validate_agent(str(s), "side") for s in sides)
    except InvalidName as e:
        raise FormatError(str(e), path=path, field="sides") from None
    humans_raw = data.get("humans") or {}
    if not isinstance(humans_raw, dict):
        raise FormatError("expected a mapping NAME: SIDE", path=path, field="humans")
    humans: dict[str, str] = {}
    for name, side in humans_raw.items():
        if side not in (a, b):
            raise FormatError(f"{name!r} is on unknown side {side!r}", path=path, field="humans")
        humans[validate_agent(str(name), "human name")] = str(side)
    notify = data.get("notify") or []
    if not isinstance(notify, list) or not all(isinstance(u, str) for u in notify):
        raise FormatError("expected a list of Apprise URLs", path=path, field="notify")
    modes = data.get("modes", "symmetric")
    if modes not in MODES:
        raise FormatError(f"expected one of {sorted(MODES)}", path=path, field="modes")
    group = data.get("group")
    return Exchange(
        root=root,
        sides=(a, b),
        humans=humans,
        notify=tuple(notify),
        group=str(group) if group else None,
        modes=str(modes),
        git=bool(data.get("git", True)),
    )

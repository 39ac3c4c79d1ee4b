"""mailslot: durable, pull-based messaging for AI agents and the people who run them.

The public names below load on first use (PEP 562): ``mailslot --help`` and a one-shot send
import the package on every call, so importing it must cost nothing beyond what the caller uses.
"""

from mailslot._lazy import lazy_exports as _lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from mailslot.core.clock import format_time, now, parse_time
    from mailslot.core.cursor import ByteCursor, CursorStore, SeenSet, state_dir
    from mailslot.core.errors import (
        Conflict,
        FormatError,
        Gone,
        InvalidName,
        LimitExceeded,
        LockBusy,
        MailslotError,
        NotFound,
        Unresolved,
        WaitTimeout,
    )
    from mailslot.core.fsio import atomic_create, atomic_write, locked_append, numbered_create
    from mailslot.core.message import Message
    from mailslot.core.wait import Watch, wait_for_change, wait_until

__version__ = "0.1.0"

__all__ = [
    "ByteCursor",
    "Conflict",
    "CursorStore",
    "FormatError",
    "Gone",
    "InvalidName",
    "LimitExceeded",
    "LockBusy",
    "MailslotError",
    "Message",
    "NotFound",
    "SeenSet",
    "Unresolved",
    "WaitTimeout",
    "Watch",
    "__version__",
    "atomic_create",
    "atomic_write",
    "format_time",
    "locked_append",
    "now",
    "numbered_create",
    "parse_time",
    "state_dir",
    "wait_for_change",
    "wait_until",
]

# public name -> the module (under mailslot) that defines it
_LAZY = {
    **dict.fromkeys(("format_time", "now", "parse_time"), "core.clock"),
    **dict.fromkeys(("ByteCursor", "CursorStore", "SeenSet", "state_dir"), "core.cursor"),
    **dict.fromkeys(
        ("Conflict", "FormatError", "Gone", "InvalidName", "LimitExceeded", "LockBusy"),
        "core.errors",
    ),
    **dict.fromkeys(("MailslotError", "NotFound", "Unresolved", "WaitTimeout"), "core.errors"),
    **dict.fromkeys(
        ("atomic_create", "atomic_write", "locked_append", "numbered_create"), "core.fsio"
    ),
    "Message": "core.message",
    **dict.fromkeys(("Watch", "wait_for_change", "wait_until"), "core.wait"),
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)

del TYPE_CHECKING  # not part of the package's names

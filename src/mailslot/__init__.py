"""mailslot: durable, pull-based messaging for AI agents and the people who run them.

The public names below load on first use (PEP 562): ``mailslot --help`` and a one-shot send
import the package on every call, so importing it must cost nothing beyond what the caller uses.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
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

# public name -> the core module that defines it
_LAZY = {
    **dict.fromkeys(("format_time", "now", "parse_time"), "clock"),
    **dict.fromkeys(("ByteCursor", "CursorStore", "SeenSet", "state_dir"), "cursor"),
    **dict.fromkeys(
        ("Conflict", "FormatError", "Gone", "InvalidName", "LimitExceeded", "LockBusy"), "errors"
    ),
    **dict.fromkeys(("MailslotError", "NotFound", "Unresolved", "WaitTimeout"), "errors"),
    **dict.fromkeys(("atomic_create", "atomic_write", "locked_append", "numbered_create"), "fsio"),
    "Message": "message",
    **dict.fromkeys(("Watch", "wait_for_change", "wait_until"), "wait"),
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mailslot' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"mailslot.core.{module}"), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

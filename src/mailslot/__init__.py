"""mailslot: durable, pull-based messaging for AI agents and the people who run them."""

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

"""Public alias of :mod:`mailslot.core.errors` (the tree is drawn there)."""

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

__all__ = [
    "Conflict",
    "FormatError",
    "Gone",
    "InvalidName",
    "LimitExceeded",
    "LockBusy",
    "MailslotError",
    "NotFound",
    "Unresolved",
    "WaitTimeout",
]

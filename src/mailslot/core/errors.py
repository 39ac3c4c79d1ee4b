"""The one exception tree of mailslot.

Every failure a user can cause or meet is a ``MailslotError``; faces map it to an exit code or an
HTTP status in one place, using ``exit_code``. Errors carry fields (path, field, limit) so a
script can act on them without parsing the message::

    MailslotError                      exit 1
    +-- InvalidName                    a name, slug, topic or id outside its rule
    +-- InvalidPath                    a path that is absolute, climbs out of its root or names it
    +-- InvalidValue                   any other value outside its rule (an action, empty text)
    +-- LimitExceeded                  a size, word, line or rate bound (never truncated)
    +-- FormatError                    a file or payload that does not parse; names path + field
    +-- NotFound                       a topic, file, peer or item that is not there
    +-- CannotOpen                     a file or database that cannot be opened or read as asked
    +-- Conflict                       a rule that forbids the write (exists, owned, not allowed)
    |   +-- RelayStopped               (relay.mailbox) a turn written after the relay was stopped
    +-- AlreadyWritten                 the write is done and visible; a step after it failed
    +-- DirectoryFull                  a numbered directory with every number used
    +-- LockBusy                       a lock held by someone else when waiting is not wanted
    +-- Unresolved                     a check that cannot be decided (fail safe: nothing done)
    +-- NoSpace                        the disk or quota is full: nothing was written
    +-- Incomplete                     a run that did part of its job; says which part failed
    |   +-- TickFailed                 (exchange.tickresult) the tick could not do all of it
    +-- DoctorFailed                   (exchange.doctor) a health check of the exchange failed
    +-- ServerFailed                   a server that could not listen or start
    +-- PeerUnreachable                a peer that did not answer (refused, reset, timed out)
    +-- PeerRefused                    a peer that answered with an error status
    +-- MissingAgent                   exit 2: who is acting was not said (--as, MAILSLOT_AGENT)
    +-- MissingExtra                   an optional dependency this command needs is not installed
    +-- SymlinkRefused                 a symlink where a message or its folder must be
    +-- CommandFailed                  an external program (git, systemctl) failed or overran
    +-- WaitTimeout                    exit 3: a wait ended with nothing new
    |   +-- OutboxEmpty                (bus.outbox) nothing in the outbox to take
    +-- Gone                           exit 4: the thing waited on was removed

A class marked with a module lives in that module; every other class is here. A new kind of
failure gets its own class in this drawing (a test compares the drawing with the classes);
nothing raises ``MailslotError`` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mailslot.core.display import brief

if TYPE_CHECKING:
    from pathlib import Path

    from mailslot.core.command import CommandResult

__all__ = [
    "AlreadyWritten",
    "CannotOpen",
    "CommandFailed",
    "Conflict",
    "DirectoryFull",
    "FormatError",
    "Gone",
    "Incomplete",
    "InvalidName",
    "InvalidPath",
    "InvalidValue",
    "LimitExceeded",
    "LockBusy",
    "MailslotError",
    "MissingAgent",
    "MissingExtra",
    "NoSpace",
    "NotFound",
    "PeerRefused",
    "PeerUnreachable",
    "ServerFailed",
    "SymlinkRefused",
    "Unresolved",
    "WaitTimeout",
]


class MailslotError(Exception):
    """Base of every error mailslot raises on purpose."""

    exit_code: int = 1
    label: str = "error"

    def __init__(self, message: str, *, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path: Path | None = None
        if path is not None:
            from pathlib import Path  # imported here: the error tree loads for --help too

            self.path = Path(path)

    def __str__(self) -> str:
        if self.path is not None and str(self.path) not in self.message:
            return f"{self.path}: {self.message}"
        return self.message


class InvalidName(MailslotError):
    """A name that breaks its rule; ``kind`` says which rule (agent, slug, topic, ...)."""

    def __init__(self, kind: str, value: str, rule: str) -> None:
        super().__init__(f"invalid {kind} {brief(value)}: {rule}")
        self.kind = kind
        self.value = value
        self.rule = rule


class InvalidPath(MailslotError):
    """A path refused before it is used: absolute where it must be relative, climbing out of its
    root (``..``, a symlink), empty, or naming the root itself."""


class InvalidValue(MailslotError):
    """A value outside its rule that is neither a name nor a path: an action word, an empty body
    or reason, text holding a control character, an option out of range or contradicting another,
    an address that is not private."""


class LimitExceeded(MailslotError):
    """A bound that a value breaks (above a maximum, or below a ``minimum``); refused whole,
    never truncated. ``unread`` marks input refused before it was read to its end."""

    def __init__(
        self,
        what: str,
        limit: int,
        actual: int,
        unit: str = "",
        *,
        minimum: bool = False,
        unread: bool = False,
    ) -> None:
        if unread:  # refused before reading it all: ``actual`` is only a lower bound
            message = f"{what} is more than {_count(limit, unit)}, the most allowed"
        elif minimum:
            message = f"{what} is {_count(actual, unit)}; it must be at least {_count(limit, unit)}"
        else:
            message = f"{what} is {_count(actual, unit)}; at most {_count(limit, unit)} allowed"
        super().__init__(message)
        self.what = what
        self.limit = limit
        self.actual = actual
        self.unit = unit
        self.minimum = minimum


def _count(n: int, unit: str) -> str:
    """``1 line``, ``2 lines``, ``3`` (no unit)."""
    if not unit:
        return str(n)
    return f"{n} {unit[:-1] if n == 1 and unit.endswith('s') else unit}"


class FormatError(MailslotError):
    """Content that does not parse; ``field`` names the offending field when there is one."""

    def __init__(
        self, message: str, *, path: Path | str | None = None, field: str | None = None
    ) -> None:
        if field is not None:
            message = f"field {field!r}: {message}"
        super().__init__(message, path=path)
        self.field = field


class NotFound(MailslotError):
    """Something named that does not exist."""


class CannotOpen(MailslotError):
    """A file or database that exists but cannot be opened or read as asked: no permission, a
    FIFO, device or directory where a regular file belongs, a database that will not open."""


class Conflict(MailslotError):
    """A write that a rule forbids (the file exists, the path is owned, the state disallows it)."""


class AlreadyWritten(MailslotError):
    """The write is done and readers see it, but a step after it failed (the fsync that confirms
    it, a counter beside it): the message says so, so the caller does not write it again."""


class DirectoryFull(MailslotError):
    """A numbered directory whose every number is used; nothing was written."""


class LockBusy(MailslotError):
    """A lock someone else holds."""


class Unresolved(MailslotError):
    """A comparison that cannot be decided; the caller takes the safe direction."""


class NoSpace(MailslotError):
    """The disk or the quota is full (``ENOSPC``, ``EDQUOT``); the write left nothing behind."""


class Incomplete(MailslotError):
    """A run that did part of its job and could not do the rest; the message says which part
    (what it did is reported before this is raised)."""


class ServerFailed(MailslotError):
    """A server that could not listen on its address or could not start; nothing is served."""


class PeerUnreachable(MailslotError):
    """A peer that did not answer (connection refused or reset, timed out): whether it stored
    the message is unknown, so a retry carries the same idempotency key."""


class PeerRefused(MailslotError):
    """A peer that answered with an error status; ``status`` is the HTTP status it gave."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class MissingAgent(MailslotError):
    """A command that acts as someone was not told who (a usage error: exit 2, one line).

    Every face raises this one class for a missing ``--as``, so the CLI answers it the same way
    everywhere: ``mailslot: error: ...`` and exit 2, never a usage block here and exit 1 there.
    """

    exit_code = 2

    def __init__(
        self, message: str = "who is acting? pass --as NAME or set MAILSLOT_AGENT", **kw: object
    ) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]


class MissingExtra(MailslotError):
    """A command whose optional dependencies (a pip extra) are not installed: names the extra."""

    def __init__(self, command: str, extra: str, module: str) -> None:
        super().__init__(
            f"{command} needs the {extra!r} extra, which is not installed (no module "
            f"{module!r}): pip install 'mailslot[{extra}]'"
        )
        self.command = command
        self.extra = extra
        self.module = module


class SymlinkRefused(MailslotError):
    """A symlink found where mailslot moves or writes a message (``path`` names it): a planted
    link would carry the message out of its tree, so nothing is done through it."""


class CommandFailed(MailslotError):
    """An external program that could not be started, ran past its time, printed more than its
    bound, or exited non-zero. ``command`` names it; ``result`` holds its exit status and output
    when it ran to its end; ``timed_out`` marks one stopped at its deadline."""

    def __init__(
        self,
        command: str,
        message: str,
        *,
        path: Path | str | None = None,
        timed_out: bool = False,
        result: CommandResult | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.command = command
        self.timed_out = timed_out
        self.result = result


class WaitTimeout(MailslotError):
    """A wait that ended at its deadline with nothing new.

    ``payload`` is what "nothing new" looks like as the command's JSON (``{"messages": [],
    "cursor": N}``); a face asked for JSON prints it, so a script reads an answer, not silence.
    """

    exit_code = 3
    label = "timeout"

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        payload: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.payload = payload


class Gone(MailslotError):
    """The thing being waited on was removed (a deleted chat file ends a conversation)."""

    exit_code = 4
    label = "gone"

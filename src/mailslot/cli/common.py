"""What a command's body uses and click does not provide: who is acting and where (``Env``), a
usage error of its own (``Usage``), reading a body, writing output, and how SIGTERM unwinds.

No click here: the bodies of the commands agents call most (``cli.sends``, ``cli.waits``) run from
``mailslot.cli.quick`` without loading it. Under click, ``helpers.ensure_common_options`` makes
every command report ``Usage`` as click's own usage error (the usage line, ``Error: ...``, exit 2).
A body raises ``Usage`` before it writes anything or reads standard input, so a line whose
command turns out to be misused can be handed whole to click, which runs it again and reports it.
"""

from __future__ import annotations

import signal
import sys

from mailslot.core.ending import begin

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, BinaryIO

__all__ = [
    "Env",
    "Stopped",
    "Usage",
    "emit",
    "read_body",
    "read_body_file",
    "read_text",
    "stdin_bytes",
    "stop_on_sigterm",
    "write_out",
]


class Usage(Exception):
    """The command line asks for something the command cannot do as given (exit 2, with the
    command's usage line). Raised before anything is written or standard input is read."""


class Env:
    """What the global options say: the root directory and who is acting. A plain class: a
    dataclass compiles its generated methods on every start, and nothing compares or prints
    an ``Env``."""

    __slots__ = ("agent", "root")

    def __init__(self, root: Path | None = None, agent: str | None = None) -> None:
        self.root = root
        self.agent = agent

    def need_root(self) -> Path:
        """The root (``--root``, ``MAILSLOT_ROOT``, else the current directory)."""
        from pathlib import Path

        return self.root if self.root is not None else Path.cwd()

    def need_agent(self) -> str:
        """The acting agent's name; ``MissingAgent`` (one line, exit 2) when none was given."""
        if not self.agent:
            from mailslot.core.errors import MissingAgent

            raise MissingAgent()
        return self.agent


def emit(
    data: Any,
    as_json: bool,
    text: Callable[[Any], str] | str | None = None,
    *,
    deadline: float | None = None,
) -> None:
    """Print ``data`` as JSON, or as ``text`` (a string or a function of ``data``), whole and
    flushed (``write_out``): once it returns the output is out, else it raised ``OSError`` (or
    ``Incomplete`` when it could not go out by ``deadline``)."""
    if as_json:
        import json  # here: a plain send prints its path and needs no json module

        write_out(json.dumps(data, indent=None, ensure_ascii=False, default=str), deadline=deadline)
        return
    out: str
    if text is None:
        import json

        out = data if isinstance(data, str) else json.dumps(data, indent=2, default=str)
    elif isinstance(text, str):
        out = text
    else:
        out = text(data)
    if out:
        write_out(out, deadline=deadline)


def write_out(text: str, *, deadline: float | None = None) -> None:
    """Write ``text`` and a newline to standard output, every byte, flushed; else ``OSError``
    (``BrokenPipeError`` when the reader closed the pipe, ``EBADF`` when standard output was
    closed before the start: a waiting reader then marks nothing seen). With a ``deadline``
    (``time.monotonic()``), ``Incomplete`` when standard output takes no more by then (a
    blocking reader's timeout covers its output: ``core.handover.write_before``).

    Straight to the descriptor: an unbuffered text stream (``PYTHONUNBUFFERED``, common in
    containers) silently drops what a short write left over, so a reader that closed the pipe
    half-way would pass for one that read it all -- and a blocking reader would mark as seen
    what nobody was shown. A stream without a descriptor (a test runner's) gets ``click.echo``.
    """
    from mailslot.core.handover import write_before

    stream = sys.stdout
    if stream is None:  # descriptor 1 was closed before the start (``>&-``): nobody is shown it
        import errno

        raise OSError(errno.EBADF, "standard output is closed; nothing was shown")
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        import click  # only a test runner's stream has no descriptor

        click.echo(text)
        return
    stream.flush()
    data = (text + "\n").encode(stream.encoding or "utf-8", stream.errors or "strict")
    write_before(fd, data, deadline)


def read_body(body: str | None, *, limit: int, what: str = "BODY") -> str:
    """The message body: the argument, or standard input when it is ``-`` or missing, read to at
    most ``limit`` bytes (``LimitExceeded`` past it; ``UnicodeDecodeError`` if not UTF-8;
    ``Usage`` when it is missing and standard input is a terminal or closed; ``OSError`` for
    ``-`` with standard input closed)."""
    from mailslot.core.limits import read_capped

    if body is not None and body != "-":
        return body
    if body is None and (sys.stdin is None or sys.stdin.isatty()):
        raise Usage(f"give {what} as an argument, or '-' to read standard input")
    stdin = stdin_bytes(f"; give {what} as an argument")
    return read_capped(stdin, what, limit).decode("utf-8")


def stdin_bytes(hint: str = "") -> BinaryIO:
    """Standard input, binary; ``OSError`` (``EBADF``, its message ending in ``hint``) when
    descriptor 0 was closed before the start (``<&-``), where Python's ``sys.stdin`` is None."""
    if sys.stdin is None:
        import errno

        raise OSError(errno.EBADF, f"standard input is closed{hint}")
    return sys.stdin.buffer


def read_text(body: str | None, *, limit: int, what: str = "BODY") -> str:
    """``read_body`` (the argument, or standard input for ``-``, at most ``limit`` bytes);
    ``FormatError`` when standard input is not UTF-8."""
    try:
        return read_body(body, limit=limit, what=what)
    except UnicodeDecodeError as e:
        from mailslot.core.errors import FormatError

        raise FormatError(
            f"standard input is not valid UTF-8 text (byte 0x{e.object[e.start]:02x} at byte "
            f"{e.start}); nothing written",
            field=what,
        ) from None


def read_body_file(path: Path, *, limit: int, what: str = "the body file") -> str:
    """The UTF-8 text of ``path``, read to at most ``limit`` bytes; ``LimitExceeded`` past it,
    ``CannotOpen`` if it cannot be read, ``FormatError`` if it is not UTF-8."""
    from mailslot.core.errors import CannotOpen, FormatError
    from mailslot.core.limits import read_capped

    try:
        with open(path, "rb") as f:
            data = read_capped(f, what, limit)
    except OSError as e:
        raise CannotOpen(f"cannot read {what}: {e.strerror}", path=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{what} is not UTF-8 text", path=path) from None


class Stopped(BaseException):
    """SIGTERM arrived (a service manager's stop). A ``BaseException``, like
    ``KeyboardInterrupt``, so no ``except Exception`` on the way swallows it."""


def _raise_stopped(signum: int, frame: Any) -> None:
    raise Stopped()


def stop_on_sigterm() -> None:
    """Make SIGTERM unwind the main thread as ``Stopped``, and start with the ordinary exit
    (called once per run by the entry point that owns the process and ends it:
    ``core.ending``)."""
    begin()
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _raise_stopped)

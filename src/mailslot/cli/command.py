"""The ``mailslot`` command: the group, the global options, and errors -> exit codes.

Command groups load lazily from the table below: ``mailslot --help`` imports no channel, so it
starts fast for agents that call it many times a day. Each group lives in its own module, parses,
calls one channel function and prints; none holds logic of its own.

Exit codes: 0 done; 1 refused or failed (one line ``mailslot: error: ...`` on stderr); 2 usage;
3 a wait that timed out with nothing new; 4 the thing waited on is gone; 130 Ctrl-C and 143
SIGTERM (``mailslot: interrupted`` / ``terminated``), except that a server stopped by SIGTERM
exits 0; 141, silently, when the reader of standard output went away (``| head``). ``main`` ends
every run through ``helpers.end_process`` (``core.ending``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from mailslot import __version__
from mailslot.cli.helpers import (
    Stopped,
    common_options,
    end_process,
    ensure_common_options,
    stop_on_sigterm,
)
from mailslot.core.ending import CLOSED_PIPE, quiet_stdout
from mailslot.core.errors import MailslotError, MissingExtra, WaitTimeout

__all__ = ["cli", "failure", "main"]

# name -> (module, attribute, one-line help). The help is here so --help never imports a channel.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "exchange": ("mailslot.cli.exchange", "exchange", "Two-sided topic mailbox."),
    "chat": ("mailslot.cli.chat", "chat", "Multi-agent chat over one append-only file."),
    "relay": ("mailslot.cli.relay", "relay", "One-line turn relay with matched ids."),
    "bus": ("mailslot.cli.bus", "bus", "Lay out a shared-directory bus."),
    "log": ("mailslot.cli.bus", "log", "Append to or read the shared LOG.md."),
    "outbox": ("mailslot.cli.bus", "outbox", "Drop or take deliverables in outbox/."),
    "tasks": ("mailslot.cli.bus", "tasks", "Per-recipient task files."),
    "owners": ("mailslot.cli.bus", "owners", "Who may write which path (the charter)."),
    "peer": ("mailslot.cli.web", "peer", "Private HTTP peer inbox (bearer token)."),
    "board": ("mailslot.cli.web", "board", "Public board (Agora) over HTTP."),
    "web": ("mailslot.cli.page", "web", "The page for people: every root, live, in a browser."),
    "mcp": ("mailslot.cli.mcp", "mcp", "Serve every channel to agents over MCP (stdio)."),
    "onboard": ("mailslot.cli.mcp", "onboard", "Print set-up steps for an agent host."),
    "bridge": ("mailslot.cli.bridge", "bridge", "Exchanges and chats across hosts (NATS)."),
    "search": ("mailslot.cli.search", "search", "Search every message of every channel."),
}


# The optional extra each command group needs beyond the base install (pyproject's extras), and
# the third-party modules those extras bring: a command that meets one missing says which to add.
EXTRAS: dict[str, str] = {
    "peer": "web",
    "board": "web",
    "web": "web",
    "mcp": "mcp",
    "bridge": "bridge",
}
_EXTRA_MODULES = frozenset(
    {"anyio", "fastapi", "h11", "httpcore", "httpx", "mcp", "mcp_types", "pydantic"}
    | {"jinja2", "markdown_it", "markupsafe"}
    | {"pydantic_core", "sniffio", "starlette", "uvicorn", "apprise", "nats"}
)


class _CliError(click.ClickException):
    """A ``MailslotError`` (or OS error) on its way out: one line on stderr, its exit code."""

    def __init__(self, message: str, exit_code: int, label: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # per instance: 1, 3 or 4
        self.label = label

    def show(self, file: Any = None) -> None:
        click.echo(f"mailslot: {self.label}: {self.format_message()}", err=True)


class _Interrupted(_CliError):
    """Ctrl-C or SIGTERM during a command: one line, the conventional 128 + signal number."""

    def __init__(self, what: str, exit_code: int) -> None:
        super().__init__(what, exit_code, what)

    def show(self, file: Any = None) -> None:
        # After a terminal's ^C echo, start the line afresh.
        lead = "\n" if sys.stderr.isatty() and self.exit_code == 130 else ""
        click.echo(f"{lead}mailslot: {self.label}", err=True)


class _ClosedPipe(_CliError):
    """The reader of standard output went away (``| head``): exit 141 and nothing said, like
    any filter killed by SIGPIPE. Whatever was not shown was not taken."""

    def __init__(self) -> None:
        super().__init__("standard output closed", CLOSED_PIPE, "closed")

    def show(self, file: Any = None) -> None:
        quiet_stdout()


def _available(name: str) -> bool:
    import importlib.util  # only --help lists commands without running one

    module = COMMANDS[name][0]
    return module in sys.modules or importlib.util.find_spec(module) is not None


@contextmanager
def _interruptions() -> Iterator[None]:
    """Ctrl-C (``KeyboardInterrupt``) and SIGTERM (``Stopped``) become one line and exit
    130 / 143."""
    try:
        yield
    except KeyboardInterrupt as e:
        raise _Interrupted("interrupted", 130) from e
    except Stopped as e:
        raise _Interrupted("terminated", 128 + 15) from e


class MailslotGroup(click.Group):
    """Loads command groups on first use and maps errors to exit codes in one place."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*self.commands, *(n for n in COMMANDS if _available(n))])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:  # the module is there; something it imports is not
                raise
            return None  # a command whose module this install leaves out
        command = getattr(loaded, attr)
        assert isinstance(command, click.Command)
        ensure_common_options(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(n, COMMANDS[n][2]) for n in self.list_commands(ctx) if n in COMMANDS]
        rows += [(n, c.get_short_help_str()) for n, c in sorted(self.commands.items())]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        # Parsing the global options comes before ``invoke``: a Ctrl-C there is the same
        # one line and 130, not click's own "Aborted!" and exit 1.
        with _interruptions():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        wants_json = "--json" in ctx.args  # what follows the group name, before parsing
        try:
            with _interruptions():
                return super().invoke(ctx)
        except Exception as e:
            # set once the group name was resolved
            failed = failure(e, group=ctx.invoked_subcommand or "", wants_json=wants_json)
            if failed is None or failed is e:
                raise
            raise failed from e


def failure(e: BaseException, *, group: str, wants_json: bool) -> _CliError | None:
    """What ends a command that raised ``e``: the one line on standard error and the exit code
    (``show()``, ``exit_code``), or ``None`` for an exception that is not a failure of ours to
    report (a bug: it goes on up). ``group`` is the command group that ran; ``wants_json``:
    ``--json`` was given, so a wait that timed out prints its JSON first.
    """
    if isinstance(e, _CliError):
        return e
    if isinstance(e, KeyboardInterrupt):
        return _Interrupted("interrupted", 130)
    if isinstance(e, Stopped):
        return _Interrupted("terminated", 128 + 15)
    if isinstance(e, ModuleNotFoundError):
        missing = (e.name or "").partition(".")[0]
        if missing not in _EXTRA_MODULES:
            return None
        extra = EXTRAS.get(group, "all")
        err = MissingExtra(f"mailslot {group}".strip(), extra, missing)
        return _CliError(str(err), err.exit_code, err.label)
    if isinstance(e, WaitTimeout):
        if wants_json and e.payload is not None:
            import json

            click.echo(json.dumps({**e.payload, "timed_out": True}, ensure_ascii=False))
        return _CliError(str(e), e.exit_code, e.label)
    if isinstance(e, MailslotError):
        return _CliError(str(e), e.exit_code, e.label)
    if isinstance(e, UnicodeError):
        # argv and stdin reach Python with undecodable bytes as surrogates; refuse them
        # whole rather than store a mangled message (nothing is written before this).
        return _CliError(f"text is not valid UTF-8 ({getattr(e, 'reason', e)})", 1, "error")
    if isinstance(e, BrokenPipeError):
        return _ClosedPipe()
    if isinstance(e, OSError):
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        return _CliError(f"{where}{e.strerror or e}", 1, "error")
    return None


@click.group(cls=MailslotGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mailslot")
@common_options
def cli() -> None:
    """Durable, pull-based messaging for AI agents and the people who run them.

    Agents wake, work for a few minutes and exit; mailslot lets them hand each other work
    while almost never awake together. Every message is on disk before a send returns, and a
    waiting reader wakes on kernel file events.

    \b
    Global options work before the group or after the subcommand:
      mailslot --as olu exchange watch      mailslot exchange watch --as olu
    Environment: MAILSLOT_ROOT (--root), MAILSLOT_AGENT (--as).
    Exit codes: 0 done, 1 refused/failed, 2 usage, 3 wait timed out, 4 gone,
    130 Ctrl-C (143 SIGTERM; a server stopped by SIGTERM exits 0),
    141 the reader of the output went away (| head), silently.
    """


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the command, then end through the one exit path."""
    stop_on_sigterm()
    try:
        cli.main(args=argv, prog_name="mailslot")
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            click.echo(e.code, err=True)
            code = 1
    end_process(code)

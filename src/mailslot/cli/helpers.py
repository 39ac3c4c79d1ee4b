"""Options shared by every command, declared once (after rq's ``cli/helpers.py``), and the one
way a ``mailslot`` process ends.

``--root`` and ``--as`` are accepted on the top-level group (with their environment variables)
and again on any subcommand, where they override; either way they land in one ``Env`` object.

Ending: Ctrl-C (SIGINT) unwinds as ``KeyboardInterrupt`` and SIGTERM as ``Stopped``, so every
``finally`` runs and a wait that was interrupted takes nothing; the group maps both to one line
and exit 130 (143), except that a server (``stopping_on_term``) treats SIGTERM as its normal end,
exit 0. ``end_process`` (``core.ending.end``) is the single exit: it flushes stdout and stderr and
then exits, through ``os._exit`` for a command that asked to (``exit_promptly``): its state is
already on disk when it returns, and the interpreter's teardown would only wait (for worker
threads, for inotify's slow close) after the answer was out. A reader that closed standard output
(``| head``) makes it exit 141 without a word.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from mailslot.cli.common import (
    Env,
    Stopped,
    Usage,
    emit,
    read_body,
    read_body_file,
    stdin_bytes,
    stop_on_sigterm,
    write_out,
)
from mailslot.cli.spec import COMMON, JSON, WAIT_MAX_SECONDS
from mailslot.core.ending import end as end_process
from mailslot.core.ending import end_promptly as exit_promptly

__all__ = [
    "SECONDS",
    "WAIT_MAX_SECONDS",
    "Env",
    "SplitGroup",
    "Stopped",
    "common_options",
    "emit",
    "end_process",
    "exit_promptly",
    "json_option",
    "pass_env",
    "read_body",
    "read_body_file",
    "read_small_input",
    "roots_given",
    "roots_option",
    "stop_on_sigterm",
    "stopping_on_term",
    "unit_dir_option",
    "unit_written",
    "write_out",
]

F = TypeVar("F", bound=Callable[..., Any])


def _env(ctx: click.Context) -> Env:
    root = ctx.find_root()
    if not isinstance(root.obj, Env):
        root.obj = Env()
    return root.obj


def _set_root(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value:
        from pathlib import Path

        _env(ctx).root = Path(os.path.expanduser(value)).absolute()  # ~nobody: kept as given


def _set_agent(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value:
        _env(ctx).agent = value


def common_options(f: F) -> F:
    """Add ``--root`` and ``--as`` (``spec.COMMON``) to a command or group; their environment
    variables are read on the top-level group only."""
    top = f.__name__ == "cli"
    callbacks = {"root": _set_root, "agent": _set_agent}
    for p in reversed(COMMON):
        f = p.decorator(
            envvar=p.envvar if top else None, expose_value=False, callback=callbacks[p.name]
        )(f)
    return f


_BaseParser: Any = getattr(click.parser, "_OptionParser", None) or click.parser.OptionParser


class _TextFriendlyParser(_BaseParser):  # type: ignore[misc]
    """click's parser, except that a word with whitespace before any ``=`` is text, not an option.

    Message bodies and relay lines start with ``-`` all the time (``- [14:02] (manager) ...``,
    ``- item one``); plain click reads them as unknown options. No real option has a space in its
    name, so such a word is a positional argument; ``--note=two words`` is still an option.
    """

    def _process_opts(self, arg: str, state: Any) -> None:
        if any(ch.isspace() for ch in arg.partition("=")[0]):
            state.largs.append(arg)
            return
        super()._process_opts(arg, state)


def _make_text_friendly_parser(self: click.Command, ctx: click.Context) -> Any:
    parser = _TextFriendlyParser(ctx)
    for param in self.get_params(ctx):
        param.add_to_parser(parser, ctx)
    return parser


def _reporting_usage(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` with a ``Usage`` it raises made click's ``UsageError`` (click adds the
    command's context, so the report names the command)."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except Usage as e:
            raise click.UsageError(str(e)) from None

    return run


def ensure_common_options(cmd: click.Command) -> None:
    """Give ``cmd`` and every command under it ``--root`` and ``--as`` where it lacks them,
    a parser that takes text starting with ``-`` as text, and click's report of a ``Usage``
    error its body raises (``common.Usage``: the usage line, ``Error: ...``, exit 2).

    The root group calls this on each command group it loads, so the CLI contract (global
    options accepted before the group and after the subcommand alike) holds for every command,
    including one whose author forgot ``@pass_env``. A command that defines its own ``--root``
    (``exchange dispatch`` repeats it) keeps its own.
    """
    if getattr(cmd, "_mailslot_common", False):
        return
    have = {opt for p in cmd.params for opt in getattr(p, "opts", [])}
    probe = common_options(lambda: None)
    for param in getattr(probe, "__click_params__", []):
        if not set(param.opts) & have:
            cmd.params.append(param)
    cmd._mailslot_common = True  # type: ignore[attr-defined]
    if cmd.callback is not None:
        cmd.callback = _reporting_usage(cmd.callback)
    if not isinstance(cmd, click.Group):
        cmd.make_parser = types.MethodType(_make_text_friendly_parser, cmd)  # type: ignore[method-assign]
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            ensure_common_options(sub)


def roots_option(help: str) -> Callable[[F], F]:
    """A repeatable ``--root DIR`` (into ``roots``), for a command that reads several roots at
    once (``web``, ``search``); ``roots_given`` resolves it."""
    return click.option(
        "--root",
        "roots",
        multiple=True,
        type=click.Path(file_okay=False, path_type=Path),
        metavar="DIR",
        help=help,
    )


def roots_given(ctx: click.Context, roots: tuple[Path, ...]) -> list[Path]:
    """The ``roots`` of a ``roots_option``, absolute; none given: the global ``--root`` (or
    ``MAILSLOT_ROOT``), else the current directory."""
    if not roots:
        top = ctx.find_root().obj
        roots = (top.need_root() if isinstance(top, Env) else Path.cwd(),)
    return [Path(os.path.expanduser(r)).absolute() for r in roots]


class SplitGroup(click.Group):
    """A command group whose commands are split over modules: those in ``more`` (module names,
    each with a ``register(group)`` that adds its commands) load only when a command not yet
    here is asked for, or the whole list (``--help``). ``exchange send`` then starts without
    importing the wake-up and health commands it never runs."""

    def __init__(self, *args: Any, more: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._more = list(more)

    def _load_more(self) -> None:
        import importlib

        while self._more:
            before = set(self.commands)
            importlib.import_module(self._more.pop(0)).register(self)
            if getattr(self, "_mailslot_common", False):  # the root group already went over us
                for name in set(self.commands) - before:
                    ensure_common_options(self.commands[name])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load_more()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_more()
        return super().list_commands(ctx)


def pass_env(f: F) -> F:
    """Add the common options and pass the ``Env`` as the first argument."""

    @click.pass_context
    def wrapper(ctx: click.Context, /, *args: Any, **kwargs: Any) -> Any:
        return ctx.invoke(f, _env(ctx), *args, **kwargs)

    wrapper.__name__ = f.__name__
    wrapper.__doc__ = f.__doc__
    return common_options(wrapper)  # type: ignore[return-value]


class _Seconds(click.types.FloatParamType):
    """How long a command may wait: a finite number of seconds, 0 to ``WAIT_MAX_SECONDS``.
    ``nan``, ``inf`` and negatives are usage errors (exit 2), never a crash or a silent 0."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if not 0 <= rv <= WAIT_MAX_SECONDS:  # False for nan too
            self.fail(f"{value!r} is not 0 to {WAIT_MAX_SECONDS} seconds.", param, ctx)
        return rv


SECONDS = _Seconds()


def json_option(f: F) -> F:
    """Add ``--json`` (machine-readable output: ``spec.JSON``)."""
    return JSON.decorator()(f)  # type: ignore[no-any-return]


def unit_dir_option(f: F) -> F:
    """Add ``--unit-dir``: where an ``install`` command writes its systemd units (the default is
    ``core.units.UNIT_DIR``, not imported here so that ``--help`` stays light)."""
    from pathlib import Path

    return click.option(
        "--unit-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default="/etc/systemd/system",
        show_default=True,
    )(f)


def unit_written(path: Path | str | None, unit: str) -> str:
    """What an ``install`` command says after writing ``unit`` at ``path``: the next step."""
    return f"wrote {path}; then: systemctl daemon-reload && systemctl enable --now {unit}"


def read_small_input(source: Path, *, limit: int, what: str) -> str:
    """The UTF-8 text of ``source`` (``-``: standard input), read to at most ``limit`` bytes.

    A named file must be a regular file (a symlink the caller named is followed): a FIFO, a
    device or a directory is refused at once, never waited on or read without end.
    ``LimitExceeded`` past ``limit``; ``CannotOpen`` if it cannot be read, ``FormatError`` if it is
    not UTF-8.
    """
    import errno

    from mailslot.core.errors import CannotOpen, FormatError, LimitExceeded
    from mailslot.core.fsio import read_regular
    from mailslot.core.limits import read_capped

    if str(source) == "-":
        data = read_capped(stdin_bytes(), what, limit)
    else:
        try:
            data = read_regular(source.resolve(), limit)
        except OSError as e:
            if e.errno == errno.EFBIG:
                raise LimitExceeded(what, limit, limit + 1, "bytes", unread=True) from None
            if e.errno == errno.EINVAL:
                raise CannotOpen(
                    f"cannot read {what}: not a regular file (a FIFO, device or directory is "
                    "refused)",
                    path=source,
                ) from None
            raise CannotOpen(f"cannot read {what}: {e.strerror}", path=source) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{what} is not UTF-8 text", path=source) from None


def env_flag(name: str) -> bool:
    """Whether an environment flag is set to a true value."""
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


@contextmanager
def stopping_on_term() -> Iterator[None]:
    """Around a server's run: SIGTERM is how it is meant to stop, so it ends normally (exit 0)
    once the server has finished what was in flight; Ctrl-C still exits 130."""
    try:
        yield
    except Stopped:
        pass

"""The commands agents call most, run without loading click: ``exchange send``, ``chat say``,
``exchange watch``, ``chat wait``, ``relay ask`` and ``outbox take`` (``FAST``).

Loading click is half of a send's start-up, and these run many times a day. ``run`` reads the
command line level by level with the command's own ``spec.Spec`` as click would -- the top-level
group (``--root``, ``--as`` and their environment variables), the command group (``--root``,
``--as``), the command (its spec, ``--root``, ``--as``) -- and calls the same body the click
command calls (``mailslot.cli.sends``, ``mailslot.cli.waits``), then ends the process through
``core.ending``.

Anything the reader does not take exactly (``--help``, an unknown or malformed option, a missing
required one, shell completion, another command) makes ``run`` return having done nothing, and
the entry point runs click on the whole line. So does a ``Usage`` error raised by the body, which
comes before anything is written or standard input is read: click then runs the command again
and reports it. A failure (``MailslotError``, an OS error, Ctrl-C) is reported by
``command.failure``, the group's own mapping, loading click only then: one line, the same exit
code, byte for byte what the click command prints.
"""

from __future__ import annotations

import os

from mailslot.cli.spec import COMMON, Param, Spec, Unread, read_params

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from mailslot.cli.common import Env

__all__ = ["FAST", "run"]

# group -> command -> (the module, and the names of the spec and the body in it)
FAST: dict[str, dict[str, tuple[str, str, str]]] = {
    "exchange": {
        "send": ("mailslot.cli.sends", "EXCHANGE_SEND", "exchange_send"),
        "watch": ("mailslot.cli.waits", "EXCHANGE_WATCH", "exchange_watch"),
    },
    "chat": {
        "say": ("mailslot.cli.sends", "CHAT_SAY", "chat_say"),
        "wait": ("mailslot.cli.waits", "CHAT_WAIT", "chat_wait"),
    },
    "relay": {"ask": ("mailslot.cli.waits", "RELAY_ASK", "relay_ask")},
    "outbox": {"take": ("mailslot.cli.waits", "OUTBOX_TAKE", "outbox_take")},
}


class Call:
    """A command line read whole: the body to call, with what."""

    __slots__ = ("body", "env", "group", "values", "wants_json")

    def __init__(
        self, body: Callable[..., None], env: Env, values: dict[str, Any], group: str, json: bool
    ) -> None:
        self.body = body
        self.env = env
        self.values = values
        self.group = group
        self.wants_json = json


def fast_command(group: str, name: str) -> tuple[Spec, Callable[..., None]] | None:
    """The spec and body of ``mailslot GROUP NAME`` if it runs without click, else ``None``."""
    entry = FAST.get(group, {}).get(name)
    if entry is None:
        return None
    import importlib

    module_name, spec_name, body_name = entry
    module = importlib.import_module(module_name)
    return getattr(module, spec_name), getattr(module, body_name)


def read_line(args: list[str]) -> Call | None:
    """``args`` read as click reads them, if they name a fast command and this reader takes
    every word of them exactly; else ``None``."""
    try:
        return _read(args)
    except Unread:
        return None


def _read(args: list[str]) -> Call | None:
    top, words, i = read_params(args, COMMON, command=False)
    for p in COMMON:  # the environment stands in for an option not given before the group
        if p.name not in top and p.envvar and os.environ.get(p.envvar):
            top[p.name] = os.environ[p.envvar]
    if not words:
        return None
    group = words[0]
    inner, words, j = read_params(args[i:], COMMON, command=False)
    if not words:
        return None
    found = fast_command(group, words[0])
    if found is None:
        return None
    spec, body = found
    after_group = args[i:]
    given, positional, _ = read_params(args[i + j :], spec.params + COMMON, command=True)
    values = _values(spec.params, given, positional)
    env = _env([top, inner, given])
    return Call(body, env, values, group, "--json" in after_group)


def _values(
    params: tuple[Param, ...], given: dict[str, Any], positional: list[str]
) -> dict[str, Any]:
    """Each parameter's value as click passes it to the command's function."""
    arguments = [p for p in params if not p.flags]
    if len(positional) > len(arguments):
        raise Unread("extra arguments")
    words = dict(zip((p.name for p in arguments), positional, strict=False))
    values: dict[str, Any] = {}
    for p in params:
        raw = words.get(p.name) if not p.flags else given.get(p.name)
        if raw is None:
            if p.required:
                raise Unread(p.name)
            if p.kind == "flag":
                values[p.name] = False
            elif p.multiple:
                values[p.name] = ()
            else:  # a default is written as click would take it from the command line
                values[p.name] = None if p.default is None else p.convert(str(p.default))
        elif p.kind == "flag":
            values[p.name] = True
        elif p.multiple:
            values[p.name] = tuple(p.convert(v) for v in raw)
        else:
            values[p.name] = p.convert(raw)
    return values


def _env(levels: list[dict[str, Any]]) -> Env:
    """``--root`` and ``--as`` as the click group's callbacks set them: each level given (top,
    group, command) overrides the one before."""
    from mailslot.cli.common import Env

    env = Env()
    by_name = {p.name: p for p in COMMON}
    for level in levels:
        if "root" in level:
            from pathlib import Path

            root = os.path.expanduser(by_name["root"].convert(level["root"]))  # ~nobody: as given
            env.root = Path(root).absolute()
        if "agent" in level:
            env.agent = by_name["agent"].convert(level["agent"])
    return env


def run(args: list[str]) -> None:
    """Run ``mailslot ARGS`` and end the process, if it is a fast command read exactly; return,
    having done nothing, if not (the caller then runs click on the same line)."""
    if os.environ.get("_MAILSLOT_COMPLETE"):  # click's shell completion
        return
    call = read_line(args)
    if call is None:
        return
    from mailslot.cli.common import Usage, stop_on_sigterm
    from mailslot.core.ending import end

    stop_on_sigterm()
    try:
        call.body(call.env, **call.values)
        code = 0
    except Usage:
        return  # nothing written, standard input unread: click reports it
    except BaseException as e:
        from mailslot.cli.command import failure  # click: the line is the group's own

        failed = failure(e, group=call.group, wants_json=call.wants_json)
        if failed is None:
            raise
        failed.show()
        code = failed.exit_code
    end(code)

"""One declaration of what a command takes, for both of its faces.

A ``Spec`` lists a command's options and arguments (``Param``) once. ``Spec.decorate`` turns it
into click's decorators, so the command under click (``--help``, completion, every usage error)
is built from it; ``read_params`` reads an argument vector with the same list without loading
click (``mailslot.cli.quick``). ``COMMON`` is ``--root`` and ``--as``, the options every command
and group takes (``helpers.common_options`` builds them from it).

The reader is partial on purpose: it accepts only what it reads exactly as click does, and
raises ``Unread`` for anything else -- ``--help``, an unknown, malformed, empty or repeated-as-
value option, a missing required one, a path click's type would refuse, text where an option's
value would start with ``-``. The caller then hands the whole line to click, which reads it
again and reports it; this module prints nothing and decides no error.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["COMMON", "Param", "Spec", "Unread", "read_params"]

# What a value is, as click's type would check and convert it:
#   text: a string as given; flag: no value (True when given); int: click.INT;
#   seconds: helpers.SECONDS, a float from 0 to WAIT_MAX_SECONDS;
#   choice: click.Choice(choices), by default case-insensitive: one of the choices as declared;
#   dir: click.Path(file_okay=False), a string; file: click.Path(dir_okay=False), a string;
#   file_path: click.Path(dir_okay=False, path_type=pathlib.Path).
KINDS = ("text", "flag", "int", "seconds", "choice", "dir", "file", "file_path")

# The longest wait a command accepts: a week. Longer means "until something comes", which is
# what leaving the option out asks for; past about 24 days the kernel's poll cannot be told.
WAIT_MAX_SECONDS = 7 * 86400


class Unread(Exception):
    """The argument vector is not one the reader takes exactly as click would: click reads it."""


class Param:
    """One option (``flags`` given, ``--topic``) or positional argument (no flags) of a
    command: the name its value is passed under, what it is (``KINDS``), and its help."""

    __slots__ = (
        "case_sensitive",
        "choices",
        "default",
        "envvar",
        "flags",
        "help",
        "hidden",
        "kind",
        "metavar",
        "multiple",
        "name",
        "required",
        "show_default",
    )

    def __init__(
        self,
        name: str,
        *flags: str,
        kind: str = "text",
        required: bool = False,
        metavar: str | None = None,
        help: str | None = None,
        hidden: bool = False,
        envvar: str | None = None,
        default: Any = None,
        show_default: bool = False,
        multiple: bool = False,
        choices: tuple[str, ...] = (),
        case_sensitive: bool = False,
    ) -> None:
        assert kind in KINDS, kind
        assert not (multiple and kind == "flag"), name
        assert bool(choices) == (kind == "choice"), name
        self.name = name
        self.flags = flags
        self.kind = kind
        self.required = required
        self.metavar = metavar
        self.help = help
        self.hidden = hidden
        self.envvar = envvar
        self.default = default
        self.show_default = show_default
        self.multiple = multiple
        self.choices = choices
        self.case_sensitive = case_sensitive

    def click_type(self) -> Any:
        """The click type this parameter's kind stands for (``None``: click's plain string)."""
        import click

        if self.kind == "int":
            return click.INT
        if self.kind == "choice":
            return click.Choice(self.choices, case_sensitive=self.case_sensitive)
        if self.kind == "seconds":
            from mailslot.cli.helpers import SECONDS

            return SECONDS
        if self.kind == "dir":
            return click.Path(file_okay=False)
        if self.kind == "file":
            return click.Path(dir_okay=False)
        if self.kind == "file_path":
            from pathlib import Path

            return click.Path(dir_okay=False, path_type=Path)
        return None

    def decorator(self, **extra: Any) -> Callable[[Any], Any]:
        """This parameter as a click decorator (``extra``: more of click's keywords)."""
        import click

        kw: dict[str, Any] = {}
        if self.kind == "flag":
            kw["is_flag"] = True
        elif self.kind != "text":
            kw["type"] = self.click_type()
        if self.required:
            kw["required"] = True
        if not self.flags:  # a positional argument: click's default is required
            if not self.required:
                kw["required"] = False
            return click.argument(self.name, **kw, **extra)
        for key in ("metavar", "help", "default"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        for key in ("hidden", "show_default", "multiple"):
            if getattr(self, key):
                kw[key] = True
        return click.option(*self.flags, self.name, **kw, **extra)

    def convert(self, value: str) -> Any:
        """``value`` as click's type would give it; ``Unread`` when click's type would refuse
        it or when reading it exactly would take more than this reader knows (an empty value)."""
        if value == "":
            raise Unread(self.name)
        if self.kind == "int":
            try:
                return int(value)  # what click.INT does
            except ValueError:
                raise Unread(self.name) from None
        if self.kind == "seconds":
            try:
                seconds = float(value)  # what click.FLOAT does; then helpers.SECONDS' range
            except ValueError:
                raise Unread(self.name) from None
            if not 0 <= seconds <= WAIT_MAX_SECONDS:  # False for nan too
                raise Unread(self.name)
            return seconds
        if self.kind == "choice":
            # click.Choice: the declared choice whose (case-folded) spelling matches
            key = value if self.case_sensitive else value.casefold()
            for choice in self.choices:
                if key == (choice if self.case_sensitive else choice.casefold()):
                    return choice
            raise Unread(self.name)
        if self.kind in ("dir", "file", "file_path"):
            try:
                st = os.stat(value)
            except OSError:
                st = None  # a path that is not there is taken as it is (no exists=True)
            except ValueError:
                raise Unread(self.name) from None
            if st is not None:
                wrong = stat.S_ISREG(st.st_mode) if self.kind == "dir" else stat.S_ISDIR(st.st_mode)
                if wrong or not os.access(value, os.R_OK):
                    raise Unread(self.name)
            if self.kind == "file_path":
                from pathlib import Path

                return Path(value)
        return value


class Spec:
    """What one command takes: its parameters in the order ``--help`` lists them."""

    __slots__ = ("params",)

    def __init__(self, *params: Param) -> None:
        self.params = params

    def decorate(self, f: Any) -> Any:
        """Give ``f`` (a click command's function) every parameter of this spec."""
        for p in reversed(self.params):
            f = p.decorator()(f)
        return f


def read_params(
    args: list[str], params: tuple[Param, ...], *, command: bool
) -> tuple[dict[str, Any], list[str], int]:
    """Read ``args`` as click reads one level of the command line: the values of the options in
    ``params`` given there (still strings; flags ``True``; a list for a ``multiple`` option),
    the positional words, and how many words were read.

    A group level (``command=False``) stops at its first positional word (the subcommand's name),
    as a click group does; a command level reads every word, takes those after ``--`` as
    positional, and takes a word with whitespace before any ``=`` as text, as
    ``helpers._TextFriendlyParser`` does. ``Unread`` for an option not in ``params``, a ``--``
    before the command, a value that would start with ``-``, or a flag given a value.
    """
    options = {flag: p for p in params for flag in p.flags}
    values: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            if not command:
                raise Unread(word)
            positional += args[i:]
            return values, positional, len(args)
        if word[:1] != "-" or len(word) == 1:
            if not command:
                return values, [word], i
            positional.append(word)
            continue
        name, eq, given = word.partition("=")
        if command and any(ch.isspace() for ch in name):
            positional.append(word)  # text that starts with '-', not an option
            continue
        p = options.get(name)
        if p is None:
            raise Unread(name)
        if p.kind == "flag":
            if eq:
                raise Unread(name)
            values[p.name] = True
            continue
        if not eq:
            if i == len(args):
                raise Unread(name)
            given = args[i]
            i += 1
        if given.startswith("-"):
            raise Unread(name)
        if p.multiple:
            values.setdefault(p.name, []).append(given)
        else:
            values[p.name] = given
    return values, positional, i


COMMON = (
    Param(
        "root",
        "--root",
        kind="dir",
        metavar="DIR",
        envvar="MAILSLOT_ROOT",
        help="The mailslot directory (env MAILSLOT_ROOT; default: current directory).",
    ),
    Param(
        "agent",
        "--as",
        metavar="NAME",
        envvar="MAILSLOT_AGENT",
        help="Who is acting (env MAILSLOT_AGENT).",
    ),
)

JSON = Param("as_json", "--json", kind="flag", help="Print JSON for scripts.")

"""How the relay's commands read a turn's text and print what comes back, without click:
``relay ask`` runs from ``mailslot.cli.quick`` with these, the other relay commands
(``mailslot.cli.relay``) under click with the same.

A ``say=`` is the other side's words: text output prints it escaped onto one line
(``mailslot.cli.shown``), so no vertical tab, U+2028 or ANSI escape in it can print a second
line that passes for another turn or a status line of ours. ``--json`` is raw.
"""

from __future__ import annotations

from mailslot.cli.shown import shown_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from mailslot.relay.lines import Unreadable

__all__ = ["delivery_text", "loud", "read_cap", "with_unreadable"]


def read_cap(chars: int) -> int:
    """Bytes to read from standard input for text of at most ``chars`` characters: four per
    character (UTF-8's widest) and room for the whitespace the channel strips; the channel then
    checks the exact limit."""
    return 4 * chars + 1024


def loud() -> tuple[list[dict[str, Any]], Callable[[Unreadable], None]]:
    """A reporter for lines in the caller's inbox that are not turns: one warning line on stderr
    each (through ``click.echo``, as every command's warning, loading click only then), and the
    list for the ``unreadable`` field of ``--json``."""
    found: list[dict[str, Any]] = []

    def report(u: Unreadable) -> None:
        found.append(u.to_json())
        import click

        click.echo(f"mailslot: warning: {shown_line(u.describe())}; not read as a turn", err=True)

    return found, report


def with_unreadable(data: dict[str, Any], found: list[dict[str, Any]]) -> dict[str, Any]:
    """``data`` with the lines ``loud`` reported, if any, as its ``unreadable`` field."""
    return {**data, "unreadable": found} if found else data


def delivery_text(d: dict[str, Any]) -> str:
    """What a delivered reply prints as text: its ``say=`` on one line, then ``(RECOVERED)``
    when ``relay recover`` finished the turn."""
    return shown_line(str(d["say"])) + ("\n(RECOVERED)" if d["recovered"] else "")

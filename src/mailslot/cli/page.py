"""``mailslot web``: the page for people, a thin face over ``mailslot.web.page``.

``mailslot web`` serves every ``--root`` given (default: ``MAILSLOT_ROOT`` or the current
directory); ``web token NAME`` and ``web revoke NAME`` manage the people who may log in. The
page (Starlette, Jinja2, markdown-it) is imported inside the commands, so ``--help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import click

from mailslot.cli.helpers import roots_given, roots_option, stopping_on_term

__all__ = ["web"]

_PATH = click.Path(dir_okay=False, path_type=Path)

humans_opt = click.option(
    "--humans",
    "humans_file",
    type=_PATH,
    help="Who may log in: credential hashes (default: STATE_DIR/web/humans.json).",
)


def _humans(value: Path | None) -> Path:
    from mailslot.web.page.humans import default_humans_file

    return value or default_humans_file()


@click.group(invoke_without_command=True)
@click.option(
    "--bind",
    default="127.0.0.1:8700",
    show_default=True,
    metavar="ADDR:PORT",
    help="Address and port (a private address; off loopback, reading needs a login too).",
)
@roots_option(
    "A mailslot root to show (repeatable): an exchange, a bus, a chat directory, a peer "
    "inbox's root (default: MAILSLOT_ROOT or the current directory)."
)
@humans_opt
@click.pass_context
def web(ctx: click.Context, bind: str, roots: tuple[Path, ...], humans_file: Path | None) -> None:
    """Serve the page for the people who run the agents, until stopped.

    Reading is open on loopback; every write needs a login (`mailslot web token NAME`), even
    there. Refuses 0.0.0.0, :: and public addresses; a busy address is an error (exit 1).

    \b
    Example:
      mailslot web --root ~/exchange --root ~/bus --bind 127.0.0.1:8700
    """
    if ctx.invoked_subcommand is not None:
        return
    from mailslot.web.page.serve import serve
    from mailslot.web.page.settings import PageSettings

    settings = PageSettings(tuple(roots_given(ctx, roots)), _humans(humans_file))
    with stopping_on_term():  # systemd's stop: finish in-flight requests, exit 0
        serve(settings, bind, lambda url: click.echo(f"mailslot: listening on {url}", err=True))


@web.command("token")
@click.argument("name")
@humans_opt
@click.option("--replace", is_flag=True, help="Issue a new credential for a known human.")
def token(name: str, humans_file: Path | None, replace: bool) -> None:
    """Make a login credential for human NAME; store only its hash; print it once, alone.

    NAME is a person, as named in an exchange's config (`exchange init --human NAME:SIDE`);
    the page writes as NAME only where a channel admits NAME as a human.

    \b
    Example:
      mailslot web token ops > ops-credential.txt
    """
    from mailslot.web.page.humans import new_credential

    path = _humans(humans_file)
    secret = new_credential(path, name, replace=replace)
    click.echo(
        f"mailslot: credential for {name} (stored as a hash in {path}; shown once)", err=True
    )
    click.echo(secret)


@web.command("revoke")
@click.argument("name")
@humans_opt
def revoke(name: str, humans_file: Path | None) -> None:
    """Remove human NAME's credential; their open sessions end at their next request.

    \b
    Example:
      mailslot web revoke ops
    """
    from mailslot.web.page.humans import revoke as revoke_human

    path = _humans(humans_file)
    revoke_human(path, name)
    click.echo(f"mailslot: {name} may no longer log in ({path})", err=True)

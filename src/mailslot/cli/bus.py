"""``mailslot bus|log|outbox|tasks|owners``: the shared-directory bus.

Each command parses, makes one call into :mod:`mailslot.bus` and prints text or ``--json``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from mailslot.cli.common import stdin_bytes
from mailslot.cli.helpers import Env, emit, json_option, pass_env, read_body
from mailslot.cli.waits import OUTBOX_TAKE, outbox_take
from mailslot.core.display import shown_line

__all__ = ["bus", "log", "outbox", "owners", "tasks"]


@click.group()
def bus() -> None:
    """Lay out a shared-directory bus: LOG.md, outbox/, TASKS.md, the charter."""


@bus.command("init")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--consumer", metavar="NAME", help="The agent that takes from outbox/.")
@json_option
@pass_env
def bus_init(env: Env, directory: str, consumer: str | None, as_json: bool) -> None:
    """Create a bus in DIRECTORY; files that exist already are kept untouched.

    \b
    Example:
      mailslot bus init shared/ --consumer beacon
      export MAILSLOT_ROOT=$PWD/shared
    """
    from mailslot.bus import layout

    result = layout.init(Path(directory), consumer=consumer)
    emit(
        result,
        as_json,
        lambda r: "\n".join(
            [*(f"created {p}" for p in r["created"]), *(f"kept    {p}" for p in r["kept"])]
        ),
    )


# -- log -------------------------------------------------------------------------------------


@click.group()
def log() -> None:
    """Append to or read the shared LOG.md (one line per agent per waking)."""


def _line_from_stdin(text: str | None) -> str:
    from mailslot.bus.log import LOG_TEXT_MAX

    # the limit is in characters (UTF-8: at most 4 bytes each), plus the piped newline
    body = read_body(text, limit=4 * LOG_TEXT_MAX + 2, what="TEXT")
    if text is None or text == "-":  # the newline that ends piped input is framing, not text
        body = body.removesuffix("\n").removesuffix("\r")
    return body


@log.command("append")
@click.argument("text", required=False)
@click.option("--same-waking", is_flag=True, help="Add another line to the current waking.")
@click.option("--new-waking", is_flag=True, help="This is a new run, however soon.")
@click.option(
    "--waking",
    "waking_id",
    envvar="MAILSLOT_WAKING",
    metavar="ID",
    help="This run's id (env MAILSLOT_WAKING); makes wakings exact.",
)
@json_option
@pass_env
def log_append(
    env: Env,
    text: str | None,
    same_waking: bool,
    new_waking: bool,
    waking_id: str | None,
    as_json: bool,
) -> None:
    """Append one line `DATE — [Name] wNN: TEXT` to LOG.md (TEXT or '-' for stdin).

    One physical line per agent per waking: a text with a line break is refused, and a second
    line in the same waking is refused unless --same-waking (a waking is one run: the same
    MAILSLOT_WAKING, or lines less than 10 minutes apart).

    \b
    Example:
      mailslot log append --as lantern "delivered the OG card to outbox/, needs Beacon"
    """
    from mailslot.bus import log as buslog

    entry = buslog.append(
        env.need_root(),
        env.need_agent(),
        _line_from_stdin(text),
        waking_id=waking_id,
        same_waking=same_waking,
        new_waking=new_waking,
    )
    emit(entry.to_json(), as_json, entry.raw)


@log.command("tail")
@click.option("-n", "count", type=int, default=None, help="How many lines (default 20).")
@click.option("--since-mine", is_flag=True, help="Only lines after my last one (needs --as).")
@json_option
@pass_env
def log_tail(env: Env, count: int | None, since_mine: bool, as_json: bool) -> None:
    """Show the end of LOG.md; read it at the top of every waking.

    With --since-mine: every line after your own last line (all of them if you never wrote),
    so you do not redo what others already did.

    \b
    Example:
      mailslot log tail --since-mine --as beacon
      mailslot log tail -n 5 --json
    """
    from mailslot.bus import log as buslog

    if count is None and not since_mine:
        count = buslog.TAIL_DEFAULT
    result = buslog.tail(
        env.need_root(), count, since_mine=env.need_agent() if since_mine else None
    )
    emit(result.to_json(), as_json, lambda r: "\n".join(shown_line(e["raw"]) for e in r["entries"]))
    if result.torn is not None and not as_json:
        click.echo(
            f"mailslot: note: {result.torn.size} bytes of log appends killed mid-write were cut "
            f"out into {result.torn.path}",
            err=True,
        )


# -- outbox ----------------------------------------------------------------------------------


@click.group()
def outbox() -> None:
    """Drop deliverables in outbox/; the consumer named in the charter takes them."""


@outbox.command("put")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--for", "recipient", metavar="CONSUMER", help="Who should take it.")
@click.option("--note", metavar="TEXT", help="One line: what it is.")
@click.option("--name", metavar="NAME", help="The item's name when FILE is '-' (stdin).")
@json_option
@pass_env
def outbox_put(
    env: Env, file: Path, recipient: str | None, note: str | None, name: str | None, as_json: bool
) -> None:
    """Copy FILE (or '-': stdin) into outbox/ atomically, with a record; print its path.

    Nothing is visible until the whole copy is on disk; a put killed mid-copy leaves nothing.

    \b
    Example:
      mailslot outbox put --as lantern og-card.png --for beacon --note "OG card, 1200x630"
      render-card | mailslot outbox put --as lantern - --name og-card.png
    """
    from mailslot.bus import outbox as busoutbox

    stdin = stdin_bytes() if str(file) == "-" else None
    item = busoutbox.put(
        env.need_root(),
        env.need_agent(),
        Path(name or "stdin") if stdin else file,
        recipient=recipient,
        note=note,
        stream=stdin,
    )
    emit(item.to_json(), as_json, item.path)


def _emit_rows(
    key: str,
    rows: list[dict[str, Any]],
    as_json: bool,
    line: Callable[[dict[str, Any]], str],
    empty: str,
) -> None:
    """Print ``{key: rows}`` as JSON, or one ``line`` a row (``empty`` when there is none)."""
    emit({key: rows}, as_json, lambda r: "\n".join(line(row) for row in r[key]) or empty)


def _item_line(i: dict[str, Any]) -> str:
    who = f"from {i['from']}" if i["from"] else "dropped by hand"
    note = f"  {i['note']}" if i["note"] else ""
    taken = f"  taken by {i['taken_by']} {i['taken_at']}" if i["taken_by"] else ""
    return shown_line(f"{i['path']}  ({who}){note}{taken}")  # names and notes are others' text


@outbox.command("list")
@click.option("--taken", is_flag=True, help="List taken items instead of waiting ones.")
@json_option
@pass_env
def outbox_list(env: Env, taken: bool, as_json: bool) -> None:
    """List items waiting in outbox/, oldest first.

    \b
    Example:
      mailslot outbox list --json
    """
    from mailslot.bus import outbox as busoutbox

    items = [i.to_json() for i in busoutbox.list_items(env.need_root(), taken=taken)]
    empty = "nothing taken yet (outbox/taken/ is empty)" if taken else "outbox/ is empty"
    _emit_rows("items", items, as_json, _item_line, empty)


take_cmd = outbox.command("take")(OUTBOX_TAKE.decorate(pass_env(outbox_take)))


# -- tasks -----------------------------------------------------------------------------------


@click.group()
def tasks() -> None:
    """Per-recipient task files: TASKS.md and tasks-<name>.md (markdown checklists)."""


def _task_line(t: dict[str, Any]) -> str:
    return shown_line(f"{t['id']}  [{'x' if t['done'] else ' '}] {t['file']}: {t['text']}")


@tasks.command("add")
@click.argument("text")
@click.option("--for", "owner", metavar="NAME", help="Write to tasks-NAME.md (default TASKS.md).")
@json_option
@pass_env
def tasks_add(env: Env, text: str, owner: str | None, as_json: bool) -> None:
    """Add `- [ ] TEXT` to a task file; prints the task's id.

    \b
    Example:
      mailslot tasks add --for lantern "review the guide draft in outbox/"
    """
    from mailslot.bus import tasks as bustasks

    task = bustasks.add(env.need_root(), text, owner)
    emit(task.to_json(), as_json, _task_line)


@tasks.command("list")
@click.option("--for", "owner", metavar="NAME", help="Only tasks-NAME.md.")
@click.option("--open", "only_open", is_flag=True, help="Hide ticked tasks.")
@json_option
@pass_env
def tasks_list(env: Env, owner: str | None, only_open: bool, as_json: bool) -> None:
    """List tasks with their ids (ids survive hand edits of other lines).

    \b
    Example:
      mailslot tasks list --for lantern --open
    """
    from mailslot.bus import tasks as bustasks

    found = [t.to_json() for t in bustasks.list_tasks(env.need_root(), owner)]
    if only_open:
        found = [t for t in found if not t["done"]]
    empty = "no open tasks" if only_open else "no tasks"
    _emit_rows("tasks", found, as_json, _task_line, empty)


@tasks.command("done")
@click.argument("task_id", metavar="ID")
@json_option
@pass_env
def tasks_done(env: Env, task_id: str, as_json: bool) -> None:
    """Tick the task with ID (or a unique prefix of at least 4 digits).

    \b
    Example:
      mailslot tasks done 3f9a2c1b
    """
    from mailslot.bus import tasks as bustasks

    task = bustasks.done(env.need_root(), task_id)
    emit(task.to_json(), as_json, _task_line)


# -- owners ----------------------------------------------------------------------------------


@click.group()
def owners() -> None:
    """Who may write which path: the charter DIVISION-OF-WORK.md."""


@owners.command("check")
@click.argument("paths", nargs=-1, required=True)
@json_option
@pass_env
def owners_check(env: Env, paths: tuple[str, ...], as_json: bool) -> None:
    """Exit 1, naming the owner, if NAME may not write any of PATHS (relative to the bus root).

    \b
    Example:
      mailslot owners check --as lantern src/app.py docs/guide.md
    """
    from mailslot.bus import owners as busowners

    verdicts = busowners.check(env.need_root(), env.need_agent(), list(paths))
    emit(
        {"agent": env.need_agent(), "paths": [v.to_json() for v in verdicts]},
        as_json,
        lambda r: "\n".join(
            f"{'ok  ' if p['allowed'] else 'DENY'} {p['path']}  "
            f"({'owner ' + p['owner'] if p['owner'] else 'free'})"
            for p in r["paths"]
        ),
    )
    error = busowners.denied_error(verdicts)
    if error is not None:
        raise error


@owners.command("show")
@json_option
@pass_env
def owners_show(env: Env, as_json: bool) -> None:
    """Print the charter's rows as mailslot reads them.

    \b
    Example:
      mailslot owners show --json
    """
    from mailslot.bus import owners as busowners

    emit(
        busowners.show(env.need_root()),
        as_json,
        lambda r: "\n".join(
            [f"{x['path']}  {x['writer']}" for x in r["rules"]]
            + [f"warning: {w}" for w in r["warnings"]]
        ),
    )


@owners.command("hook")
@click.option("--repo", type=click.Path(file_okay=False), default=".", help="The git checkout.")
@click.option("--force", is_flag=True, help="Replace a pre-commit hook that is not mailslot's.")
@pass_env
def owners_hook(env: Env, repo: str, force: bool) -> None:
    """Install a git pre-commit hook refusing commits that touch another agent's paths.

    The committer is this checkout's `git config mailslot.agent` (set here with --as), never a
    name in the commit message.

    \b
    Example:
      mailslot owners hook --as lantern --repo ~/site
    """
    from mailslot.bus import owners as busowners

    hook = busowners.install_hook(env.need_root(), Path(repo), agent=env.agent, force=force)
    emit(str(hook), False)


@owners.command("pre-commit", hidden=True)
@pass_env
def owners_pre_commit(env: Env) -> None:
    """Run by the hook: check the staged paths of the checkout in the current directory."""
    from mailslot.bus import owners as busowners

    busowners.check_staged(env.need_root(), Path.cwd())

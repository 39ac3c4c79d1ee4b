"""``mailslot exchange``: the two-sided topic mailbox. Thin: parse, call, print."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mailslot.cli.helpers import (
    SECONDS,
    Env,
    SplitGroup,
    emit,
    json_option,
    pass_env,
)
from mailslot.cli.sends import EXCHANGE_SEND, exchange_send
from mailslot.cli.shown import shown, shown_line

__all__ = ["exchange"]


def _ex(env: Env) -> Any:
    from mailslot.exchange.layout import load_exchange

    return load_exchange(env.need_root())


# The wake-up and health commands (watch, monitor, sweep, doctor, ...) live in exchange_health
# and load on first use.
@click.group("exchange", cls=SplitGroup, more=("mailslot.cli.exchange_health",))
def exchange() -> None:
    """Two-sided topic mailbox: numbered entries, per-side STATE.md, guarded archive.

    \b
    Set up once, then each side writes into the other's inbox:
      mailslot exchange init /srv/exchange --side claude --side olu
      mailslot --root /srv/exchange --as claude exchange send --topic gate-bug \\
          --action required "Please look at the gate bug."
      mailslot --root /srv/exchange exchange tick      # from a timer, every 2 minutes
    """


@exchange.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--side", "sides", multiple=True, required=True, help="A side (give two).")
@click.option("--human", "humans", multiple=True, metavar="NAME:SIDE", help="A person on a side.")
@click.option("--group", help="Unix group that owns the directories (setgid).")
@click.option(
    "--modes",
    type=click.Choice(["symmetric", "asymmetric"]),
    default="symmetric",
    show_default=True,
    help="asymmetric: the second side's group cannot write the first side's outbox (2750).",
)
@click.option("--no-git", is_flag=True, help="Do not create a local git repository.")
@click.option("--notify", "notify", multiple=True, metavar="URL", help="Apprise URL for tick.")
@json_option
def init_cmd(
    directory: Path,
    sides: tuple[str, ...],
    humans: tuple[str, ...],
    group: str | None,
    modes: str,
    no_git: bool,
    notify: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create an exchange in DIRECTORY between two sides.

    \b
    Example:
      mailslot exchange init /srv/exchange --side claude --side olu \\
          --human will:claude --group agent-exchange --modes asymmetric
    The first --side is the side running init; with --modes asymmetric its outbox
    (to-<second>/) is 2750, read-only to the group, and to-<first>/ is 2770.
    """
    from mailslot.exchange.create import create_exchange

    ex = create_exchange(
        directory,
        list(sides),
        humans=list(humans),
        group=group,
        modes=modes,
        git=not no_git,
        notify=list(notify),
    )
    emit({"root": str(ex.root), **ex.to_config()}, as_json, f"created exchange at {ex.root}")


send_cmd = exchange.command("send")(EXCHANGE_SEND.decorate(pass_env(exchange_send)))


@exchange.command("state")
@click.argument("topic")
@click.argument("status", metavar="open|in-progress|blocked|done")
@click.option("--tags", help="Comma-separated tags (replaces the current ones).")
@click.option("--force", is_flag=True, help="Mark done over your own unanswered required entry.")
@json_option
@pass_env
def state_cmd(
    env: Env, topic: str, status: str, tags: str | None, force: bool, as_json: bool
) -> None:
    """Set your side's status for TOPIC (writes only your own STATE.md).

    \b
    TOPIC is a full name (2026-11-29-gate-bug) or its slug (gate-bug: the
    newest topic with it).
    STATUS is one of open, in-progress, blocked, done (anything else: exit 1,
    nothing written).
    'done' is refused while your side's newest entry is 'action: required' and
    the other side has not answered it; --force overrides (and says so).
    Example:
      mailslot --as olu exchange state 2026-11-29-gate-bug done --tags bug,gate
    """
    from mailslot.exchange.state import set_state

    tag_list = [t.strip() for t in tags.split(",") if t.strip()] if tags is not None else None
    r = set_state(_ex(env), env.need_agent(), topic, status, tags=tag_list, force=force)
    if r.warning:
        click.echo(f"mailslot: warning: {r.warning}", err=True)
    emit(r.to_json(), as_json, f"{r.relpath}: {r.state.status}")


def _topics_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no topics"
    lines = []
    for r in rows:
        status = " ".join(f"{s}={v}({r['counts'][s]})" for s, v in r["status"].items())
        flags = f" HELD for {','.join(r['held'])}" if r["held"] else ""
        where = "" if r["where"] == "live" else f" [{r['where']}]"
        lines.append(f"{r['topic']}  {status}  last={r['last_activity'] or '-'}{where}{flags}")
    return "\n".join(lines)


@exchange.command("topics")
@click.option("--all", "include_all", is_flag=True, help="Include archived topics.")
@json_option
@pass_env
def topics_cmd(env: Env, include_all: bool, as_json: bool) -> None:
    """List topics with both sides' status and entry counts.

    \b
    Example:
      mailslot exchange topics --all --json
    """
    from mailslot.exchange.overview import topic_summaries

    rows = [t.to_json() for t in topic_summaries(_ex(env), include_archived=include_all)]
    emit({"topics": rows}, as_json, lambda d: _topics_text(d["topics"]))


def _esc(value: Any, *, keep_newlines: bool = False) -> str:
    """``value`` with unprintable characters escaped (newlines too unless ``keep_newlines``)."""
    return shown(value) if keep_newlines else shown_line(value)


def _read_text(d: dict[str, Any]) -> str:
    states = ", ".join(f"{s}: {_esc(st['status'])}" for s, st in d["states"].items())
    out = [f"# {d['topic']} ({d['where']}; {states})"]
    for side, text in d["held"].items():
        body = "\n".join(f"    {line}" for line in _esc(text, keep_newlines=True).splitlines())
        out.append(f"[HELD.md in to-{side}/]\n{body}")
    for e in d["entries"]:
        head = (
            f"--- {e['number']:04d} from {_esc(e['sender'])} (to-{_esc(_inbox_of(e))}) "
            f"at {_esc(e['at'] or '?')} action={_esc(e['action'])}"
        )
        if e["error"]:
            head += f"  (unreadable: {_esc(e['error'])})"
        if e.get("warning"):
            head += f"\n    ! {_esc(e['warning'])}"
        # every body line is indented, so no body line can pass for an entry header
        body = "\n".join(
            f"    {line}" for line in _esc(e["body"].rstrip(), keep_newlines=True).splitlines()
        )
        out.append(f"{head}\n{body}")
    return "\n\n".join(out)


def _inbox_of(e: dict[str, Any]) -> str:
    """The inbox directory an entry sits in (``to-<side>``), from its root-relative path."""
    return str(e["path"]).split("/", 1)[0].removeprefix("to-")


@exchange.command("read")
@click.argument("topic")
@json_option
@pass_env
def read_cmd(env: Env, topic: str, as_json: bool) -> None:
    """Show every entry of TOPIC from both sides, in order, with both statuses.

    \b
    TOPIC is a full name or its slug (the newest live topic with it, else the
    newest archived one).
    Example:
      mailslot exchange read 2026-11-29-gate-bug --json
    """
    from mailslot.exchange.overview import read_topic

    ex = _ex(env)
    emit(read_topic(ex, topic).to_json(ex), as_json, _read_text)


@exchange.command("reopen")
@click.argument("topic")
@click.option("--why", required=True, help="Why the topic is reopened (written as an entry).")
@click.option(
    "--action", default="fyi", show_default=True, metavar="required|fyi", help="The entry's action."
)
@json_option
@pass_env
def reopen_cmd(env: Env, topic: str, why: str, action: str, as_json: bool) -> None:
    """Move TOPIC back out of done/ on both sides, set your side open, say why.

    \b
    TOPIC is a full name or its slug (a live topic with the same slug wins:
    give the full name to reopen an older one).
    Example:
      mailslot --as claude exchange reopen 2026-11-29-gate-bug --why "the fix regressed"
    """
    from mailslot.exchange.reopen import reopen

    r = reopen(_ex(env), env.need_agent(), topic, why, action=action)
    for w in r.warnings:
        click.echo(f"mailslot: warning: {w}", err=True)
    emit(r.to_json(), as_json, f"reopened {r.topic}: {r.entry.relpath}")


@exchange.command("tick")
@click.option("--notify", "notify", multiple=True, metavar="URL", help="Apprise URL (repeatable).")
@click.option(
    "--lock-wait",
    type=SECONDS,
    default=30.0,
    show_default=True,
    envvar="MAILSLOT_TICK_LOCK_WAIT",
    metavar="SECONDS",
    help="How long to wait for a running tick before failing.",
)
@json_option
@pass_env
def tick_cmd(env: Env, notify: tuple[str, ...], lock_wait: float, as_json: bool) -> None:
    """One run: diff, guard, hold, archive, INDEX.md, git commit, one notification.

    \b
    Run it from a timer every 2 minutes (runs never overlap: a lock is held).
    --notify URL overrides the config's targets, e.g. tgram://TOKEN/CHAT or
    json://127.0.0.1:8080/hook. Exits 1 when it could not do its job.
    Example:
      mailslot --root /srv/exchange exchange tick --json
    """
    from mailslot.exchange.tick import tick

    r = tick(_ex(env), notify_urls=list(notify) or None, lock_wait=lock_wait)
    for w in r.warnings:
        click.echo(f"mailslot: warning: {w}", err=True)
    emit(r.to_json(), as_json, lambda _: r.text())
    r.raise_for_errors()
    if r.notify_error:
        click.echo(f"mailslot: warning: {r.notify_error}; retried next tick", err=True)

"""``mailslot exchange watch|monitor|sweep|doctor|install|skill|dispatch|closeout|dispatch-status``.

Wake-up and health for the exchange. Thin, like every face: parse, one channel call,
render text or ``--json``. ``register(group)`` attaches the commands to the ``exchange`` group.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from mailslot.cli.helpers import (
    Env,
    emit,
    json_option,
    pass_env,
    read_body,
    unit_dir_option,
)
from mailslot.cli.waits import EXCHANGE_WATCH, SCOPE_HELP, exchange_watch
from mailslot.core.errors import MissingAgent

__all__ = ["register"]


def _ex(env: Env) -> Any:
    from mailslot.exchange.layout import load_exchange

    return load_exchange(env.need_root())


watch_cmd = click.command("watch")(EXCHANGE_WATCH.decorate(pass_env(exchange_watch)))


@click.command("monitor")
@click.option(
    "--action", "scope", default="any", show_default=True, metavar="required|any", help=SCOPE_HELP
)
@json_option
@pass_env
def monitor_cmd(env: Env, scope: str, as_json: bool) -> None:
    """Print a stable listing of what awaits you; writes nothing, ever.

    \b
    For schedulers that wake an agent only when a script's output changes
    (Hermes cron --monitor-script, cron wrappers): the output is identical
    until something relevant changes, and running it by hand cannot swallow a
    change because it keeps no baseline. Empty output: nothing awaits. Lines:
    unanswered entries per topic, HELD.md for you, the other side done while you
    are not, a stale tick. --action required ignores fyi entries.
    Example:
      mailslot --root /srv/exchange --as olu exchange monitor --action required
    """
    from mailslot.exchange.monitor import monitor

    r = monitor(_ex(env), env.need_agent(), action=scope)
    emit(r.to_json(), as_json, r.text())


def _sweep_text(agent: str, side: str, d: dict[str, Any]) -> str:
    warn = [f"warning: {w}" for w in d.get("warnings", [])]
    if not d["debts"]:
        return "\n".join([f"{agent} owes nothing (side {side})", *warn])
    what = {
        "reply": "reply to",
        "close": "close (they are done)",
        "re-read": "re-read (HELD)",
        "unseen": "read (arrived after the archive, in done/)",
    }
    rows = [
        f"{x['topic']}  {what.get(x['reason'], x['reason'])}"
        + (f" {x['entry']}" if x["entry"] else "")
        + (f"  since {x['since']}" if x["since"] else "")
        + (f"  ({x['detail']})" if x.get("detail") else "")
        for x in d["debts"]
    ]
    return "\n".join([f"{agent} (side {side}) owes {len(rows)}:", *rows, *warn])


@click.command("sweep")
@json_option
@pass_env
def sweep_cmd(env: Env, as_json: bool) -> None:
    """List your debts: required entries to answer, topics to close, holds to re-read.

    \b
    Computed from your own side exactly as INDEX.md computes it; run it from each
    side (each side's sweep only shows its own debts). Writes nothing.
    --json: {"debts": [{"topic", "reason", "side", "entry", "since"}]}; a "detail"
    says why when the entry owed a reply does not read (it counts as required).
    Example:
      mailslot --root /srv/exchange --as claude exchange sweep --json
    """
    from mailslot.exchange.sweep import sweep

    r = sweep(_ex(env), env.need_agent())
    emit(r.to_json(), as_json, lambda d: _sweep_text(r.agent, r.side, d))


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for v in values:
        side, sep, name = v.partition("=")
        if not sep or not side or not name:
            raise click.BadParameter(f"expected SIDE={what.upper()}, got {v!r}")
        out[side] = name
    return out


def _doctor_text(d: dict[str, Any]) -> str:
    out = []
    for c in d["checks"]:
        out.append(f"{c['status'].upper():4}  {c['check']}: {c['detail']}")
        if c["fix"] and c["status"] in ("fail", "warn", "skip"):
            out.append(f"      fix: {c['fix']}")
    out.append("all checks passed" if d["ok"] else "some checks FAILED")
    return "\n".join(out)


@click.command("doctor")
@click.option("--user", "users", multiple=True, metavar="SIDE=USER", help="A side's Unix user.")
@click.option("--service", "services", multiple=True, metavar="SIDE=UNIT", help="Its service.")
@click.option(
    "--max-age",
    type=float,
    default=10.0,
    show_default=True,
    metavar="MINUTES",
    help="Oldest acceptable tick heartbeat / uncommitted change.",
)
@click.option(
    "--patience",
    type=float,
    default=12.0,
    show_default=True,
    metavar="HOURS",
    help="Warn when a required entry waits on a side longer than this.",
)
@json_option
@pass_env
def doctor_cmd(
    env: Env,
    users: tuple[str, ...],
    services: tuple[str, ...],
    max_age: float,
    patience: float,
    as_json: bool,
) -> None:
    """Check the exchange for every silent failure; each finding has a fix. Exit 1 on a FAIL.

    \b
    Directory modes and the one-way boundary (as root: tried live as each side's
    user -- its outbox must take a file, its inbox must refuse one), each side's
    systemd sandbox (ProtectSystem=/ReadWritePaths=), the tick's heartbeat,
    git cleanliness, numbering (duplicates, gaps, an entry that shrank in git
    history), half-archived topics, and required entries a side has left
    unanswered for hours (a dead poller looks like silence). Users and services come from users: and
    services: mappings in .mailslot/config, or --user/--service.
    Example:
      mailslot --root /srv/exchange exchange doctor --user olu=olu --service olu=openclaw.service
    """
    from mailslot.exchange.doctor import doctor

    r = doctor(
        _ex(env),
        users=_pairs(users, "user"),
        services=_pairs(services, "unit"),
        max_age=timedelta(minutes=max_age),
        patience=timedelta(hours=patience),
    )
    emit(r.to_json(), as_json, _doctor_text)
    r.raise_for_failures()


def _install_text(d: dict[str, Any]) -> str:
    out = []
    for path, text in d["units"].items():
        out += [f"# --- {path} ---", text]
    if d["written"]:
        out.append("# wrote: " + ", ".join(d["written"]))
    out.append("# then:")
    out += [f"#   {c}" for c in d["commands"]]
    out.append("# monitor script for Hermes-style schedulers (wake only when output changes):")
    out += [f"#   {side}: {line}" for side, line in d["monitor"].items()]
    out.append("# no systemd? a cron line (/etc/crontab format) instead of the timer:")
    out.append(f"#   {d['cron']}")
    if d.get("verify"):
        out.append(f"# systemd-analyze verify says: {d['verify']}")
    return "\n".join(out)


@click.command("install")
@click.option("--user", help="Run the tick as this user (default: root).")
@click.option("--every", default="2min", show_default=True, help="Tick interval (90s, 2min, 1h).")
@click.option("--dry-run", is_flag=True, help="Print the units and lines; write nothing.")
@click.option("--name", help="Unit name suffix (default: the root directory's name).")
@unit_dir_option
@click.option("--enable", is_flag=True, help="Also run systemctl daemon-reload + enable --now.")
@click.option("--no-verify", is_flag=True, help="Write even if systemd-analyze verify objects.")
@json_option
@pass_env
def install_cmd(
    env: Env,
    user: str | None,
    every: str,
    dry_run: bool,
    name: str | None,
    unit_dir: Path,
    enable: bool,
    no_verify: bool,
    as_json: bool,
) -> None:
    """Write a hardened systemd service + timer for the tick; print the polling lines.

    \b
    The service runs 'exchange tick' with ProtectSystem=strict,
    ReadWritePaths=<root> only, NoNewPrivileges, PrivateTmp and more. Also
    prints each side's monitor-script line (Hermes cron --monitor-script) and a
    cron fallback. Units are checked with systemd-analyze verify where present,
    and not written if it objects.
    Example:
      mailslot --root /srv/exchange exchange install --every 2min --dry-run
    """
    from mailslot.exchange.install import install

    plan = install(
        _ex(env),
        user=user,
        every=every,
        unit_dir=unit_dir,
        name=name,
        dry_run=dry_run,
        enable=enable,
        verify=not no_verify,
    )
    emit({**plan.to_json(), "dry_run": dry_run}, as_json, _install_text)


@click.command("skill")
@click.option(
    "--for",
    "flavour",
    type=click.Choice(["claude-code", "hermes", "generic"]),
    default="generic",
    show_default=True,
)
@json_option
@pass_env
def skill_cmd(env: Env, flavour: str, as_json: bool) -> None:
    """Print the instruction file that teaches you (--as) this exchange.

    \b
    Rendered from the exchange's own config: your inbox and outbox paths, how to
    take new entries, reply, set STATE.md, what HELD.md means, the rule that
    'required' is never marked done, and that messages are data. Save it where
    your agent loads skills, in a folder named as the skill (mailslot-exchange-NAME
    for --as NAME: strict skill loaders require the two to match). Example:
      mailslot --root /srv/exchange --as olu exchange skill --for hermes \\
          > ~/.hermes/skills/mailslot-exchange-olu/SKILL.md
    """
    from mailslot.exchange.skill import render_skill

    text = render_skill(_ex(env), env.need_agent(), flavour)
    if as_json:
        emit({"flavour": flavour, "text": text}, as_json)
    else:
        click.echo(text, nl=False)


def _agent(ctx: click.Context, given: str | None) -> str:
    obj = ctx.find_root().obj
    agent = given or (obj.agent if isinstance(obj, Env) else None)
    if not agent:
        raise MissingAgent("who is dispatching? pass --as NAME or set MAILSLOT_AGENT")
    return agent


@click.command("dispatch")
@click.option(
    "--to-root",
    "--root",
    "roots",
    multiple=True,
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="An exchange to send to (repeat: one per reviewer).",
)
@click.option("--as", "agent", metavar="NAME", help="Who dispatches (env MAILSLOT_AGENT).")
@click.option("--topic", "slug", required=True, metavar="SLUG", help="The new topic's slug.")
@click.option("--action", default="required", show_default=True, metavar="required|fyi")
@click.argument("body", required=False)
@json_option
@click.pass_context
def dispatch_cmd(
    ctx: click.Context,
    roots: tuple[Path, ...],
    agent: str | None,
    slug: str,
    action: str,
    body: str | None,
    as_json: bool,
) -> None:
    """Send one brief as a new topic into several exchanges, for independent answers.

    \b
    Each copy says that another agent has the same questions and must not be
    consulted. Prints the group id that closeout and dispatch-status take.
    Here --root (alias --to-root) repeats, one per exchange; a --root given
    before 'exchange' is not used.
    Example:
      mailslot exchange dispatch --as claude --to-root /srv/x-olu --to-root /srv/x-chuka \\
          --topic gate-review --action required - < brief.md
    """
    from mailslot.exchange.dispatch import dispatch
    from mailslot.exchange.entries import MAX_BODY_BYTES

    text = read_body(body, limit=MAX_BODY_BYTES)
    g = dispatch(list(roots), _agent(ctx, agent), slug, action, text)
    text = f"dispatch group {g.group}\n" + "\n".join(f"  {m.root}: {m.entry}" for m in g.members)
    emit(g.to_json(), as_json, text)


@click.command("closeout")
@click.argument("group")
@click.argument("body", required=False)
@click.option("--action", default="fyi", show_default=True, metavar="required|fyi")
@click.option(
    "--again", is_flag=True, help="Send even to members this same close-out already reached."
)
@json_option
def closeout_cmd(group: str, body: str | None, action: str, again: bool, as_json: bool) -> None:
    """Send the same close-out to every exchange a dispatched brief went to.

    \b
    An archived topic is reopened (with the close-out as the reason) rather than
    written where nobody looks. Exits 1 if any member could not be reached;
    run the same command again to retry: members already reached are listed,
    not written to twice. Different text is a new close-out, sent to all.
    Example:
      mailslot exchange closeout gate-review-20261129-181400 "Fixed in 4a1c; thanks: ..."
    """
    from mailslot.exchange.dispatch import closeout
    from mailslot.exchange.entries import MAX_BODY_BYTES

    r = closeout(group, read_body(body, limit=MAX_BODY_BYTES), action=action, again=again)
    lines = [
        f"{x['root']}: "
        + (f"ERROR {x['error']}" if x.get("error") else x["entry"])
        + (" (reopened)" if x.get("reopened") else "")
        + (" (already sent)" if x.get("already") else "")
        for x in r.results
    ]
    emit(r.to_json(), as_json, "\n".join(lines))
    r.raise_for_errors()


def _status_text(d: dict[str, Any]) -> str:
    if "groups" in d:
        return "\n".join(f"{g['group']}  {len(g['members'])} member(s)" for g in d["groups"]) or (
            "no dispatch groups"
        )
    out = [f"group {d['group']} ({d['created_at']}), close-outs sent: {d['closeouts']}"]
    for m in d["members"]:
        if m.get("error"):
            state = f"ERROR {m['error']}"
        elif m["replied"]:
            state = f"replied ({', '.join(m['replies'])}; last {m['last_reply_at'] or '?'})"
        else:
            state = "OWES a reply"
        extra = f" [{m['where']}; {m['reviewer']}: {m['reviewer_status']}]" if "where" in m else ""
        out.append(f"  {m.get('reviewer', '?')} @ {m['root']}: {state}{extra}")
    for f in d["failed"]:
        out.append(f"  never sent to {f['root']}: {f['error']}")
    return "\n".join(out)


@click.command("dispatch-status")
@click.argument("group", required=False)
@json_option
def dispatch_status_cmd(group: str | None, as_json: bool) -> None:
    """Show which reviewers of a dispatched brief replied and which owe (no GROUP: list groups).

    \b
    Example:
      mailslot exchange dispatch-status gate-review-20261129-181400 --json
    """
    from mailslot.exchange.dispatch import dispatch_status, list_groups

    if group is None:
        emit({"groups": [g.to_json() for g in list_groups()]}, as_json, _status_text)
        return
    emit(dispatch_status(group), as_json, _status_text)


def register(group: click.Group) -> None:
    """Attach the wake-up and health commands to the ``exchange`` group."""
    for cmd in (
        watch_cmd,
        monitor_cmd,
        sweep_cmd,
        doctor_cmd,
        install_cmd,
        skill_cmd,
        dispatch_cmd,
        closeout_cmd,
        dispatch_status_cmd,
    ):
        group.add_command(cmd)

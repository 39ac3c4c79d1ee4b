"""``mailslot relay``: the face of ``mailslot.relay``; parses, calls, prints.

A ``say=`` is the other side's words: text output prints it escaped onto one line
(``mailslot.cli.shown``, ``mailslot.cli.relay_text``), so no vertical tab, U+2028 or ANSI escape
in it can print a second line that passes for another turn or a status line of ours. ``--json``
is raw. ``relay ask`` is declared in ``mailslot.cli.waits`` (it also runs without click).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mailslot.cli.helpers import SECONDS, Env, emit, json_option, pass_env
from mailslot.cli.relay_text import delivery_text, loud, read_cap, with_unreadable
from mailslot.cli.shown import read_text, shown_line
from mailslot.cli.waits import RELAY_ASK, RELAY_TIMEOUT, relay_ask

__all__ = ["relay"]


_timeout = RELAY_TIMEOUT.decorator()


@click.group("relay")
def relay() -> None:
    """One-line turn relay with matched ids: a worker and a manager.

    \b
    The mailbox is --root DIR (env MAILSLOT_ROOT); who you are is --as (env MAILSLOT_AGENT):
      mailslot relay init /tmp/mb --worker w1 --manager manager
      mailslot --root /tmp/mb --as manager relay serve        # blocks for the next C turn
      mailslot --root /tmp/mb --as w1 relay ask "What's the plan?"   # prints the R reply
      mailslot --root /tmp/mb --as manager relay reply --id C01 "Ship Friday."
    Manager-led interview: the manager `ask`s Q turns, the worker `serve`s and `answer`s them.
    Exit codes: 3 a wait timed out (the turn stays open: `relay recover`), 4 the relay was stopped.
    """


@relay.command("init")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--worker", required=True, help="The voice-side worker's name (e.g. w1).")
@click.option("--manager", required=True, help="The manager's name (e.g. manager).")
@json_option
def init_cmd(directory: str, worker: str, manager: str, as_json: bool) -> None:
    """Create a mailbox: to-WORKER.md, to-MANAGER.md, state/, .mailslot/relay.json.

    \b
    Example:
      mailslot relay init /tmp/mb --worker w1 --manager manager
    """
    from mailslot.relay import init

    r = init(Path(directory), worker, manager)
    data = {"root": str(r.root), "worker": r.worker, "manager": r.manager}
    emit(data, as_json, f"{r.root}\nworker: {r.worker}  manager: {r.manager}")


ask_cmd = relay.command("ask")(RELAY_ASK.decorate(pass_env(relay_ask)))


def _reply(env: Env, ask_id: str, text: str | None, as_json: bool) -> None:
    from mailslot.relay import reply
    from mailslot.relay.mailbox import SAY_MAX_CHARS

    said = read_text(text, limit=read_cap(SAY_MAX_CHARS), what="TEXT")
    line = reply(env.need_root(), env.need_agent(), ask_id, said)
    emit(line.to_json(), as_json, f"sent {line.id}")


@relay.command("reply")
@click.option("--id", "ask_id", required=True, help="The turn answered: C<N> (or Q<N>).")
@click.argument("text", required=False)
@json_option
@pass_env
def reply_cmd(env: Env, ask_id: str, text: str | None, as_json: bool) -> None:
    """Answer turn --id with exactly one line: R<N> (manager) or A<N> (worker).

    One line, at most 25 words for the manager: refused, never trimmed.

    \b
    Example:
      mailslot --as manager relay reply --id C03 "Friday, if the tests stay green."
    """
    _reply(env, ask_id, text, as_json)


@relay.command("answer")
@click.option("--id", "ask_id", required=True, help="The question answered: Q<N>.")
@click.argument("text", required=False)
@json_option
@pass_env
def answer_cmd(env: Env, ask_id: str, text: str | None, as_json: bool) -> None:
    """Answer the manager's interview question --id Q<N> with A<N> (same as `reply`).

    \b
    Example:
      mailslot --as w1 relay answer --id Q02 "She prefers mornings."
    """
    _reply(env, ask_id, text, as_json)


@relay.command("serve")
@_timeout
@json_option
@pass_env
def serve_cmd(env: Env, timeout: float, as_json: bool) -> None:
    """Block until a turn you owe a reply to is open; print its id and say= text.

    The manager waits for C turns, the worker (in an interview) for Q turns. Exit 3 on
    timeout; exit 4 when the relay is stopped or its mailbox removed while waiting.

    \b
    Example:
      mailslot --as manager relay serve --json
    """
    from mailslot.relay import serve

    found, report = loud()
    t = serve(env.need_root(), env.need_agent(), timeout=timeout, on_unreadable=report)
    emit(with_unreadable(t.to_json(), found), as_json, f"{t.id} {shown_line(t.say or '')}")


relay.add_command(serve_cmd, "watch")  # the same command under the name a hand-run manager uses


@relay.command("recover")
@click.option("--timeout", type=SECONDS, default=0.0, show_default=True, help="Seconds to wait.")
@json_option
@pass_env
def recover_cmd(env: Env, timeout: float, as_json: bool) -> None:
    """Finish your turn whose held wait timed out: read from the saved cursor, mark RECOVERED.

    \b
    Example:
      mailslot --as w1 relay recover
    """
    from mailslot.relay import recover

    found, report = loud()

    def show(d: Any) -> None:  # written and flushed before the delivery is recorded
        emit(with_unreadable(d.to_json(), found), as_json, delivery_text)

    recover(env.need_root(), env.need_agent(), timeout=timeout, on_unreadable=report, show=show)


@relay.command("note")
@click.argument("text", required=False)
@pass_env
def note_cmd(env: Env, text: str | None) -> None:
    """Write a diagnostic to state/<you>-notes.md -- never to an inbox.

    \b
    Example:
      mailslot --as manager relay note "C03 took 14 s; the human paused."
    """
    from mailslot.relay import note
    from mailslot.relay.mailbox import NOTE_MAX_BYTES

    said = read_text(text, limit=read_cap(NOTE_MAX_BYTES), what="TEXT")
    click.echo(str(note(env.need_root(), env.need_agent(), said)))


@relay.command("stop")
@click.argument("reason", required=False)
@json_option
@pass_env
def stop_cmd(env: Env, reason: str | None, as_json: bool) -> None:
    """Stop the relay now, from either side; later turns are refused, waits end (exit 4).

    Appends cannot be recalled: lines already written stay; a stop prevents future sends.

    \b
    Example:
      mailslot --as w1 relay stop "The human said stop."
    """
    from mailslot.relay import stop

    line = stop(env.need_root(), env.need_agent(), reason)
    emit(
        line.to_json(),
        as_json,
        f"stopped by {line.author} at {line.hhmm}; appends cannot be recalled: lines already "
        "written stay",
    )


# A turn line starts with "- [": not an option, so the documented example needs no `--`.
@relay.command("post", context_settings={"ignore_unknown_options": True})
@click.argument("line")
@json_option
@pass_env
def post_cmd(env: Env, line: str, as_json: bool) -> None:
    """Append one hand-made turn line to the other side's inbox, after every check.

    Anything that is not a well-formed turn line of a kind allowed there is refused, and so is
    anything `reply`/`ask`/`answer`/`stop` would refuse: a second reply, a reply to a turn never
    asked, a second open turn, a turn out of order, any turn after a stop.

    \b
    Example:
      mailslot --as manager relay post "- [14:02] (manager) id=R03 T1=1722868961456 say=Yes."
    """
    from mailslot.relay import open_relay, post

    parsed = post(open_relay(env.need_root()), env.need_agent(), line)
    emit(parsed.to_json(), as_json, f"sent {parsed.id}")


@relay.command("status")
@json_option
@pass_env
def status_cmd(env: Env, as_json: bool) -> None:
    """Who is who, the open turn, whether the relay was stopped.

    \b
    Example:
      mailslot --root /tmp/mb relay status --json
    """
    from mailslot.relay import status

    st = status(env.need_root())
    open_turn = st["open_turn"]
    shown_turn = open_turn["id"] + " " + shown_line(open_turn["say"] or "") if open_turn else "none"
    stopped = st["stopped"]
    emit(
        st,
        as_json,
        f"worker: {st['worker']}  manager: {st['manager']}\n"
        f"open turn: {shown_turn}\n"
        f"stopped: {'by ' + stopped['from'] + ' at ' + stopped['hhmm'] if stopped else 'no'}\n"
        f"turn lines: {st['turns']}  malformed lines skipped: {st['malformed_lines']}"
        + "".join(
            f"\nTORN: {t['size']} bytes of appends killed mid-write in {shown_line(t['path'])}"
            for t in st["torn"]
        ),
    )


@relay.command("stats")
@json_option
@pass_env
def stats_cmd(env: Env, as_json: bool) -> None:
    """The relay's latency table from the mailbox's own T0/seen/T1/T2 stamps.

    \b
    Example:
      mailslot --root /tmp/mb relay stats
    """
    from mailslot.relay import stats

    s = stats(env.need_root())
    emit(s.to_json(), as_json, s.table())

"""The commands that block until something comes, ``exchange watch``, ``chat wait``, ``relay
ask`` and ``outbox take`` (``--wait``): what each takes (a ``spec.Spec``, declared once) and its
body, with no click.

``mailslot.cli.exchange_health``, ``mailslot.cli.chat``, ``mailslot.cli.relay`` and
``mailslot.cli.bus`` build their click commands from these, and ``mailslot.cli.quick`` runs the
same bodies straight from the command line: an agent blocked on one starts it on every waking,
and waits for its exit. Each body parses nothing, calls one channel function and prints; output
is written and flushed before anything is marked seen, recorded delivered or left claimed (the
channel's ``show``). A warning is printed with ``click.echo``, as by every other command, loading
click only then.
"""

from __future__ import annotations

from mailslot.cli.common import Env, emit, read_text
from mailslot.cli.shown import shown_line
from mailslot.cli.spec import JSON, Param, Spec
from mailslot.core.ending import end_promptly as exit_promptly

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "CHAT_WAIT",
    "EXCHANGE_WATCH",
    "OUTBOX_TAKE",
    "RELAY_ASK",
    "RELAY_TIMEOUT",
    "SCOPE_HELP",
    "chat_wait",
    "exchange_watch",
    "outbox_take",
    "relay_ask",
    "watch_text",
]

# validated in the channel (exit 1, a clear message), listed here for --help
SCOPE_HELP = "required: only 'action: required' entries; any: every entry."


def _warn(warnings: list[str]) -> None:
    if warnings:
        import click  # what every command's warning goes through (it strips escapes off a pipe)

        for warning in warnings:
            click.echo(f"mailslot: warning: {warning}", err=True)


def watch_text(d: dict[str, Any]) -> str:
    """What ``exchange watch`` prints for the items it delivers (``--json``: ``d`` itself)."""
    out = []
    for item in d["items"]:
        path = shown_line(item["path"])
        lines = [path + ("  [archived before you read it]" if item["archived"] else "")]
        if item["kind"] == "held":
            lines.append("  HELD: the archive waits for you to re-read this topic")
            lines += [f"  {shown_line(line)}" for line in item["text"].splitlines()[:1]]
        elif item["kind"] == "stray":
            lines.append(f"  STRAY (not delivered as an entry): {shown_line(item['why'])}")
        else:
            # the sender from the transport, and only the known fields, each escaped
            lines.append(f"  from: {shown_line(item['sender'])}")
            lines.append(f"  at: {shown_line(item['at'] or '?')}")
            lines.append(f"  action: {shown_line(item['action'] or '?')}")
            if item.get("warning"):
                lines.append(f"  WARNING: {shown_line(item['warning'])}")
            if item["error"]:
                lines.append(f"  (unreadable: {shown_line(item['error'])})")
        out.append("\n".join(lines))
    if d["peek"]:
        out.append("(peek: nothing marked seen)")
    return "\n\n".join(out)


EXCHANGE_WATCH = Spec(
    Param("timeout", "--timeout", kind="seconds", metavar="SECONDS", help="Give up (exit 3)."),
    Param("peek", "--peek", kind="flag", help="Show what is new without marking it seen."),
    Param(
        "scope",
        "--action",
        default="any",
        show_default=True,
        metavar="required|any",
        help=SCOPE_HELP,
    ),
    Param(
        "mark_all_seen",
        "--mark-all-seen",
        kind="flag",
        help="First set-up: mark everything present seen, exit.",
    ),
    Param("acks", "--ack", multiple=True, metavar="KEY", help="Mark a peeked item seen."),
    JSON,
)


def exchange_watch(
    env: Env,
    timeout: float | None,
    peek: bool,
    scope: str,
    mark_all_seen: bool,
    acks: tuple[str, ...],
    as_json: bool,
) -> None:
    """Block until an entry addressed to you arrives that you have not seen; print it.

    \b
    Wakes on kernel file events (new topics, new entries, renames), not a poll.
    Prints each new entry's path and frontmatter (--json: body too), then marks it
    seen in YOUR state dir: output that fails (a closed pipe) or is interrupted
    marks nothing; --peek marks nothing. A --timeout covers the output too:
    standard output that nobody reads (a full pipe, nothing taken for 2 s past
    the timeout) ends the watch, exit 1, nothing marked. Entries archived before you read
    them are delivered too, and a HELD.md placed for you once. Exit 3 on timeout;
    exit 4 when your inbox is removed while waiting.
    A reader that never watched has seen nothing: all pending is delivered
    (use --mark-all-seen once to start from now). To survive a run that fails
    half-way: --peek --json, do the work, then --ack KEY for each item's key.
    Example:
      mailslot --root /srv/exchange --as olu exchange watch --timeout 600 --action required
    """
    from mailslot.exchange import watch as w
    from mailslot.exchange.layout import load_exchange

    if acks:
        n = w.ack(load_exchange(env.need_root()), env.need_agent(), list(acks))
        emit({"acked": n}, as_json, f"marked {n} item(s) seen")
        return
    if mark_all_seen:
        n = w.mark_all_seen(load_exchange(env.need_root()), env.need_agent())
        emit({"marked": n}, as_json, f"marked {n} item(s) seen")
        return
    import time

    ex = load_exchange(env.need_root())
    # the output too: a pipe nobody reads ends the watch
    deadline = None if timeout is None else time.monotonic() + timeout
    exit_promptly()

    def show(r: Any) -> None:  # written and flushed before anything is marked seen
        emit(r.to_json(ex.root), as_json, watch_text, deadline=deadline)

    with w.Watcher(ex, env.need_agent(), action=scope) as watcher:
        _warn(watcher.warnings)
        said = len(watcher.warnings)
        watcher.watch(timeout, peek=peek, show=show)
        _warn(watcher.warnings[said:])  # a seen-mark that could not be written after the output


CHAT_WAIT = Spec(
    Param("file", kind="file", required=True),
    Param(
        "timeout",
        "--timeout",
        kind="seconds",
        default=300.0,
        show_default=True,
        help="Seconds to wait (0: just check). Exit 3 when nothing came.",
    ),
    Param(
        "cursor",
        "--cursor",
        kind="int",
        help="Start at this byte cursor; the stored one is not moved.",
    ),
    JSON,
)


def chat_wait(env: Env, file: str, timeout: float, cursor: int | None, as_json: bool) -> None:
    """Block until another participant writes to FILE; print their new messages.

    Only others' messages since your cursor (kept per file and name in your state dir) are
    shown, and the cursor moves past them once they are written out: output that fails (a
    closed pipe) or is interrupted leaves them for the next wait. The timeout covers the
    output: standard output that nobody reads (a full pipe, nothing taken for 2 s past the
    timeout) ends the wait, exit 1, nothing marked read. Exit 3 on timeout; exit 4 when the
    file was removed or the chat has ended.

    \b
    Example:
      mailslot chat wait FILE --timeout 300 --json
    """
    import time
    from pathlib import Path

    from mailslot.chat import wait
    from mailslot.cli.chat_text import messages_text

    deadline = time.monotonic() + timeout  # the output too: a pipe nobody reads ends the wait
    exit_promptly()

    def show(batch: Any) -> None:  # written and flushed before the cursor moves
        ended = "\n\nThe chat has ended by mutual agreement." if batch.ended else ""

        def text(d: dict[str, Any]) -> str:
            return messages_text(d["messages"]) + ended

        emit(batch.to_json(), as_json, text, deadline=deadline)

    batch = wait(Path(file), env.agent, timeout=timeout, cursor=cursor, show=show)
    _warn(batch.warnings)


# how long a relay command holds its wait (relay ask, and relay serve under click)
RELAY_TIMEOUT = Param(
    "timeout",
    "--timeout",
    kind="seconds",
    default=120.0,
    show_default=True,
    help="Seconds to hold the wait; exit 3 when nothing came.",
)

RELAY_ASK = Spec(
    Param("text"),
    Param("to", "--to", help="The other side (checked against the mailbox config)."),
    Param(
        "kind",
        "--kind",
        kind="choice",
        choices=("C", "Q"),
        help="C (worker turn) or Q (manager-led interview); default from your role.",
    ),
    RELAY_TIMEOUT,
    Param("no_wait", "--no-wait", kind="flag", help="Append the turn and return without waiting."),
    JSON,
)


def relay_ask(
    env: Env,
    text: str | None,
    to: str | None,
    kind: str | None,
    timeout: float,
    no_wait: bool,
    as_json: bool,
) -> None:
    """Open the next turn (C<N>, or Q<N> for the manager) and print the matching reply's say=.

    Arms and saves the cursor before appending, selects the reply by id. On timeout (exit 3)
    the turn stays open; `relay recover` finishes it. Exit 4 when the relay is stopped or
    its mailbox removed while waiting.

    \b
    Example:
      mailslot --as w1 relay ask --to manager "The human asks when we ship."
    """
    from mailslot.cli.relay_text import delivery_text, loud, read_cap, with_unreadable
    from mailslot.relay import ask
    from mailslot.relay.mailbox import SAY_MAX_CHARS

    found, report = loud()
    exit_promptly()

    def show(d: Any) -> None:  # written and flushed before the delivery is recorded
        emit(with_unreadable(d.to_json(), found), as_json, delivery_text)

    result = ask(
        env.need_root(),
        env.need_agent(),
        read_text(text, limit=read_cap(SAY_MAX_CHARS), what="TEXT"),
        timeout=timeout,
        kind=kind,
        to=to,
        wait=not no_wait,
        on_unreadable=report,
        show=show,
    )
    if no_wait:
        data = with_unreadable(result.to_json(), found)
        emit(data, as_json, f"sent {data['id']}")


OUTBOX_TAKE = Spec(
    Param("wait", "--wait", kind="seconds", default=0.0, metavar="S", help="Wait up to S seconds."),
    JSON,
)


def outbox_take(env: Env, wait: float, as_json: bool) -> None:
    """Claim the oldest item into outbox/taken/ and print its absolute path; exit 3 if none.

    With --wait, exit 4 when outbox/ is removed while waiting.

    Only the writer of outbox/taken/ in DIVISION-OF-WORK.md may take. Two takers racing never
    get the same item. If the path cannot be printed (a closed pipe, Ctrl-C) the item goes
    back to outbox/; a taker killed in between leaves it in outbox/taken/ (list --taken).

    \b
    Example:
      path=$(mailslot outbox take --as beacon) && echo "integrate $path"
    """
    from mailslot.bus import outbox as busoutbox

    exit_promptly()

    def show(item: Any) -> None:  # the claim is undone if this fails
        if item.sha256_ok is False:
            _warn([f"{item.abspath} does not match the sha256 in its record"])
        emit(item.to_json(), as_json, item.abspath)

    busoutbox.take(env.need_root(), env.need_agent(), wait=wait, show=show)

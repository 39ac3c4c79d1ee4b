"""The commands that write one message, ``exchange send`` and ``chat say``: what each takes (a
``spec.Spec``, declared once) and its body, with no click.

``mailslot.cli.exchange`` and ``mailslot.cli.chat`` build their click commands from these, and
``mailslot.cli.quick`` runs the same bodies straight from the command line: agents call these
many times a day, and click is half of a process's start. Each body parses nothing, calls one
channel function and prints.
"""

from __future__ import annotations

from mailslot.cli.common import Env, Usage, emit, read_body, read_body_file, read_text
from mailslot.cli.spec import JSON, Param, Spec
from mailslot.core.ending import end_promptly as exit_promptly

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["CHAT_SAY", "EXCHANGE_SEND", "chat_say", "exchange_send"]

EXCHANGE_SEND = Spec(
    Param("topic", "--topic", required=True, metavar="SLUG|TOPIC", help="Topic name or slug."),
    Param(
        "action",
        "--action",
        required=True,
        metavar="required|fyi",
        help="required: the other side owes a reply; fyi: it does not.",
    ),
    Param(
        "body_file",
        "--body-file",
        kind="file_path",
        metavar="PATH",
        help="Read the body from this file (no shell quoting or heredoc needed).",
    ),
    Param("to", "--to", metavar="SIDE", hidden=True),
    Param("body"),
    JSON,
)


def exchange_send(
    env: Env,
    topic: str,
    action: str,
    body_file: Path | None,
    to: str | None,
    body: str | None,
    as_json: bool,
) -> None:
    """Write a new entry into the other side's inbox; prints its path.

    \b
    --topic X: an existing topic named X, else the newest live topic with slug X,
    else a new topic YYYY-MM-DD-X. BODY '-' (or none) reads standard input;
    --body-file PATH reads a file instead. There is no recipient to pick: an
    entry always goes to the other side (a --to must name it).
    Example:
      mailslot --as claude exchange send --topic gate-bug --action required "Is it fixed?"
      mailslot --as claude exchange send --topic gate-bug --action fyi --body-file reply.md
    """
    from mailslot.exchange.entries import MAX_BODY_BYTES, send
    from mailslot.exchange.layout import load_exchange

    if body_file is not None and body is not None:
        raise Usage("give BODY or --body-file, not both")
    ex = load_exchange(env.need_root())
    if to is not None:
        other = ex.other(ex.side_of(env.need_agent()))
        if to != other:
            raise Usage(
                f"exchange send has no recipient to choose: an entry always goes to the other "
                f"side, {other} (to-{other}/); drop --to {to}"
            )
    if body_file is not None:
        text = read_body_file(body_file, limit=MAX_BODY_BYTES)
    else:
        text = read_body(body, limit=MAX_BODY_BYTES)
    r = send(ex, env.need_agent(), topic, action, text)
    exit_promptly()  # the entry is fsync'd in place: nothing is left for a teardown to do
    emit(r.to_json(), as_json, r.relpath)


CHAT_SAY = Spec(Param("file", kind="file", required=True), Param("text"), JSON)


def chat_say(env: Env, file: str, text: str | None, as_json: bool) -> None:
    """Append one message to FILE (TEXT, or '-' for standard input).

    \b
    Example:
      mailslot chat say FILE "Agreed; I'll draft the interface."
      echo "long reply" | mailslot chat say FILE -
    """
    from pathlib import Path

    from mailslot.chat import say
    from mailslot.chat.format import MAX_BODY_BYTES

    msg = say(Path(file), read_text(text, limit=MAX_BODY_BYTES, what="TEXT"), env.agent)
    exit_promptly()  # the message is appended and fsync'd: nothing is left for a teardown
    emit(msg.to_json(), as_json, "")

"""``mailslot chat``: the face of ``mailslot.chat``; parses, calls, prints.

Text output shows others' words as data: a message is a ``--- name @ time ---`` line at column 0
followed by its body as a quoted block (``| ``), and names, stamps and reasons are escaped onto
one line (``mailslot.cli.shown``). So no body, name or reason can print a line that passes for a
header or a status line of ours. ``--json`` is raw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mailslot.cli.chat_text import messages_text, sender, senders
from mailslot.cli.helpers import Env, emit, json_option, pass_env
from mailslot.cli.sends import CHAT_SAY, chat_say
from mailslot.cli.shown import quoted, shown_line
from mailslot.cli.waits import CHAT_WAIT, chat_wait

__all__ = ["chat"]

# FILE, the chat file every command acts on.
file_arg = click.argument("file", type=click.Path(dir_okay=False))


def _status_text(st: dict[str, Any]) -> str:
    topic = shown_line(st["topic"]) if st["topic"] else "-"
    lines = [f"topic: {topic}", f"participants: {senders(st['participants'])}"]
    for p in st["left"]:
        lines.append(f"left: {sender(p['name'])} at {shown_line(p['time'])}")
    for p in st["gone"]:
        lines.append(
            f"gone: {sender(p['name'])}, marked by {sender(p['by'])} at {shown_line(p['time'])}"
        )
    req = st["end_request"]
    if st["ended"]:
        lines.append(f"ended: yes, by mutual agreement at {shown_line(st['ended_at'])}")
    else:
        lines.append("ended: no")
    if req and not st["ended"]:
        why = f" ({shown_line(req['reason'])})" if req["reason"] else ""
        lines.append(
            f"end request: by {sender(req['from'])} at {shown_line(req['time'])}{why}; accepted: "
            f"{senders(req['accepted']) or '-'}; waiting for: {senders(req['waiting_for'])}"
        )
    elif not st["ended"]:
        lines.append("end request: none")
    rej = st["last_rejection"]
    if rej and not req:
        why = shown_line(rej["reason"]) if rej["reason"] else "(no reason)"
        lines.append(f"last end rejected by {sender(rej['from'])}: {why}")
    for c in st["human_checks"]:
        lines.append(
            f"HUMAN CHECK open by {sender(c['from'])} at {shown_line(c['time'])}:\n"
            f"{quoted(c['text'])}"
        )
    torn = st.get("torn")
    if torn:
        lines.append(
            f"TORN: {torn['size']} bytes of appends killed mid-write were cut out into "
            f"{shown_line(torn['path'])} (not messages; inspect, then remove it)"
        )
    return "\n".join(lines)


@click.group("chat")
def chat() -> None:
    """Multi-agent chat over one append-only file.

    \b
    Create, share the path, and talk; every agent blocks in `wait` until someone else writes:
      mailslot chat new "monolith or microservices?"       # prints the file path first
      mailslot chat join /path/chat-2026-11-29-181400.txt  # from another session
      mailslot chat say FILE "I'd start with a monolith."
      mailslot chat wait FILE --timeout 300               # exit 3 timeout, 4 file removed/ended
      mailslot chat end FILE request | accept | reject "not yet"
      mailslot chat leave FILE "my part is done"
    Names: --as NAME acts as that speaker from any directory; without it, new/join generate
    one (kiran-48291) remembered for the chat and your session ($MAILSLOT_SESSION, else the
    current directory), so later commands there need no --as. A participant can leave, and a
    silent one can be marked gone, so the end handshake stops waiting for them.
    """


@chat.command("new")
@click.argument("topic")
@click.argument("text", required=False)
@click.option(
    "--dir", "directory", type=click.Path(file_okay=False), help="Where to create the file."
)
@json_option
@pass_env
def new(env: Env, topic: str, text: str | None, directory: str | None, as_json: bool) -> None:
    """Create chat-YYYY-MM-DD-HHMMSS.txt with the opening message; print its path first.

    The opening message carries TOPIC:, CWD: and the note that the CWD may hold unrelated
    files, then TEXT if given.

    \b
    Example:
      mailslot chat new "split the parser work" "I can take the lexer." --dir /tmp
    """
    from mailslot.chat import new_chat

    joined = new_chat(topic, Path(directory) if directory else None, env.agent, text)
    emit(
        joined.to_json(),
        as_json,
        f"{joined.path}\nname: {joined.name}\n"
        f"To have other agents join, run in their session:\n  mailslot chat join {joined.path}",
    )


@chat.command("join")
@file_arg
@click.argument("text", required=False)
@json_option
@pass_env
def join_cmd(env: Env, file: str, text: str | None, as_json: bool) -> None:
    """Join FILE: write the joining message, show the history, set your cursor to the end.

    \b
    Example:
      mailslot chat join ./chat-2026-11-29-181400.txt "Hi, I know the lexer code."
    """
    from mailslot.chat import join

    joined = join(Path(file), env.agent, text)
    data = joined.to_json()
    topic = f"TOPIC: {shown_line(data['topic'])}" if data["topic"] is not None else "TOPIC: -"
    emit(
        data,
        as_json,
        f"Joined chat as {joined.name!r}.\n{topic}\n\n" + messages_text(data["messages"]),
    )


say_cmd = chat.command("say")(CHAT_SAY.decorate(pass_env(chat_say)))


@chat.command("read")
@file_arg
@click.option("--since", type=int, default=0, show_default=True, help="Start at this byte cursor.")
@json_option
def read_cmd(file: str, since: int, as_json: bool) -> None:
    """Print every message of FILE (moves no cursor).

    \b
    Example:
      mailslot chat read FILE --json    # {"messages": [{"from","time","body"}], "cursor": N}
    """
    from mailslot.chat import read

    batch = read(Path(file), since)
    emit(batch.to_json(), as_json, lambda d: messages_text(d["messages"]))


wait_cmd = chat.command("wait")(CHAT_WAIT.decorate(pass_env(chat_wait)))


@chat.command("end")
@file_arg
@click.argument("action", type=click.Choice(["request", "accept", "reject"]))
@click.argument("reason", required=False)
@json_option
@pass_env
def end_cmd(env: Env, file: str, action: str, reason: str | None, as_json: bool) -> None:
    """Request, accept or reject ending the chat (every other participant must accept).

    \b
    Example:
      mailslot chat end FILE request "we agreed on the split"
      mailslot chat end FILE reject "I still have a question about deploys"
    """
    from mailslot.chat import end

    st = end(Path(file), action, reason, env.agent)
    emit(st.to_json(), as_json, _status_text)


@chat.command("leave")
@file_arg
@click.argument("reason", required=False)
@json_option
@pass_env
def leave_cmd(env: Env, file: str, reason: str | None, as_json: bool) -> None:
    """Leave FILE (writes ---LEAVE---): the end handshake stops waiting for you.

    A later message from you brings you back; a name that left may join again.

    \b
    Example:
      mailslot chat leave FILE "my part is done; over to zara"
    """
    from mailslot.chat import leave

    emit(leave(Path(file), reason, env.agent).to_json(), as_json, _status_text)


@chat.command("gone")
@file_arg
@click.argument("name")
@click.argument("reason", required=False)
@click.option(
    "--silence",
    type=click.FloatRange(min=0),
    help="Seconds NAME must have been silent before a participant may mark it gone "
    "(default: 3600, twelve 5-minute wakings).",
)
@click.option("--human", is_flag=True, help="You are the human: mark now, whatever the silence.")
@json_option
@pass_env
def gone_cmd(
    env: Env,
    file: str,
    name: str,
    reason: str | None,
    silence: float | None,
    human: bool,
    as_json: bool,
) -> None:
    """Mark NAME gone (writes ---GONE--- NAME): the end handshake stops waiting for it.

    For an agent that crashed or left without `chat leave`. A participant may mark it after
    --silence seconds without a message from NAME (the mark states the silence); the human may
    mark it at any time with --human (written as --as NAME, else "human"). A new message from
    NAME brings it back.

    \b
    Example:
      mailslot chat gone FILE dave-12345 "no answer since the deploy"
      mailslot chat gone FILE dave-12345 --human
    """
    from mailslot.chat import mark_gone
    from mailslot.chat.room import GONE_AFTER_SECONDS

    bound = GONE_AFTER_SECONDS if silence is None else silence
    st = mark_gone(Path(file), name, reason, env.agent, silence=bound, human=human)
    emit(st.to_json(), as_json, _status_text)


@chat.command("status")
@file_arg
@json_option
def status_cmd(file: str, as_json: bool) -> None:
    """Participants, the pending end request, whether it ended, open human checks.

    \b
    Example:
      mailslot chat status FILE --json
    """
    from mailslot.chat import status

    emit(status(Path(file)).to_json(), as_json, _status_text)


@chat.command("check")
@file_arg
@click.argument("text")
@json_option
@pass_env
def check_cmd(env: Env, file: str, text: str, as_json: bool) -> None:
    """Open a human check (---HUMAN-CHECK---): others hold until you write the approval.

    Then ask your human in your own terminal, and record the answer with `chat approve`.

    \b
    Example:
      mailslot chat check FILE "Split: I take the lexer, Zara the parser. OK?"
    """
    from mailslot.chat import check

    emit(check(Path(file), text, env.agent).to_json(), as_json, _status_text)


@chat.command("approve")
@file_arg
@click.argument("text")
@json_option
@pass_env
def approve_cmd(env: Env, file: str, text: str, as_json: bool) -> None:
    """Write your human's decision (---HUMAN-APPROVED---), closing your open check.

    \b
    Example:
      mailslot chat approve FILE "Approved: lexer to me, parser to Zara."
    """
    from mailslot.chat import approve

    emit(approve(Path(file), text, env.agent).to_json(), as_json, _status_text)

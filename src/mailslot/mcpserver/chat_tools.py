"""The chat's tools: new, join, say, wait, read, end, leave, gone, over one
``--chat-dir``.

Each calls the function ``mailslot chat ...`` calls (``new_chat``, ``join``, ``say``, ``wait``,
``read``, ``end``, ``leave``, ``mark_gone``) with the server's ``--as`` name. ``chat_gone`` keeps
the chat's silence bound and has no ``--human`` switch: a model is a participant, not the human.
A chat is named by its file name inside the chat directory and found with ``locate_chat``: a
name that is not there is an error listing the chats that are, and no tool can reach a file
outside the directory.

Chat names are what the ``FROM:`` line of a block says: the chat is one shared file, and anyone
who can write it can write any name. Results say so next to each message, and bodies are fenced
as untrusted data like every other channel's.

A ``chat_wait`` the host cancels leaves the agent's cursor where it was (``keep_cursor``), so a
message that lands after the host gave up is delivered by the next wait, not skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mailslot.core.errors import WaitTimeout
from mailslot.mcpserver.fence import Fence, safe
from mailslot.mcpserver.spec import Call, Reply, ToolSpec, obj, prop

__all__ = ["CHAT_WAIT_MAX_SECONDS", "chat_tools"]

# The schema's bound for a byte cursor, the channel's own (see ``mailslot.chat.room``); written
# out so building the tool list imports no channel, and pinned to it by a test.
CURSOR_MAX = 2**53 - 1

CHAT_WAIT_MAX_SECONDS = 300
CHAT_WAIT_DEFAULT_SECONDS = 30


def _path(call: Call) -> Path:
    from mailslot.chat.locate import locate_chat

    assert call.config.chat_dir is not None
    return locate_chat(call.config.chat_dir, call.args["chat"])


def _render(messages: list[dict[str, Any]], head: str) -> str:
    fence = Fence([m["body"] for m in messages] + [m["from"] for m in messages])
    out = [head, fence.rule] if messages else [head]
    for m in messages:
        out.append(
            f"at {m['time']}\nfrom (by FROM: line in the shared file, not verified): "
            f"{safe(m['from'])}\n{fence.wrap(m['body'])}"
        )
    return "\n\n".join(out)


def _status(st: Any) -> str:
    d = st.to_json()
    if d["ended"]:
        return f"ended by mutual agreement at {d['ended_at']}"
    req = d["end_request"]
    if req:
        return (
            f"end requested by {safe(req['from'])}; accepted: "
            f"{', '.join(req['accepted']) or '-'}; waiting for: {', '.join(req['waiting_for'])}"
        )
    away = [f"{p['name']} (left)" for p in d["left"]] + [f"{p['name']} (gone)" for p in d["gone"]]
    return f"open; participants: {safe(', '.join(d['present'] + away))}"


def _new(call: Call) -> Reply:
    from mailslot.chat import new_chat

    a, cfg = call.args, call.config
    j = new_chat(a["topic"], cfg.chat_dir, cfg.agent, a["text"])
    return Reply(
        f"created {j.path.name} as {j.name}; others join it with chat_join chat={j.path.name}"
    )


def _join(call: Call) -> Reply:
    from mailslot.chat import join

    path = _path(call)
    j = join(path, call.config.agent, call.args["text"])
    msgs = [m.to_json() for m in j.history]
    return Reply(_render(msgs, f"joined {path.name} as {j.name}; history: {len(msgs)} messages"))


def _say(call: Call) -> Reply:
    from mailslot.chat import say

    path = _path(call)
    m = say(path, call.args["text"], call.config.agent).to_json()
    return Reply(f"said in {path.name} at {m['time']}")


def _wait(call: Call) -> Reply:
    from mailslot.chat import wait

    path = _path(call)
    timeout = call.args["timeout"]

    def keep() -> bool:
        return not call.cancelled.is_set()

    try:
        b = wait(path, call.config.agent, timeout=timeout, keep_cursor=keep)
    except WaitTimeout:
        return Reply(f"idle: no new message in {path.name} (waited {timeout:g}s)")
    msgs = [m.to_json() for m in b.messages]
    ended = "; the chat has now ended" if b.ended else ""
    return Reply(_render(msgs, f"{len(msgs)} new in {path.name}{ended}"))


def _read(call: Call) -> Reply:
    from mailslot.chat import read

    path = _path(call)
    b = read(path, call.args["since"])
    msgs = [m.to_json() for m in b.messages]
    ended = ", ended" if b.ended else ""
    head = f"{path.name}: {len(msgs)} messages (cursor {b.cursor}{ended})"
    return Reply(_render(msgs, head))


def _end(call: Call) -> Reply:
    from mailslot.chat import end

    a = call.args
    st = end(_path(call), a["action"], a["reason"], call.config.agent)
    return Reply(_status(st))


def _leave(call: Call) -> Reply:
    from mailslot.chat import leave

    st = leave(_path(call), call.args["reason"], call.config.agent)
    return Reply(f"left; {_status(st)}")


def _gone(call: Call) -> Reply:
    from mailslot.chat import mark_gone

    a = call.args
    st = mark_gone(_path(call), a["participant"], a["reason"], call.config.agent)
    return Reply(f"marked {safe(a['participant'])} gone; {_status(st)}")


def chat_tools(chat_dir: Path, agent: str) -> list[ToolSpec]:
    """The chat tools for ``agent`` over the chats in ``chat_dir``."""
    chat = prop("string", "The chat's file name (see chat_new).", minLength=1)
    text = prop("string", "Your message.", minLength=1)
    reason = prop("string", "One line.")
    return [
        ToolSpec(
            "chat_new",
            f"Start a chat file in {chat_dir} with an opening message; others join by its name.",
            obj(["topic"], topic=prop("string", "One line naming the conversation."), text=text),
            _new,
        ),
        ToolSpec(
            "chat_join",
            f"Join a chat as {agent}: writes your joining message, returns the history.",
            obj(["chat"], chat=chat, text=text),
            _join,
        ),
        ToolSpec(
            "chat_say",
            f"Append one message to a chat as {agent}.",
            obj(["chat", "text"], chat=chat, text=text),
            _say,
        ),
        ToolSpec(
            "chat_wait",
            "Wait for others' messages after your cursor; returns them and moves the cursor. "
            "Returns 'idle: ...' when none came within timeout; an error once the chat ended.",
            obj(
                ["chat"],
                chat=chat,
                timeout=prop(
                    "number",
                    "Seconds; 0 checks once.",
                    minimum=0,
                    maximum=CHAT_WAIT_MAX_SECONDS,
                    default=CHAT_WAIT_DEFAULT_SECONDS,
                ),
            ),
            _wait,
        ),
        ToolSpec(
            "chat_read",
            "Read a chat's messages from a byte cursor (moves nothing).",
            obj(
                ["chat"],
                chat=chat,
                since=prop("integer", "Byte cursor.", minimum=0, maximum=CURSOR_MAX, default=0),
            ),
            _read,
            read_only=True,
        ),
        ToolSpec(
            "chat_end",
            "End handshake: request an end, or accept/reject the pending request.",
            obj(
                ["chat", "action"],
                chat=chat,
                action=prop("string", enum=["request", "accept", "reject"]),
                reason=reason,
            ),
            _end,
        ),
        ToolSpec(
            "chat_leave",
            "Leave a chat: the end handshake stops waiting for you.",
            obj(["chat"], chat=chat, reason=reason),
            _leave,
        ),
        ToolSpec(
            "chat_gone",
            "Mark a participant silent for 1h+ as gone: the end handshake stops waiting for it.",
            obj(
                ["chat", "participant"],
                chat=chat,
                participant=prop("string", "Its FROM name.", minLength=1),
                reason=reason,
            ),
            _gone,
        ),
    ]

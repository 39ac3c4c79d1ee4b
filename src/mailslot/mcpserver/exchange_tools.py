"""The exchange's tools: send, read, topics, state, watch, sweep.

Each calls the function ``mailslot exchange ...`` calls (``entries.send``, ``overview.read_topic``,
``overview.topic_summaries``, ``state.set_state``, ``watch.watch``, ``sweep.sweep``) and renders
the answer as short text. Descriptions are written from the live exchange (who the agent is, who
the other side is, which folder is whose), so the tool list itself teaches the layout.

``exchange_watch`` is the one place a call is split in two: the blocking part looks without
taking (``watch(peek=True)``), and only a call that was not cancelled meanwhile marks exactly
what it saw as seen (``watch.ack``, the channel's own peek-then-ack). A host that gives up on a
long wait therefore never swallows an entry the model was not shown. ``peek`` plus ``ack`` does
the same for an agent that wants to take an entry only once its work on it is done. Nothing
new within the timeout is not an error: it is a small ``idle`` result, because "nothing new"
is the common, expected answer to a check.
"""

from __future__ import annotations

from typing import Any

from mailslot.core.clock import format_time
from mailslot.core.errors import WaitTimeout
from mailslot.mcpserver.fence import Fence
from mailslot.mcpserver.spec import Call, Reply, ToolSpec, obj, prop

__all__ = ["WATCH_MAX_SECONDS", "exchange_tools"]

# Hosts time tool calls out (Codex after 60 s by default): a wait is bounded and a model loops.
WATCH_MAX_SECONDS = 300
WATCH_DEFAULT_SECONDS = 30


def _where(entry: Any, root: Any) -> str:
    rel = entry.path.relative_to(root)
    return str(rel.parts[0])


def _render_entry(entry: Any, root: Any, fence: Fence, *, archived: bool = False) -> str:
    rel = entry.path.relative_to(root)
    who = entry.side if entry.sender == entry.side else f"side {entry.side}, as {entry.sender}"
    at = format_time(entry.at) if entry.at else "?"
    lines = [
        f"{rel}" + ("  [archived before you read it]" if archived else ""),
        f"#{entry.number:04d} action: {entry.action or '?'} at {at}",
        f"from (by directory {_where(entry, root)}/): {who}",
    ]
    if entry.error:
        lines.append("unreadable, because:")
        lines.append(fence.wrap(entry.error))
    if entry.warning:  # may quote the body's claims: fenced like the body
        lines.append("warning:")
        lines.append(fence.wrap(entry.warning))
    lines.append(fence.wrap(entry.body))
    return "\n".join(lines)


def _untrusted(entries: list[Any]) -> list[str]:
    return [e.body for e in entries] + [t for e in entries for t in (e.error, e.warning) if t]


def _send(call: Call) -> Reply:
    from mailslot.exchange.entries import send

    a, cfg = call.args, call.config
    r = send(cfg.exchange, cfg.agent, a["topic"], a["action"], a["body"])
    new = f" (new topic {r.topic})" if r.new_topic else ""
    return Reply(f"sent {r.relpath}{new}")


def _read(call: Call) -> Reply:
    from mailslot.exchange.overview import read_topic

    ex = call.config.exchange
    d = read_topic(ex, call.args["topic"])
    state_errors = {s: st.error for s, st in d.states.items() if st.error}
    fence = Fence(_untrusted(d.entries) + list(d.held.values()) + list(state_errors.values()))
    states = ", ".join(f"{s}: {st.status}" for s, st in d.states.items())
    out = [f"topic {d.name} ({d.where}; {states}); {len(d.entries)} entries", fence.rule]
    for side, error in state_errors.items():
        out.append(f"{side}'s STATE.md does not read, because:\n{fence.wrap(error)}")
    for side, text in d.held.items():
        out.append(f"HELD.md in to-{side}/ (placed by the tick):\n{fence.wrap(text)}")
    out += [_render_entry(e, ex.root, fence) for e in d.entries]
    return Reply("\n\n".join(out))


def _topics(call: Call) -> Reply:
    from mailslot.exchange.overview import topic_summaries

    rows = topic_summaries(call.config.exchange, include_archived=call.args["all"])
    if not rows:
        return Reply("no topics")
    lines = []
    for t in rows:
        status = " ".join(f"{s}={t.status[s]}({t.counts[s]})" for s in t.status)
        last = format_time(t.last_activity) if t.last_activity else "-"
        where = "" if t.where == "live" else f" [{t.where}]"
        held = f" HELD for {','.join(t.held)}" if t.held else ""
        lines.append(f"{t.name} {status} last={last}{where}{held}")
    return Reply("\n".join(lines))


def _state(call: Call) -> Reply:
    from mailslot.exchange.state import set_state

    a, cfg = call.args, call.config
    r = set_state(
        cfg.exchange, cfg.agent, a["topic"], a["status"], tags=a["tags"], force=a["force"]
    )
    warn = f"\nwarning: {r.warning}" if r.warning else ""
    return Reply(f"{r.relpath}: {r.state.status}{warn}")


def _render_watch(items: list[Any], root: Any, peek: bool) -> str:
    texts = [i.text for i in items if i.text] + _untrusted([i.entry for i in items if i.entry])
    fence = Fence(texts)
    head = f"{len(items)} new" + (" (peek: nothing marked seen; ack keys to take)" if peek else "")
    out = [head, fence.rule]
    for i in items:
        key = f"\nack key: {i.key}" if peek else ""
        if i.entry is not None:
            out.append(_render_entry(i.entry, root, fence, archived=i.archived) + key)
        else:
            rel = i.path.relative_to(root)
            out.append(
                f"{rel}\nHELD: the archive waits for you to re-read {i.topic} "
                f"(placed by the tick):{key}\n{fence.wrap(i.text or '')}"
            )
    return "\n\n".join(out)


def _watch(call: Call) -> Reply:
    from mailslot.exchange.watch import ack, watch

    a, cfg = call.args, call.config
    ex = cfg.exchange
    if a["ack"]:
        n = ack(ex, cfg.agent, a["ack"])
        return Reply(f"marked {n} item(s) seen")
    try:
        r = watch(ex, cfg.agent, timeout=a["timeout"], peek=True, action=a["action"])
    except WaitTimeout:
        return Reply(f"idle: nothing new for {cfg.agent} (waited {a['timeout']:g}s)")
    warned = "".join(f"warning: {w}\n" for w in r.warnings)  # an unreadable seen-mark
    if not a["peek"]:
        if call.cancelled.is_set():
            return Reply("cancelled; nothing taken", error=True)
        taken = ack(ex, cfg.agent, [i.key for i in r.items])
        if taken < len(r.items):  # another watcher of this agent took some in between
            note = f"\n(another watcher of {cfg.agent} took {len(r.items) - taken} of these too)"
            return Reply(warned + _render_watch(r.items, ex.root, False) + note)
    return Reply(warned + _render_watch(r.items, ex.root, a["peek"]))


def _sweep(call: Call) -> Reply:
    from mailslot.exchange.sweep import sweep

    r = sweep(call.config.exchange, call.config.agent)
    warn = (
        f"\nwarning: {len(r.warnings)} STATE.md file(s) do not read (a status like 'Done'); "
        "they never archive: run mailslot exchange doctor"
        if r.warnings
        else ""
    )
    if not r.debts:
        return Reply(f"{r.agent} owes nothing{warn}")
    what = {
        "reply": "reply to",
        "close": "close (they are done)",
        "re-read": "re-read (HELD)",
        "unseen": "read (arrived after the archive, in done/)",
    }
    rows = []
    for d in r.debts:
        x = d.to_json()
        row = f"{x['topic']} {what.get(x['reason'], x['reason'])}"
        row += f" {x['entry']}" if x["entry"] else ""
        row += f" since {x['since']}" if x["since"] else ""
        row += f" ({x['detail']})" if x.get("detail") else ""
        rows.append(row)
    return Reply(f"{r.agent} owes {len(rows)}:\n" + "\n".join(rows) + warn)


def exchange_tools(ex: Any, agent: str) -> list[ToolSpec]:
    """The exchange tools for ``agent`` in ``ex``, described with its live sides and folders."""
    side = ex.side_of(agent)
    other = ex.other(side)
    topic = prop("string", "Topic: full name YYYY-MM-DD-slug, or a slug (the newest with it).")
    return [
        ToolSpec(
            "exchange_send",
            f"Send an entry to {other}: a new numbered file in to-{other}/TOPIC/. Prints its path.",
            obj(
                ["topic", "action", "body"],
                topic=prop(
                    "string",
                    "Topic: full name, or a slug (the newest live topic with that slug, "
                    "else a new YYYY-MM-DD-slug).",
                ),
                action=prop(
                    "string",
                    f"required: you need an answer or action from {other}; fyi: none needed.",
                    enum=["required", "fyi"],
                ),
                body=prop("string", "Markdown; self-contained; payloads by path.", minLength=1),
            ),
            _send,
        ),
        ToolSpec(
            "exchange_read",
            "Read a whole topic (live or archived): every entry from both sides in order, "
            "both statuses, any HELD.md.",
            obj(["topic"], topic=topic),
            _read,
            read_only=True,
        ),
        ToolSpec(
            "exchange_topics",
            "List topics: each side's status and entry count, last activity, holds.",
            obj(all=prop("boolean", "Include archived topics.", default=False)),
            _topics,
            read_only=True,
        ),
        ToolSpec(
            "exchange_state",
            f"Set YOUR side's ({side}) status for a topic (your STATE.md only). 'done' is "
            "refused while your newest entry is action required and unanswered.",
            obj(
                ["topic", "status"],
                topic=topic,
                status=prop("string", enum=["open", "in-progress", "blocked", "done"]),
                tags=prop("array", "Replace the tags.", items={"type": "string"}, maxItems=20),
                force=prop(
                    "boolean", "Mark done over your unanswered required entry.", default=False
                ),
            ),
            _state,
        ),
        ToolSpec(
            "exchange_watch",
            f"Wait until an entry from {other} (or a HELD.md) arrives in to-{side}/ that you "
            "have not seen; return it and mark it seen. Returns 'idle: ...' when nothing "
            "came within timeout.",
            obj(
                timeout=prop(
                    "number",
                    "Seconds to wait; 0 checks once.",
                    minimum=0,
                    maximum=WATCH_MAX_SECONDS,
                    default=WATCH_DEFAULT_SECONDS,
                ),
                action=prop(
                    "string",
                    "required: ignore fyi entries.",
                    enum=["any", "required"],
                    default="any",
                ),
                peek=prop("boolean", "Show without marking seen (then ack).", default=False),
                ack=prop(
                    "array",
                    "Keys from a peek to mark seen now (no wait).",
                    items={"type": "string"},
                    maxItems=100,
                ),
            ),
            _watch,
        ),
        ToolSpec(
            "exchange_sweep",
            f"List what you ({side}) owe: replies to required entries, topics {other} closed, "
            "holds to re-read.",
            obj(),
            _sweep,
            read_only=True,
        ),
    ]

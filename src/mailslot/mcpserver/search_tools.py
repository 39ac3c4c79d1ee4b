"""The ``search`` tool: one full-text search over the roots this server serves.

Served only when ``mailslot mcp --search`` asks for it (every tool costs every agent context on
each call, and most agents never search), over the exchange (``--root``), the chat directory
(``--chat-dir``) and the bus (``--bus``) the server was started with: a model chooses words,
never a directory. It calls ``mailslot.search.search``, the function ``mailslot search`` calls.
Snippets are other agents' words, so they are fenced as untrusted data like every body; who
sent each message is said by transport, as the channel names it.
"""

from __future__ import annotations

from pathlib import Path

from mailslot.defaults import SEARCH_LIMIT_MAX
from mailslot.mcpserver.config import ServerConfig
from mailslot.mcpserver.fence import Fence, safe
from mailslot.mcpserver.spec import Call, Reply, ToolSpec, obj, prop

__all__ = ["SEARCH_LIMIT_DEFAULT", "SEARCH_LIMIT_MAX", "search_roots", "search_tools"]

# Fewer hits than the CLI shows: each one lands in the model's context.
SEARCH_LIMIT_DEFAULT = 10


def search_roots(cfg: ServerConfig) -> list[Path]:
    """The roots the server serves, in a stable order: the exchange, the chats, the bus."""
    roots = [] if cfg.exchange is None else [Path(cfg.exchange.root)]
    return roots + [p for p in (cfg.chat_dir, cfg.bus) if p is not None]


def _search(call: Call) -> Reply:
    from mailslot.search import search

    a = call.args
    hits = search(search_roots(call.config), a["query"], limit=a["limit"], skip_empty=True)
    if not hits:
        return Reply("no match")
    fence = Fence([h.snippet for h in hits] + [h.thread for h in hits])
    out = [f"{len(hits)} best match{'es' if len(hits) > 1 else ''}, best first.", fence.rule]
    for h in hits:
        out.append(
            f"{h.channel} {safe(h.thread)} {safe(h.name)} at {h.at or '-'}\n"
            f"from (by transport): {safe(h.sender or '?')}\n"
            f"where: {safe(h.root)}/{safe(h.link)}\n{fence.wrap(h.snippet)}"
        )
    return Reply("\n\n".join(out))


def search_tools(cfg: ServerConfig) -> list[ToolSpec]:
    """``search`` over the roots ``cfg`` serves."""
    where = ", ".join(str(p) for p in search_roots(cfg))
    return [
        ToolSpec(
            "search",
            f"Full-text search of every message under {where}: exchange entries, chat "
            "messages, LOG.md lines, peer inbox messages; best match first. Query: words (all "
            'must appear), "a phrase", prefix*, -excluded, from:NAME, '
            "in:exchange|chat|log|peer.",
            obj(
                ["query"],
                query=prop("string", "What to look for.", minLength=1, maxLength=500),
                limit=prop(
                    "integer",
                    "The most hits to return.",
                    minimum=1,
                    maximum=SEARCH_LIMIT_MAX,
                    default=SEARCH_LIMIT_DEFAULT,
                ),
            ),
            _search,
            read_only=True,
        )
    ]

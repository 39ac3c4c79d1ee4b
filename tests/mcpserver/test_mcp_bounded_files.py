"""``chat_read`` over a file named like a chat that is far too big: a clear error, no full read."""

from __future__ import annotations

from mcphelp import Setup

from mailslot.core.fsio import READ_FROM_MAX
from mailslot.mcpserver.config import load_config
from mailslot.mcpserver.server import build_tools, dispatch


def test_chat_read_of_a_huge_file_is_refused_naming_the_limit(setup: Setup) -> None:
    cfg = load_config("claude", root=setup.root, chat_dir=setup.chats, bus=setup.bus)
    tools = {t.name: t for t in build_tools(cfg)}
    huge = setup.chats / "chat-2026-11-29-181400.txt"
    with huge.open("wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GB that cost nothing
    for since in (0, 1 << 20):
        reply = dispatch(tools, cfg, "chat_read", {"chat": huge.name, "since": since})
        assert reply.error and f"at most {READ_FROM_MAX} bytes" in reply.text, reply.text

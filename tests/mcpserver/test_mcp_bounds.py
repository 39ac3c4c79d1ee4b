"""What a tool is given is bounded and checked before it reaches a channel.

Every numeric argument has a minimum and a maximum and a value past them (or NaN, or infinity) is
a tool error naming the field, never an internal error; a chat cursor past what a chat can hold
is refused naming ``since``; a file named like a chat that is far too big is refused naming the
read limit, never read whole.
"""

from __future__ import annotations

from mcphelp import Setup, config

from mailslot.core.fsio import READ_FROM_MAX
from mailslot.mcpserver.config import load_config
from mailslot.mcpserver.server import build_tools, dispatch


def _filled(schema: dict) -> dict:
    """Valid values for a schema's required arguments (first enum value, else a short string)."""
    out = {}
    for name in schema.get("required", []):
        spec = schema["properties"][name]
        out[name] = spec["enum"][0] if "enum" in spec else "x"
    return out


def test_every_numeric_argument_is_bounded_and_checked(setup: Setup) -> None:
    cfg = config(setup)
    tools = {t.name: t for t in build_tools(cfg)}
    numeric = [
        (tool, name, spec)
        for tool in tools.values()
        for name, spec in tool.schema["properties"].items()
        if spec["type"] in ("integer", "number")
    ]
    assert {(t.name, n) for t, n, _ in numeric} >= {
        ("chat_read", "since"),
        ("chat_wait", "timeout"),
    }
    for tool, name, spec in numeric:
        assert "minimum" in spec and "maximum" in spec, (tool.name, name)
        for bad in (1e30, 10**30, -1e30, -(10**30), float("nan"), float("inf")):
            r = dispatch(tools, cfg, tool.name, {**_filled(tool.schema), name: bad})
            assert r.error and f"field '{name}'" in r.text, (tool.name, name, bad, r.text)
            assert "internal error" not in r.text


def test_a_huge_chat_cursor_is_a_tool_error_naming_since(setup: Setup) -> None:
    from mailslot.chat.room import CURSOR_MAX
    from mailslot.mcpserver import chat_tools

    assert chat_tools.CURSOR_MAX == CURSOR_MAX
    cfg = config(setup, "claude")
    tools = {t.name: t for t in build_tools(cfg)}
    name = dispatch(tools, cfg, "chat_new", {"topic": "t"}).text.split()[1]
    for since in (1e30, 10**30, CURSOR_MAX + 1):
        r = dispatch(tools, cfg, "chat_read", {"chat": name, "since": since})
        assert r.error and r.text.startswith("error: field 'since': must be at most"), r.text
    r = dispatch(tools, cfg, "chat_read", {"chat": name, "since": 0.0})  # 0.0 is an integer
    assert not r.error and "1 messages" in r.text
    r = dispatch(tools, cfg, "chat_read", {"chat": name, "since": CURSOR_MAX})
    assert r.error and r.text.startswith("error: ") and "past the end of the chat" in r.text


def test_chat_read_of_a_huge_file_is_refused_naming_the_limit(setup: Setup) -> None:
    cfg = load_config("claude", root=setup.root, chat_dir=setup.chats, bus=setup.bus)
    tools = {t.name: t for t in build_tools(cfg)}
    huge = setup.chats / "chat-2026-11-29-181400.txt"
    with huge.open("wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GB that cost nothing
    for since in (0, 1 << 20):
        reply = dispatch(tools, cfg, "chat_read", {"chat": huge.name, "since": since})
        assert reply.error and f"at most {READ_FROM_MAX} bytes" in reply.text, reply.text

"""``mailslot mcp`` and ``mailslot onboard``: agents as first-class users. Thin faces.

Both load the same checked configuration (``mcpserver.config.load_config``); ``mcp`` then hands
it to the server, ``onboard`` renders set-up text from it. The MCP SDK is imported only when the
server starts, inside ``mcpserver.server.serve``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mailslot.cli.helpers import Env, exit_promptly, pass_env, stopping_on_term
from mailslot.core.errors import MissingExtra

__all__ = ["mcp", "onboard"]

_DIR = click.Path(file_okay=False, path_type=Path)
_FILE = click.Path(dir_okay=False, path_type=Path)


def _channel_options(f: Any) -> Any:
    f = click.option(
        "--keys",
        type=_FILE,
        envvar="MAILSLOT_KEYS",
        help="Peer keys file: serve peer_send (env MAILSLOT_KEYS).",
    )(f)
    f = click.option(
        "--bus",
        type=_DIR,
        envvar="MAILSLOT_BUS",
        help="Shared-directory bus: serve log_append (env MAILSLOT_BUS).",
    )(f)
    f = click.option(
        "--chat-dir",
        type=_DIR,
        envvar="MAILSLOT_CHAT_DIR",
        help="Directory of chat files: serve chat_* (env MAILSLOT_CHAT_DIR).",
    )(f)
    return f


def _config(
    env: Env, chat_dir: Path | None, bus: Path | None, keys: Path | None, search: bool = False
) -> Any:
    from mailslot.mcpserver.config import env_waking, load_config

    return load_config(
        env.agent,
        root=env.root,
        chat_dir=chat_dir,
        bus=bus,
        keys=keys,
        waking_id=env_waking(),
        search=search,
    )


@click.command("mcp")
@_channel_options
@click.option(
    "--search",
    is_flag=True,
    help="Also serve the search tool over --root, --chat-dir and --bus.",
)
@pass_env
def mcp(env: Env, chat_dir: Path | None, bus: Path | None, keys: Path | None, search: bool) -> None:
    """Serve mailslot to an agent over MCP (stdio): one tool per channel operation.

    \b
    Who the agent is comes from --as (env MAILSLOT_AGENT), never from a tool
    argument. Each channel is served when configured: --root (env MAILSLOT_ROOT)
    an exchange (exchange_send/read/topics/state/watch/sweep), --chat-dir
    (chat_new/join/say/wait/read/end), --keys (peer_send), --bus (log_append);
    --search adds one full-text search over those roots.
    Everything is checked before the server starts; message bodies in results
    are fenced as untrusted data. Register it with your host: mailslot onboard.
    Example:
      mailslot mcp --root /srv/exchange --as olu --chat-dir /srv/chats
    """
    from mailslot.mcpserver.server import missing_sdk, serve

    absent = missing_sdk()
    if absent is not None:  # said first: no --as or --root can make this install serve
        raise MissingExtra("mailslot mcp", "mcp", absent)
    cfg = _config(env, chat_dir, bus, keys, search)
    exit_promptly()  # a thread blocked reading stdin or in a wait must not hold the exit
    with stopping_on_term():
        serve(cfg)


@click.command("onboard")
@click.argument("host", type=click.Choice(["claude-code", "codex", "hermes", "generic"]))
@_channel_options
@click.option(
    "--part",
    type=click.Choice(["all", "register", "instructions"]),
    default="all",
    show_default=True,
    help="Print only the registration or only the instruction text.",
)
@pass_env
def onboard(
    env: Env, host: str, chat_dir: Path | None, bus: Path | None, keys: Path | None, part: str
) -> None:
    """Print how to register the MCP server with HOST, and the agent's instructions.

    \b
    Generated from the live configuration, checked as `mailslot mcp` checks it:
    claude-code prints a `claude mcp add` command, codex a ~/.codex/config.toml
    block, hermes a ~/.hermes/config.yaml block, generic an mcpServers JSON
    block; then the instruction text (for an exchange, its skill file too).
    Example:
      mailslot onboard claude-code --root /srv/exchange --as olu
      mailslot onboard claude-code --root /srv/exchange --as olu --part instructions \\
          > .claude/skills/mailslot-exchange-olu/SKILL.md
    """
    from mailslot.mcpserver.onboard import onboard_text
    from mailslot.mcpserver.server import missing_sdk

    absent = missing_sdk()
    if absent is not None:  # a registration for a server that cannot start helps nobody
        raise MissingExtra("mailslot onboard", "mcp", absent)
    click.echo(onboard_text(host, _config(env, chat_dir, bus, keys), part), nl=False)

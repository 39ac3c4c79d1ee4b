"""``mailslot bridge``: exchanges and chats across hosts over NATS JetStream. Thin."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from mailslot.cli.helpers import emit, json_option, unit_dir_option, unit_written

if TYPE_CHECKING:
    from mailslot.bridge.config import BridgeConfig

__all__ = ["bridge"]

_DIR = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="MAILSLOT_BRIDGE_DIR",
    help="The bridge directory (env MAILSLOT_BRIDGE_DIR; default: the user state dir's bridge).",
)


_NATS_URL = click.option("--nats-url", help="Use this running server instead of starting one.")


def _dir(directory: Path | None) -> Path:
    from mailslot.bridge.config import default_dir

    return directory if directory is not None else default_dir()


def _config(directory: Path | None) -> BridgeConfig:
    from mailslot.bridge.config import load_config

    return load_config(_dir(directory))


def _split(value: str, metavar: str, hint: str, *, secret: bool = False) -> tuple[str, str]:
    """``KEY=VALUE`` as ``(KEY, VALUE)``; a usage error naming ``metavar`` otherwise (a secret
    value is never echoed back)."""
    key, eq, rest = value.partition("=")
    if not eq or (secret and not rest):
        shown = f"{key!r}=..." if secret else repr(value)
        raise click.BadParameter(f"expected {metavar}, got {shown}", param_hint=hint)
    return key, rest


@click.group("bridge")
def bridge() -> None:
    """Carry exchanges and chats between hosts over NATS JetStream.

    \b
    Each host keeps its own copy; each runs one bridge (and its nats-server):
      mailslot bridge init --dir /var/lib/mailslot-bridge --host laptop --peer server \\
          --leaf-remote nats-leaf://server.example:7422 \\
          --exchange /srv/exchange --side claude=laptop --side olu=server --home server
      mailslot bridge serve --dir /var/lib/mailslot-bridge
      mailslot bridge status --dir /var/lib/mailslot-bridge
    """


@bridge.command("init")
@_DIR
@click.option("--host", required=True, help="This host's name (also its JetStream domain).")
@click.option("--peer", "peers", multiple=True, help="Another host (repeat).")
@click.option("--listen", default="127.0.0.1:4222", show_default=True, help="Client HOST:PORT.")
@click.option("--leaf-listen", help="HOST:PORT where peers' leafnodes connect.")
@click.option("--leaf-advertise", help="HOST:PORT peers reach the leaf listener at.")
@click.option(
    "--leaf-remote",
    "remotes",
    multiple=True,
    help="nats-leaf://[HOST:PASSWORD@]ADDR:PORT of a peer (this host's credential there).",
)
@_NATS_URL
@click.option("--user", help="The bridge's user on this host's own server.")
@click.option("--password", help="That user's password.")
@click.option(
    "--leaf-user",
    "leaf_users",
    multiple=True,
    metavar="HOST=PASSWORD",
    help="A peer host's credential on the leaf listener (repeat; it connects as user HOST).",
)
@click.option("--tls-cert", help="Certificate for the leafnode listener (PEM).")
@click.option("--tls-key", help="Its key (PEM).")
@click.option("--tls-ca", help="CA that signs the hosts' certificates (PEM).")
@click.option(
    "--exchange",
    "root",
    type=click.Path(file_okay=False, path_type=Path),
    help="An exchange root to bridge (run 'exchange init' there on every host).",
)
@click.option("--name", help="The exchange's name on the wire (default: the root's name).")
@click.option("--side", "sides", multiple=True, metavar="SIDE=HOST", help="Who hosts a side.")
@click.option("--home", help="The host that runs the exchange's tick.")
@click.option("--chat", "chat", metavar="NAME=FILE", help="A chat file to bridge (its copy here).")
@json_option
def init_cmd(
    directory: Path | None,
    host: str,
    peers: tuple[str, ...],
    listen: str,
    leaf_listen: str | None,
    leaf_advertise: str | None,
    remotes: tuple[str, ...],
    nats_url: str | None,
    user: str | None,
    password: str | None,
    leaf_users: tuple[str, ...],
    tls_cert: str | None,
    tls_key: str | None,
    tls_ca: str | None,
    root: Path | None,
    name: str | None,
    sides: tuple[str, ...],
    home: str | None,
    chat: str | None,
    as_json: bool,
) -> None:
    """Write this host's bridge config and nats-server config.

    Run once per bridged exchange; earlier exchanges are kept.

    \b
    Example:
      mailslot bridge init --dir ./a --host a --peer b --leaf-listen 127.0.0.1:7422 \\
          --exchange ./ex-a --name ex --side claude=a --side olu=b --home a
    """
    from mailslot.bridge.config import BridgedChat, BridgedExchange, NatsSettings, init_bridge

    exchange = None
    if root is not None:
        hosts = dict(_split(pair, "SIDE=HOST", "--side") for pair in sides)
        exchange = BridgedExchange(
            name=name or root.absolute().name, root=root, hosts=hosts, home=home or host
        )
    users = [_split(pair, "HOST=PASSWORD", "--leaf-user", secret=True) for pair in leaf_users]
    settings = NatsSettings(
        leaf_users=tuple(sorted(users)),
        url=nats_url,
        listen=listen,
        leaf_listen=leaf_listen,
        leaf_advertise=leaf_advertise,
        remotes=remotes,
        user=user,
        password=password,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_ca=tls_ca,
    )
    bridged_chat = None
    if chat is not None:
        chat_name, chat_path = _split(chat, "NAME=FILE", "--chat")
        bridged_chat = BridgedChat(chat_name, Path(chat_path))
    config = init_bridge(_dir(directory), host, settings, peers, exchange, bridged_chat)
    emit(
        {
            "dir": str(config.dir),
            "host": config.host,
            "exchanges": [e.name for e in config.exchanges],
        },
        as_json,
        f"bridge for host {config.host} in {config.dir}",
    )


@bridge.command("serve")
@_DIR
@_NATS_URL
def serve_cmd(directory: Path | None, nats_url: str | None) -> None:
    """Run this host's bridge, starting and supervising its nats-server.

    \b
    Example:
      mailslot bridge serve --dir /var/lib/mailslot-bridge
    """
    import logging

    from mailslot.bridge.serve import serve

    logging.basicConfig(level=logging.INFO, format="mailslot bridge: %(levelname)s %(message)s")
    serve(_config(directory), nats_url)


@bridge.command("status")
@_DIR
@json_option
def status_cmd(directory: Path | None, as_json: bool) -> None:
    """Link up or down, and per peer the lag, pending counts, last message heard, alerts.

    \b
    Example:
      mailslot bridge status --json
    """
    from mailslot.bridge.status import read_status, render

    data = read_status(_config(directory))
    emit(data, as_json, render)


@bridge.command("doctor")
@_DIR
@json_option
def doctor_cmd(directory: Path | None, as_json: bool) -> None:
    """Check this host's bridge: server, process, links, backlogs, conflicts, refusals.

    Exits 1 when a check fails.

    \b
    Example:
      mailslot bridge doctor --dir /var/lib/mailslot-bridge
    """
    from mailslot.bridge.doctor import doctor

    findings = doctor(_config(directory))
    ok = not any(f.status == "fail" for f in findings)

    def text(_: object) -> str:
        lines = []
        for f in findings:
            lines.append(f"{f.status.upper():4} {f.check}: {f.detail}")
            if f.fix and f.status != "ok":
                lines.append(f"     fix: {f.fix}")
        return "\n".join(lines)

    emit({"ok": ok, "checks": [f.to_json() for f in findings]}, as_json, text)
    if not ok:
        raise SystemExit(1)


@bridge.command("install")
@_DIR
@click.option("--user", "user", default="mailslot", show_default=True, help="Run as this user.")
@unit_dir_option
@click.option("--dry-run", is_flag=True, help="Print the unit; write nothing.")
@json_option
def install_cmd(
    directory: Path | None, user: str, unit_dir: Path, dry_run: bool, as_json: bool
) -> None:
    """Write a hardened systemd unit that runs this host's bridge (and its nats-server).

    \b
    Example:
      mailslot bridge install --dir /var/lib/mailslot-bridge --user mailslot
      systemctl daemon-reload && systemctl enable --now mailslot-bridge-HOST.service
    """
    from mailslot.bridge.install import install_bridge

    unit = install_bridge(_config(directory), user, unit_dir, dry_run=dry_run)
    data = {"unit": unit.name, "path": str(unit.path) if unit.path else None, "text": unit.text}
    if dry_run:
        emit(data, as_json, unit.text.rstrip("\n"))
    else:
        emit(data, as_json, unit_written(unit.path, unit.name))

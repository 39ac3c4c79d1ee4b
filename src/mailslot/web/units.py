"""Hardened systemd units for ``peer serve`` and ``board serve``: each runs under its own
hardened systemd unit.

Every unit is rendered by ``core.units`` with its one hardening set. Invariants: the service runs
as a dedicated unprivileged user with no capabilities, sees the whole filesystem read-only
(``ProtectSystem=strict``) except the one directory it must write (the inbox; the database's
directory, where SQLite also keeps its -wal and -shm files), has a private /tmp and /dev, cannot
gain privileges, and may only open inet/unix sockets. The peer unit may also talk only to private
networks (``IPAddressAllow``), matching its bind guard.

The server limits (``--header-timeout``, ``--body-timeout``, ``--max-connections``) given to
``install`` go into ``ExecStart`` when they differ from the defaults, so the service runs with the
limits the operator chose and a unit with default limits stays as short as before.

Paths go into the unit verbatim, so they must be absolute and free of characters systemd would
interpret (``%`` and ``$`` are escaped; quotes, backslashes and newlines are refused).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mailslot.core.names import validate_agent
from mailslot.core.units import UNIT_DIR, hardening, service_unit, unit_arg, write_unit
from mailslot.web.bind import check_private, parse_bind
from mailslot.web.settings import ServerLimits

__all__ = ["board_unit", "install_board", "install_peer", "install_unit", "peer_unit"]


def _abs(path: Path, what: str) -> Path:
    path = Path(path).expanduser()
    if not path.is_absolute():
        path = path.absolute()
    unit_arg(path)
    return path


def _hardening(write: Path, reads: list[Path]) -> list[str]:
    # A server keeps a private /tmp whatever its paths: its data does not belong under /tmp.
    return hardening([write], reads=reads, private_tmp=True)


def _server_args(server: ServerLimits | None) -> list[str]:
    """The ``serve`` flags for the limits in ``server`` that differ from the defaults."""
    if server is None:
        return []
    default = ServerLimits()
    args = []
    if server.header_timeout != default.header_timeout:
        args += ["--header-timeout", repr(server.header_timeout)]
    if server.body_timeout != default.body_timeout:
        args += ["--body-timeout", repr(server.body_timeout)]
    if server.max_connections != default.max_connections:
        args += ["--max-connections", str(server.max_connections)]
    return args


def _unit(description: str, user: str, argv: list[str], hardening: list[str]) -> str:
    validate_agent(user, "service user")
    return service_unit(
        description,
        argv,
        hardening,
        service=[
            "Type=exec",
            f"User={user}",
            f"Group={user}",
            "Restart=on-failure",
            "RestartSec=5",
        ],
        comments=[
            "Written by mailslot. Create the user and the writable directory first:",
            f"  useradd --system --no-create-home --shell /usr/sbin/nologin {user}",
        ],
    )


def peer_unit(
    bind: str,
    peers_file: Path,
    inbox: Path,
    *,
    user: str = "mailslot",
    python: str | None = None,
    server: ServerLimits | None = None,
) -> str:
    """The unit text for ``peer serve``; ``FormatError`` for a path a unit cannot hold."""
    py = _abs(Path(python or sys.executable), "python")
    peers_file, inbox = _abs(peers_file, "peers"), _abs(inbox, "inbox")
    argv = [
        str(py),
        "-m",
        "mailslot",
        "peer",
        "serve",
        "--bind",
        bind,
        "--peers",
        str(peers_file),
        "--inbox",
        str(inbox),
        *_server_args(server),
    ]
    hardening = [
        *_hardening(inbox, [py, peers_file]),
        # The inbox talks to private networks only, like its bind guard.
        "IPAddressDeny=any",
        "IPAddressAllow=localhost 10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 100.64.0.0/10 fc00::/7",
    ]
    return _unit(f"mailslot peer inbox (POST /inbox on {bind})", user, argv, hardening)


def board_unit(
    bind: str,
    db: Path,
    *,
    user: str = "mailslot",
    python: str | None = None,
    extra: list[str] | None = None,
    server: ServerLimits | None = None,
) -> str:
    """The unit text for ``board serve``; ``FormatError`` for a path a unit cannot hold."""
    py = _abs(Path(python or sys.executable), "python")
    db = _abs(db, "db")
    argv = [
        str(py),
        "-m",
        "mailslot",
        "board",
        "serve",
        "--bind",
        bind,
        "--db",
        str(db),
        *(extra or []),
        *_server_args(server),
    ]
    return _unit(f"mailslot board (Agora) on {bind}", user, argv, _hardening(db.parent, [py, db]))


def install_unit(text: str, name: str, unit_dir: Path = UNIT_DIR) -> Path:
    """Write unit ``name`` into ``unit_dir`` (replacing an older one); ``OSError`` if denied."""
    return write_unit(text, name, unit_dir)


def install_peer(
    bind: str,
    peers_file: Path,
    inbox: Path,
    *,
    user: str = "mailslot",
    unit_dir: Path = UNIT_DIR,
    dry_run: bool = False,
    server: ServerLimits | None = None,
) -> tuple[str, Path | None]:
    """``(unit text, path written or None on a dry run)`` for the peer inbox.

    Raises ``InvalidValue`` for a public bind (the unit would never start), ``FormatError``
    for a path a unit cannot hold, ``OSError`` when the unit directory is not writable.
    """
    check_private(parse_bind(bind))
    text = peer_unit(bind, peers_file, inbox, user=user, server=server)
    return text, None if dry_run else install_unit(text, "mailslot-peer.service", unit_dir)


def install_board(
    bind: str,
    db: Path,
    *,
    user: str = "mailslot",
    unit_dir: Path = UNIT_DIR,
    dry_run: bool = False,
    trust_proxy: tuple[str, ...] = (),
    card_file: Path | None = None,
    public_url: str | None = None,
    server: ServerLimits | None = None,
) -> tuple[str, Path | None]:
    """``(unit text, path written or None on a dry run)`` for the board; errors as above."""
    parse_bind(bind)
    extra = [a for p in trust_proxy for a in ("--trust-proxy", p)]
    if card_file is not None:
        extra += ["--card", str(_abs(card_file, "card"))]
    if public_url:
        extra += ["--public-url", public_url]
    text = board_unit(bind, db, user=user, extra=extra, server=server)
    return text, None if dry_run else install_unit(text, "mailslot-board.service", unit_dir)

"""Where a server listens, and starting it there.

Invariants: the peer inbox never listens on a public address (it refuses to start if
that bind is a public IP), so ``check_private`` admits only loopback, RFC 1918, CGNAT/Tailscale
(100.64.0.0/10) and IPv6 ULA (fc00::/7), and refuses the wildcard ``0.0.0.0``/``::`` because it
includes every public interface. Host names are refused: a name can resolve differently tomorrow.

A server that cannot start is a failure with our own error (exit 1, ``mailslot: error: ...``), never
the server library's exit code: ``bind_socket`` binds the socket itself, so a busy or foreign
address raises ``ServerFailed`` before uvicorn runs, and uvicorn is then handed the already-bound
socket (no window in which another process can take the port).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import socket
from dataclasses import dataclass
from typing import Any

from mailslot.core.errors import FormatError, InvalidValue, ServerFailed
from mailslot.web.settings import ServerLimits

__all__ = [
    "PRIVATE_NETWORKS",
    "STOP_GRACE_S",
    "Bind",
    "bind_socket",
    "build_server",
    "check_private",
    "connection_bound",
    "parse_bind",
    "run_server",
]

log = logging.getLogger(__name__)

PRIVATE_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (
    ipaddress.ip_network("127.0.0.0/8"),  # loopback
    ipaddress.ip_network("10.0.0.0/8"),  # RFC 1918
    ipaddress.ip_network("172.16.0.0/12"),  # RFC 1918
    ipaddress.ip_network("192.168.0.0/16"),  # RFC 1918
    ipaddress.ip_network("100.64.0.0/10"),  # CGNAT (RFC 6598), Tailscale's addresses
    ipaddress.ip_network("::1/128"),  # loopback
    ipaddress.ip_network("fc00::/7"),  # unique local (ULA), Tailscale's IPv6
)


@dataclass(frozen=True)
class Bind:
    """A parsed ``ADDR:PORT``: an IP literal and a port (0 = any free port)."""

    host: str
    port: int

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        """The address as an ``ipaddress`` object."""
        return ipaddress.ip_address(self.host)

    def url(self, port: int | None = None) -> str:
        """``http://host:port`` (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"


def parse_bind(value: str) -> Bind:
    """Parse ``ADDR:PORT`` (``[v6]:PORT`` for IPv6; ``localhost`` = 127.0.0.1); ``FormatError``."""
    text = value.strip()
    if text.startswith("["):
        host, sep, port_s = text[1:].partition("]:")
    else:
        host, sep, port_s = text.rpartition(":")
    if not sep or not host or not port_s.isdigit():
        raise FormatError(f"expected ADDR:PORT (e.g. 127.0.0.1:8790 or [::1]:8790), got {value!r}")
    port = int(port_s)
    if port > 65535:
        raise FormatError(f"port {port} is out of range (0-65535)")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise FormatError(
            f"bind address {host!r} is not an IP address; give one literally "
            "(a host name can resolve to a public address)"
        ) from None
    return Bind(str(ip), port)


def check_private(bind: Bind) -> Bind:
    """Return ``bind`` if its address is private; ``InvalidValue`` for a public or wildcard
    one."""
    ip = bind.ip
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified:
        raise InvalidValue(
            f"refusing to listen on {bind.host}: the wildcard address includes every public "
            "interface; bind a loopback, RFC 1918, Tailscale (100.64/10) or ULA address"
        )
    if not any(ip.version == net.version and ip in net for net in PRIVATE_NETWORKS):
        raise InvalidValue(
            f"refusing to listen on {bind.host}: not a private address (allowed: loopback, "
            "10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7)"
        )
    return bind


def bind_socket(bind: Bind) -> socket.socket:
    """A listening TCP socket on ``bind``; ``ServerFailed`` when the address is busy or foreign."""
    family = socket.AF_INET6 if bind.ip.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # Same as uvicorn: lets a restarted server reuse a port in TIME_WAIT, never a live one.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this. Without it a response written in two parts waits
        # for the client's delayed ACK (~40 ms each): measured 360 req/s instead of 3,000+.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((bind.host, bind.port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise ServerFailed(f"cannot listen on {bind.host}:{bind.port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


# How long a stop (Ctrl-C, SIGTERM) lets requests in flight finish before they are dropped: a
# message is stored in milliseconds, and a client still sending its body (up to the body
# timeout) or not reading its answer must not hold the stop for as long as it likes.
STOP_GRACE_S = 5

# Open files kept free beside the connections: the listening socket, logs, the inbox's temp
# file and directory, the board's database and its WAL, the interpreter's own.
FD_RESERVE = 32


def _open_file_limit() -> int | None:
    """This process's soft limit on open files; None if unlimited or unknown.

    Read from ``/proc/self/limits`` where there is one: the installed unit's seccomp filter
    refuses the resource-limit system calls (``@resources``), and a file read is always allowed.
    """
    try:
        with open("/proc/self/limits", encoding="ascii") as f:
            for line in f:
                if line.startswith("Max open files"):
                    soft = line.split()[3]
                    return int(soft) if soft.isdigit() else None
    except OSError:
        pass
    import resource

    soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft_limit == resource.RLIM_INFINITY else soft_limit


def connection_bound(limits: ServerLimits) -> ServerLimits:
    """``limits`` with ``max_connections`` lowered, if need be, to fit the open-file limit."""
    soft = _open_file_limit()
    if soft is None or limits.max_connections <= soft - FD_RESERVE:
        return limits
    fits = max(1, soft - FD_RESERVE)
    log.warning(
        "open-file limit %d: serving at most %d connections, not %d",
        soft,
        fits,
        limits.max_connections,
    )
    return dataclasses.replace(limits, max_connections=fits)


def build_server(
    app: Any,
    limits: ServerLimits,
    *,
    log_level: str = "warning",
    graceful_s: int = STOP_GRACE_S,
) -> Any:
    """A ``uvicorn.Server`` for ``app`` whose connections ``limits`` bounds (``web.guard``)."""
    import uvicorn

    from mailslot.web.guard import guarded_protocol

    config = uvicorn.Config(
        app,
        http=guarded_protocol(connection_bound(limits)),
        log_level=log_level,
        access_log=False,
        lifespan="off",
        # Forwarded headers are the apps' business (board --trust-proxy), never uvicorn's:
        # its default believes X-Forwarded-For from 127.0.0.1, which any local client can send.
        proxy_headers=False,
        server_header=False,
        timeout_keep_alive=5,
        # A stop gives requests in flight this long, then drops them: a slow or hostile client
        # never holds the server past it (the page's live chat streams never end by themselves).
        timeout_graceful_shutdown=graceful_s,
    )
    return uvicorn.Server(config)


def run_server(
    app: Any,
    sock: socket.socket,
    limits: ServerLimits,
    *,
    log_level: str = "warning",
    graceful_s: int = STOP_GRACE_S,
) -> None:
    """Serve ``app`` on the bound ``sock`` until a signal stops it; ``ServerFailed`` on failure."""
    server = build_server(app, limits, log_level=log_level, graceful_s=graceful_s)
    try:
        server.run(sockets=[sock])
    except SystemExit as e:
        raise ServerFailed(f"the server stopped while starting (uvicorn exit {e.code})") from None
    finally:
        sock.close()
    if not server.started:
        raise ServerFailed("the server could not start (see the log above)")

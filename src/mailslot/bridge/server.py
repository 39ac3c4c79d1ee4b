"""This host's ``nats-server``: its config file, and a supervisor that keeps it running.

``bridge serve`` starts the server from ``DIR/nats.conf`` (written from ``bridge.yaml``), waits
until its client port answers, restarts it when it dies and stops it on the way out, so one
command brings a host up. JetStream runs in its own domain, named after the host: each host keeps
its own streams, and data crosses hosts only through stream sources over leafnodes (never a RAFT
group stretched across hosts, whose minority side could not write).

The config is generated, never edited by hand: ``bridge init`` rewrites it from ``bridge.yaml``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from mailslot.bridge.config import BridgeConfig
from mailslot.core.errors import FormatError, NotFound, ServerFailed
from mailslot.core.fsio import atomic_write, read_regular

__all__ = [
    "NATS_CONF",
    "NatsServer",
    "find_nats_server",
    "leaf_denied",
    "render_conf",
    "write_conf",
]

log = logging.getLogger(__name__)

NATS_CONF = "nats.conf"
# The running server's pid, so a bridge that was killed (and could not stop its server) is
# followed by one that stops the server left behind instead of finding its port taken.
NATS_PID = "nats.pid"
# Debian keeps the binary in /usr/sbin, which a user's PATH often lacks.
_EXTRA_BIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/local/bin")
# A server that is not answering on its port this long after start did not start.
START_TIMEOUT_SECONDS = 10.0
# Restarts back off from this to RESTART_MAX_SECONDS: a server that dies at once must not spin.
RESTART_MIN_SECONDS = 0.2
RESTART_MAX_SECONDS = 5.0


def find_nats_server() -> str:
    """The ``nats-server`` program; ``NotFound`` naming the package when it is missing."""
    found = shutil.which("nats-server")
    if found:
        return found
    for d in _EXTRA_BIN_DIRS:
        candidate = Path(d) / "nats-server"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    raise NotFound(
        "nats-server is not installed (Debian/Ubuntu: apt-get install nats-server); "
        "or give the URL of a running one with --nats-url"
    )


def _q(value: str) -> str:
    """A NATS config string (JSON string syntax is accepted by its parser)."""
    return json.dumps(value)


def _host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise FormatError(f"expected HOST:PORT, got {addr!r}")
    return host, int(port)


# The JetStream API calls a peer's credential may not make on this host (nor the same without
# the domain): create, change, purge or read around this host's streams, or anything account-
# or server-wide. It may create and read the consumers its own source of MS_OUT needs.
_DENIED_API = (
    "STREAM.CREATE.>",
    "STREAM.UPDATE.>",
    "STREAM.DELETE.>",
    "STREAM.PURGE.>",
    "STREAM.MSG.>",
    "STREAM.SNAPSHOT.>",
    "STREAM.RESTORE.>",
    "STREAM.PEER.>",
    "STREAM.LEADER.>",
    "CONSUMER.DELETE.>",
    "DIRECT.>",
    "META.>",
    "SERVER.>",
    "ACCOUNT.>",
)
# This host's own bridge (and any local client without a credential): never over a leafnode.
LOCAL_USER = "mailslot-local"


def leaf_denied(config: BridgeConfig) -> list[str]:
    """The subjects a peer's leafnode may not publish into this host: any mailslot subject
    (data reaches here only through this host's stream sources, so a peer cannot slip a message
    into ``MS_OUT`` as this host), the JetStream API without a domain, the API calls in
    ``_DENIED_API``, and any consumer on an ``MS_IN`` stream (what other peers sent here is
    not this peer's to read)."""
    api = f"$JS.{config.host}.API"
    denied = ["ms.>", "$JS.API.>", "$KV.>", *(f"{api}.{x}" for x in _DENIED_API)]
    from mailslot.bridge.streams import in_stream

    for peer in config.peers:
        name = in_stream(peer)
        denied += [f"{api}.CONSUMER.*.{name}", f"{api}.CONSUMER.*.{name}.>"]
        denied += [f"{api}.CONSUMER.*.*.{name}", f"{api}.CONSUMER.*.*.{name}.>"]
    return denied


def _users_with_permissions(config: BridgeConfig) -> list[str]:
    """An ``authorization`` block with one user per peer host (a host that leaks its own
    credential cannot be another), allowed over leafnodes only and denied ``leaf_denied``; and
    this host's client user, allowed over client connections only (``no_auth_user`` when the
    bridge has no credential of its own, so local clients need none and a leafnode does)."""
    n = config.nats
    denied = ", ".join(_q(s) for s in leaf_denied(config))
    local_user = n.user if n.user and n.password else LOCAL_USER
    local_pw = n.password if n.user and n.password else secrets.token_hex(24)
    lines = [
        "authorization { users: [",
        f"  {{ user: {_q(local_user)}, password: {_q(local_pw)}, "
        'allowed_connection_types: ["STANDARD"] },',
    ]
    for host, pw in n.leaf_users:
        lines.append(
            f"  {{ user: {_q(host)}, password: {_q(pw)}, allowed_connection_types: "
            f'["LEAFNODE"], permissions: {{ publish: {{ deny: [ {denied} ] }} }} }},'
        )
    lines.append("] }")
    if local_user == LOCAL_USER:
        lines.append(f"no_auth_user: {_q(LOCAL_USER)}")
    return lines


def render_conf(config: BridgeConfig) -> str:
    """The ``nats.conf`` text for this host."""
    n = config.nats
    store = (config.dir / n.store).absolute()
    host, port = _host_port(n.listen)
    lines = [
        "# Written by 'mailslot bridge init' from bridge.yaml; edits here are overwritten.",
        f"server_name: {_q('mailslot-' + config.host)}",
        f"host: {_q(host)}",
        f"port: {port}",
        f"jetstream {{ store_dir: {_q(str(store))}, domain: {_q(config.host)} }}",
    ]
    if n.leaf_listen and n.leaf_users:
        lines += _users_with_permissions(config)
    elif n.user and n.password:
        lines.append(f"authorization {{ user: {_q(n.user)}, password: {_q(n.password)} }}")
    tls = ""
    if n.tls_cert and n.tls_key:
        ca = f", ca_file: {_q(n.tls_ca)}" if n.tls_ca else ""
        tls = f"tls {{ cert_file: {_q(n.tls_cert)}, key_file: {_q(n.tls_key)}{ca} }}"
    if n.leaf_listen or n.remotes:
        lines.append("leafnodes {")
        if n.leaf_listen:
            lh, lp = _host_port(n.leaf_listen)
            lines += [f"  host: {_q(lh)}", f"  port: {lp}"]
            if n.leaf_advertise:
                # Without it the server gossips its own listen address and a peer reconnects
                # there, around any proxy or NAT in between.
                lines.append(f"  advertise: {_q(n.leaf_advertise)}")
            if tls:
                lines.append(f"  {tls}")
        if n.remotes:
            lines.append("  remotes: [")
            for url in n.remotes:
                remote_tls = ""
                if n.tls_ca:
                    remote_tls = f", tls: {{ ca_file: {_q(n.tls_ca)} }}"
                lines.append(f"    {{ url: {_q(url)}{remote_tls} }}")
            lines.append("  ]")
        lines.append("}")
    return "\n".join(lines) + "\n"


def write_conf(config: BridgeConfig) -> Path:
    """Write ``DIR/nats.conf`` (owner-only: it may hold a password)."""
    return atomic_write(config.dir / NATS_CONF, render_conf(config), mode=0o600)


def port_open(addr: str, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections at ``HOST:PORT``."""
    host, port = _host_port(addr)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class NatsServer:
    """A supervised ``nats-server`` child: ``start``, ``check`` (restarts it), ``stop``."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.conf = config.dir / NATS_CONF
        self.log_path = config.dir / "nats.log"
        self.pid_path = config.dir / NATS_PID
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._backoff = RESTART_MIN_SECONDS
        self._next_start = 0.0

    @property
    def pid(self) -> int | None:
        """The running server's pid."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def _spawn(self) -> None:
        program = find_nats_server()
        write_conf(self.config)
        out = open(self.log_path, "ab")  # noqa: SIM115  (the child keeps it)
        try:
            self.proc = subprocess.Popen(
                [program, "-c", str(self.conf)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C at the terminal reaches the bridge only
            )
        finally:
            out.close()
        atomic_write(self.pid_path, f"{self.proc.pid}\n", durable=False)

    def _left_behind(self) -> int | None:
        """The pid of a server a killed bridge left running from this very config, if any: the
        pid in ``nats.pid`` whose command line is ``nats-server -c <this nats.conf>``."""
        try:
            pid = int(read_regular(self.pid_path, 32).strip() or b"0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read(1 << 16).split(b"\0")
        except (OSError, ValueError):
            return None
        if pid > 0 and argv[1:3] == [b"-c", os.fsencode(self.conf)]:
            return pid
        return None

    def _stop_left_behind(self, timeout: float = 5.0) -> None:
        pid = self._left_behind()
        if pid is None:
            return
        log.warning("stopping nats-server %d, left running by a bridge that was killed", pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + timeout
            while self._left_behind() == pid:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            else:
                return
        # still there: start() then finds its port taken and says so

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Start the server and wait until its client port answers; ``ServerFailed`` if not."""
        listen = self.config.nats.listen
        self._stop_left_behind()
        if port_open(listen):
            raise ServerFailed(
                f"something already listens on {listen}; stop it, or use it with --nats-url"
            )
        self._spawn()
        deadline = time.monotonic() + timeout
        while not port_open(listen):
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerFailed(
                    f"nats-server exited at start (code {self.proc.returncode}); "
                    f"see {self.log_path}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ServerFailed(f"nats-server did not answer on {listen} within {timeout:g}s")
            time.sleep(0.02)

    def check(self) -> bool:
        """Restart the server if it died (with backoff); whether it is running now."""
        if self.proc is None:
            return False
        if self.proc.poll() is None:
            self._backoff = RESTART_MIN_SECONDS
            return True
        now = time.monotonic()
        if now < self._next_start:
            return False
        log.warning("nats-server exited (code %s); restarting", self.proc.returncode)
        self.restarts += 1
        self._next_start = now + self._backoff
        self._backoff = min(self._backoff * 2, RESTART_MAX_SECONDS)
        self._spawn()
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``)."""
        proc, self.proc = self.proc, None
        with contextlib.suppress(OSError):
            os.unlink(self.pid_path)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

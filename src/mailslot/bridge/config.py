"""The bridge's configuration: which host this is, its NATS server, its peers, what is bridged.

One file, ``DIR/bridge.yaml`` (plain YAML, written by ``bridge init``), describes a host. Every
host of a bridged exchange carries the same ``exchanges`` description -- which host hosts each
side, which host is home (runs the tick) -- and that description, never anything a peer sends,
decides what a peer may write here: identity comes from the transport (the stream a message
arrived through names its host) checked against this file.

Names that become NATS subject tokens (hosts, exchange names) follow the agent-name rule
``[a-z0-9][a-z0-9_-]{0,39}``: no ``.``, ``*``, ``>`` or whitespace, so no encoding is needed and
nothing a peer names can climb out of a directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from mailslot.core.errors import Conflict, FormatError, InvalidName, NotFound
from mailslot.core.formats import dump_yaml, load_yaml
from mailslot.core.fsio import atomic_write, read_regular
from mailslot.core.names import validate_agent

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_CLIENT_LISTEN",
    "BridgeConfig",
    "BridgedChat",
    "BridgedExchange",
    "NatsSettings",
    "load_config",
    "validate_host",
    "write_config",
    "write_marker",
]

CONFIG_NAME = "bridge.yaml"
DEFAULT_CLIENT_LISTEN = "127.0.0.1:4222"
# A bridge config is a few dozen lines; anything near this is not one.
MAX_CONFIG_BYTES = 256 * 1024
# The most each of this host's streams holds (what it sends, and each peer's in transit); a
# full stream refuses new messages (nothing unsent is dropped) and status says so.
DEFAULT_STREAM_MAX_BYTES = 1 << 30


class NatsSettings(NamedTuple):
    """This host's NATS server: what ``serve`` starts (or the ``url`` of one it just uses)."""

    url: str | None = None  # an existing server: the bridge starts none
    listen: str = DEFAULT_CLIENT_LISTEN
    leaf_listen: str | None = None  # host:port peers' leafnodes connect to
    leaf_advertise: str | None = None  # the address peers reach it at (behind NAT or a proxy)
    remotes: tuple[str, ...] = ()  # nats-leaf:// URLs of peers this host connects to
    store: str = "jetstream"  # the JetStream store, relative to the bridge dir
    user: str | None = None  # the bridge's credential on this host's own server (clients)
    password: str | None = None
    # per-host credentials: peer host -> the password it presents on this leafnode listener
    # (its user name is its host name); a host presents its own in its remote URLs
    leaf_users: tuple[tuple[str, str], ...] = ()
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    stream_max_bytes: int = DEFAULT_STREAM_MAX_BYTES

    def client_url(self) -> str:
        """The URL the bridge connects to."""
        return self.url or f"nats://{self.listen}"


class BridgedExchange(NamedTuple):
    """One exchange carried between hosts: its subject name, local root, who hosts what."""

    name: str
    root: Path
    hosts: dict[str, str]  # side -> host that hosts it (its agents write there)
    home: str  # the host that runs the tick

    def sides_of(self, host: str) -> tuple[str, ...]:
        """The sides ``host`` hosts."""
        return tuple(sorted(s for s, h in self.hosts.items() if h == host))


class BridgedChat(NamedTuple):
    """One chat file carried between hosts."""

    name: str
    path: Path


class BridgeConfig(NamedTuple):
    """A host's whole bridge description (``DIR/bridge.yaml``)."""

    dir: Path
    host: str
    nats: NatsSettings
    peers: tuple[str, ...]
    exchanges: tuple[BridgedExchange, ...] = ()
    chats: tuple[BridgedChat, ...] = ()

    @property
    def path(self) -> Path:
        """``DIR/bridge.yaml``."""
        return self.dir / CONFIG_NAME

    @property
    def state_dir(self) -> Path:
        """Where ``serve`` keeps its ledger and status."""
        return self.dir / "state"

    def exchange(self, name: str) -> BridgedExchange:
        """The bridged exchange called ``name``; ``NotFound``."""
        for ex in self.exchanges:
            if ex.name == name:
                return ex
        raise NotFound(f"no bridged exchange {name!r}", path=self.path)

    def chat(self, name: str) -> BridgedChat:
        """The bridged chat called ``name``; ``NotFound``."""
        for chat in self.chats:
            if chat.name == name:
                return chat
        raise NotFound(f"no bridged chat {name!r}", path=self.path)

    def to_yaml(self) -> dict[str, Any]:
        """The mapping written to ``bridge.yaml``."""
        n = self.nats
        return {
            "version": 1,
            "host": self.host,
            "nats": {
                "url": n.url,
                "listen": n.listen,
                "leaf_listen": n.leaf_listen,
                "leaf_advertise": n.leaf_advertise,
                "remotes": list(n.remotes),
                "store": n.store,
                "user": n.user,
                "password": n.password,
                "tls_cert": n.tls_cert,
                "tls_key": n.tls_key,
                "tls_ca": n.tls_ca,
                "leaf_users": dict(n.leaf_users),
                "stream_max_bytes": n.stream_max_bytes,
            },
            "peers": list(self.peers),
            "exchanges": [
                {
                    "name": ex.name,
                    "root": str(ex.root),
                    "hosts": dict(sorted(ex.hosts.items())),
                    "home": ex.home,
                }
                for ex in self.exchanges
            ],
            "chats": [{"name": c.name, "path": str(c.path)} for c in self.chats],
        }


def validate_host(name: str, kind: str = "host name") -> str:
    """``name`` if it may be a host (a NATS subject token and a JetStream domain)."""
    return validate_agent(name, kind)


def _opt_str(data: dict[str, Any], key: str, path: Path) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise FormatError("expected a string", path=path, field=key)
    return value


def _nats(data: Any, path: Path) -> NatsSettings:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FormatError("expected a mapping", path=path, field="nats")
    remotes = data.get("remotes") or []
    if not isinstance(remotes, list) or not all(isinstance(r, str) for r in remotes):
        raise FormatError("expected a list of nats-leaf:// URLs", path=path, field="remotes")
    users = data.get("leaf_users") or {}
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise FormatError("expected HOST: PASSWORD", path=path, field="leaf_users")
    try:
        leaf_users = tuple(sorted((validate_host(str(k)), v) for k, v in users.items()))
    except InvalidName as e:
        raise FormatError(str(e), path=path, field="leaf_users") from None
    max_bytes = data.get("stream_max_bytes", DEFAULT_STREAM_MAX_BYTES)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 4096:
        raise FormatError("expected a byte count >= 4096", path=path, field="stream_max_bytes")
    return NatsSettings(
        stream_max_bytes=max_bytes,
        leaf_users=leaf_users,
        url=_opt_str(data, "url", path),
        listen=_opt_str(data, "listen", path) or DEFAULT_CLIENT_LISTEN,
        leaf_listen=_opt_str(data, "leaf_listen", path),
        leaf_advertise=_opt_str(data, "leaf_advertise", path),
        remotes=tuple(remotes),
        store=_opt_str(data, "store", path) or "jetstream",
        user=_opt_str(data, "user", path),
        password=_opt_str(data, "password", path),
        tls_cert=_opt_str(data, "tls_cert", path),
        tls_key=_opt_str(data, "tls_key", path),
        tls_ca=_opt_str(data, "tls_ca", path),
    )


def _exchange(item: Any, path: Path, hosts: set[str]) -> BridgedExchange:
    if not isinstance(item, dict):
        raise FormatError("each exchange is a mapping", path=path, field="exchanges")
    try:
        name = validate_host(str(item.get("name")), "exchange name")
        raw_hosts = item.get("hosts")
        if not isinstance(raw_hosts, dict) or len(raw_hosts) != 2:
            raise FormatError("expected SIDE: HOST for both sides", path=path, field="hosts")
        side_hosts = {
            validate_agent(str(s), "side"): validate_host(str(h)) for s, h in raw_hosts.items()
        }
        home = validate_host(str(item.get("home")), "home host")
    except InvalidName as e:
        raise FormatError(str(e), path=path, field="exchanges") from None
    unknown = (set(side_hosts.values()) | {home}) - hosts
    if unknown:
        raise FormatError(
            f"exchange {name!r} names hosts that are neither this host nor a peer: "
            + ", ".join(sorted(unknown)),
            path=path,
            field="exchanges",
        )
    root = item.get("root")
    if not isinstance(root, str) or not root:
        raise FormatError("expected the exchange's root directory", path=path, field="root")
    return BridgedExchange(name=name, root=Path(root), hosts=side_hosts, home=home)


def load_config(directory: Path) -> BridgeConfig:
    """Read ``DIR/bridge.yaml``; ``NotFound`` when there is none, ``FormatError`` when bad."""
    directory = Path(directory).absolute()
    path = directory / CONFIG_NAME
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise NotFound(
            "no bridge here; run 'mailslot bridge init DIR --host NAME ...' first", path=path
        ) from None
    data = load_yaml(raw, path=path)
    try:
        host = validate_host(str(data.get("host")))
        peers = tuple(validate_host(str(p), "peer host") for p in data.get("peers") or [])
    except InvalidName as e:
        raise FormatError(str(e), path=path, field="host") from None
    if host in peers:
        raise FormatError("a host is not its own peer", path=path, field="peers")
    known = {host, *peers}
    exchanges = tuple(_exchange(item, path, known) for item in data.get("exchanges") or [])
    if len({ex.name for ex in exchanges}) != len(exchanges):
        raise FormatError("two exchanges share a name", path=path, field="exchanges")
    chats = []
    for item in data.get("chats") or []:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            raise FormatError("each chat is {name, path}", path=path, field="chats")
        try:
            name = validate_host(str(item.get("name")), "chat name")
        except InvalidName as e:
            raise FormatError(str(e), path=path, field="chats") from None
        chats.append(BridgedChat(name=name, path=Path(item["path"])))
    if {c.name for c in chats} & {ex.name for ex in exchanges} or len(
        {c.name for c in chats}
    ) != len(chats):
        raise FormatError("exchanges and chats need names of their own", path=path, field="chats")
    return BridgeConfig(
        dir=directory,
        host=host,
        nats=_nats(data.get("nats"), path),
        peers=peers,
        exchanges=exchanges,
        chats=tuple(chats),
    )


def write_config(config: BridgeConfig) -> Path:
    """Write ``bridge.yaml`` atomically, readable by its owner only (it may hold a password)."""
    config.dir.mkdir(parents=True, exist_ok=True)
    return atomic_write(config.path, dump_yaml(config.to_yaml()), mode=0o600)


def write_marker(ex: BridgedExchange, host: str) -> Path:
    """Record in the exchange's ``.mailslot/`` that it is bridged: this host, the home host
    (the only one whose tick runs) and who hosts each side (``exchange.arrivals.bridged``).

    ``Conflict`` when the root is no exchange (run ``exchange init`` there first).
    """
    meta = ex.root / ".mailslot"
    if not (meta / "config").is_file():
        raise Conflict(
            "not an exchange; run 'mailslot exchange init' there first (on every host, "
            "with the same sides)",
            path=ex.root,
        )
    from mailslot.exchange.arrivals import MARKER_NAME

    text = dump_yaml({"host": host, "home": ex.home, "name": ex.name, "hosts": ex.hosts})
    return atomic_write(meta / MARKER_NAME, text, mode=0o644)


def peer_of_remote(url: str) -> str:
    """A remote URL with any password removed, for showing."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"


def default_dir() -> Path:
    """``$MAILSLOT_BRIDGE_DIR`` or the user's state dir's ``bridge``."""
    from mailslot.core.cursor import state_dir

    env = os.environ.get("MAILSLOT_BRIDGE_DIR")
    return Path(env) if env else state_dir() / "bridge"


def init_bridge(
    directory: Path,
    host: str,
    nats: NatsSettings,
    peers: tuple[str, ...],
    exchange: BridgedExchange | None = None,
    chat: BridgedChat | None = None,
) -> BridgeConfig:
    """Write (or rewrite) ``DIR/bridge.yaml`` and ``nats.conf``, and mark a bridged exchange.

    An existing config keeps its other exchanges and chats, so running init once per exchange
    builds up a host. ``InvalidName`` for a bad host or peer name, ``FormatError`` for an
    exchange that names unknown hosts, ``Conflict`` for a root that is no exchange.
    """
    from mailslot.bridge.server import write_conf

    directory = Path(directory).absolute()
    validate_host(host)
    for p in peers:
        validate_host(p, "peer host")
    if host in peers:
        raise Conflict(f"{host!r} is this host; a peer is another host")
    exchanges: list[BridgedExchange] = []
    chats: list[BridgedChat] = []
    if (directory / CONFIG_NAME).exists():
        old = load_config(directory)
        exchanges = [e for e in old.exchanges if exchange is None or e.name != exchange.name]
        chats = [c for c in old.chats if chat is None or c.name != chat.name]
    if exchange is not None:
        exchange = exchange._replace(root=exchange.root.absolute())
        exchanges.append(exchange)
    if chat is not None:
        validate_host(chat.name, "chat name")
        chats.append(chat._replace(path=chat.path.absolute()))
    config = BridgeConfig(directory, host, nats, tuple(peers), tuple(exchanges), tuple(chats))
    write_config(config)
    config = load_config(directory)  # the same checks a later serve makes, now
    write_conf(config)
    if exchange is not None:
        write_marker(config.exchange(exchange.name), host)
    return config

"""The discovery card: ``/.well-known/agent-card.json`` (A2A v1.0), alias ``agent.json``.

The manifest lists the fleet, the known peers (by manifest URL), the endpoint addresses,
and the protocols spoken, and states the policy that inbound content is data,
moderated on a schedule, never executed. The card is generated from a small YAML config (and the
peers file's names and addresses: never its hashes), so it cannot drift from what is served.

A2A v1.0 shape: ``name, description, version, supportedInterfaces[{url, protocolBinding,
protocolVersion}], capabilities, defaultInputModes, defaultOutputModes, skills``. mailslot's
endpoints are not A2A JSON-RPC endpoints, so their bindings are named for what they are
(``MAILSLOT-AGORA``, ``MAILSLOT-PEER-INBOX``; A2A allows custom bindings) and the mailslot
specifics (fleet, peers, endpoints, protocols, policy) travel in one capability extension and,
identical, at the top level of the card, where a client that knows only the manifest's own keys
(``jq .fleet``) finds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailslot import __version__
from mailslot.core.errors import FormatError
from mailslot.core.formats import load_yaml
from mailslot.core.names import validate_agent
from mailslot.web.auth import PeerEntry, load_peers

__all__ = [
    "POLICY",
    "CardConfig",
    "KnownPeer",
    "build_card",
    "card_from_files",
    "load_card_config",
]

POLICY = (
    "Inbound content on every channel (board posts, peer messages, dropped files) is data: "
    "stored verbatim, shown escaped, moderated on a schedule, never executed or obeyed."
)
EXTENSION_URI = "urn:mailslot:messaging:v1"
PROTOCOL_VERSION = "1.0"


@dataclass(frozen=True)
class KnownPeer:
    """A peer by name and the URL of its manifest (or inbox)."""

    name: str
    url: str | None


@dataclass(frozen=True)
class CardConfig:
    """What the operator says about this box; every field has a default."""

    name: str = "mailslot"
    description: str = "Durable, pull-based messaging for AI agents."
    version: str = __version__
    fleet: tuple[str, ...] = ()
    peers: tuple[KnownPeer, ...] = ()
    # The private peer inbox to advertise (e.g. a Tailscale address); None: not advertised.
    peer_inbox: str | None = None
    documentation_url: str | None = None
    provider: dict[str, str] = field(default_factory=dict)
    policy: str = POLICY


_KEYS = {
    "name",
    "description",
    "version",
    "fleet",
    "peers",
    "peer_inbox",
    "documentation_url",
    "provider",
    "policy",
}


def _str(doc: dict[str, Any], key: str, path: Path) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise FormatError("must be a string", path=path, field=key)
    return value


def load_card_config(path: Path) -> CardConfig:
    """Read the card config (YAML); ``FormatError`` naming the field that is wrong."""
    doc = load_yaml(path.read_text(encoding="utf-8"), path=path)
    unknown = set(doc) - _KEYS
    if unknown:
        raise FormatError(f"unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}", path=path)
    fleet = doc.get("fleet") or []
    if not isinstance(fleet, list) or not all(isinstance(a, str) for a in fleet):
        raise FormatError("must be a list of agent names", path=path, field="fleet")
    for agent in fleet:
        validate_agent(agent)
    peers: list[KnownPeer] = []
    for item in doc.get("peers") or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise FormatError("each peer needs a name (and a url)", path=path, field="peers")
        url = item.get("url")
        if url is not None and not isinstance(url, str):
            raise FormatError("a peer's url must be a string", path=path, field="peers")
        peers.append(KnownPeer(validate_agent(item["name"], "peer name"), url))
    provider = doc.get("provider") or {}
    if not isinstance(provider, dict):
        raise FormatError("must be a mapping {organization, url}", path=path, field="provider")
    defaults = CardConfig()
    return CardConfig(
        name=_str(doc, "name", path) or defaults.name,
        description=_str(doc, "description", path) or defaults.description,
        version=str(doc.get("version") or defaults.version),
        fleet=tuple(fleet),
        peers=tuple(peers),
        peer_inbox=_str(doc, "peer_inbox", path),
        documentation_url=_str(doc, "documentation_url", path),
        provider={str(k): str(v) for k, v in provider.items()},
        policy=_str(doc, "policy", path) or defaults.policy,
    )


def build_card(
    config: CardConfig, base_url: str, known: dict[str, PeerEntry] | None = None
) -> dict[str, Any]:
    """The A2A v1.0 card for this box, served at ``base_url``."""
    base = base_url.rstrip("/")
    peers = {p.name: p.url for p in config.peers}
    for name, entry in (known or {}).items():
        peers.setdefault(name, entry.address)
    agora = f"{base}/api/agora"
    interfaces = [
        {"url": agora, "protocolBinding": "MAILSLOT-AGORA", "protocolVersion": PROTOCOL_VERSION}
    ]
    endpoints: dict[str, str] = {"agora": agora, "page": f"{base}/"}
    protocols = ["mailslot-agora/1 (HTTP+JSON, public, rate-limited)"]
    skills: list[dict[str, Any]] = [
        {
            "id": "agora-read",
            "name": "Read the Agora",
            "description": "GET /api/agora returns the 50 newest posts "
            "[{id, agent, message, link, posted_at}], newest first.",
            "tags": ["board", "discovery", "read"],
            "examples": [f"GET {agora}"],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
        },
        {
            "id": "agora-post",
            "name": "Post to the Agora",
            "description": 'POST /api/agora {"agent": 2-40 chars, "message": 1-1200 chars, '
            '"link"?: http(s) URL}; body at most 8 KB; one post per 20 s and 30 per day per '
            "source. Public and world-readable; " + config.policy,
            "tags": ["board", "messaging", "post"],
            "examples": ['{"agent": "tidal", "message": "new guide draft, please review"}'],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
        },
    ]
    if config.peer_inbox:
        interfaces.append(
            {
                "url": config.peer_inbox,
                "protocolBinding": "MAILSLOT-PEER-INBOX",
                "protocolVersion": PROTOCOL_VERSION,
            }
        )
        endpoints["peer_inbox"] = config.peer_inbox
        protocols.append("mailslot-peer-inbox/1 (HTTP+JSON, bearer token, private network)")
        skills.append(
            {
                "id": "peer-inbox",
                "name": "Private peer inbox",
                "description": 'POST /inbox {"subject"?, "body"} with Authorization: Bearer '
                "<token issued to you>; private network only; 32 KB cap; 30 per hour. "
                "The sender is the token's peer. " + config.policy,
                "tags": ["peer", "messaging", "private"],
                "examples": ['{"subject": "review", "body": "draft in outbox/, please review"}'],
                "inputModes": ["application/json"],
                "outputModes": ["application/json"],
            }
        )
    messaging = {
        "fleet": list(config.fleet),
        "peers": [{"name": n, "manifest": u} for n, u in sorted(peers.items())],
        "endpoints": endpoints,
        "protocols": protocols,
        "policy": config.policy,
    }
    card: dict[str, Any] = {
        "name": config.name,
        "description": f"{config.description} Policy: {config.policy}",
        "version": config.version,
        "supportedInterfaces": interfaces,
        "capabilities": {
            "streaming": False,
            "pushNotifications": False,
            "extendedAgentCard": False,
            "extensions": [
                {
                    "uri": EXTENSION_URI,
                    "description": "mailslot messaging: fleet, known peers, endpoints, "
                    "protocols and the inbound-content policy.",
                    "required": False,
                    "params": messaging,
                }
            ],
        },
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": skills,
        # The same manifest keys at the top level too, where a plain client looks for them
        # (``curl .../.well-known/agent.json | jq .fleet``); A2A clients ignore unknown keys.
        **messaging,
    }
    if config.documentation_url:
        card["documentationUrl"] = config.documentation_url
    if config.provider:
        card["provider"] = config.provider
    return card


def card_from_files(
    card_file: Path | None, peers_file: Path | None, base_url: str
) -> dict[str, Any]:
    """The card built from a config file and a peers file (either optional); ``FormatError``."""
    config = load_card_config(card_file) if card_file is not None else CardConfig()
    known = load_peers(peers_file) if peers_file is not None else None
    return build_card(config, base_url, known)

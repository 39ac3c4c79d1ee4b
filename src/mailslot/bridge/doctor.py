"""``bridge doctor``: is this host's bridge doing its job? Silence is not success.

Each check says ``ok``, ``warn`` or ``fail`` with what was found and how to fix it: the server
program, the bridge process (its status file fresh), every peer's link and how much waits each
way, conflicts and refused messages (a hostile or misconfigured peer), and every bridged
exchange's marker and chat file.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from mailslot.bridge.config import BridgeConfig
from mailslot.bridge.status import read_status
from mailslot.core.errors import MailslotError

__all__ = ["Finding", "doctor"]

# More than this many messages waiting for a peer whose link is up is worth a look.
PENDING_WARN = 1000
# A stream fuller than this is worth a look before it refuses messages.
STREAM_WARN_FRACTION = 0.8


class Finding(NamedTuple):
    """One check's verdict."""

    check: str
    status: str  # ok | warn | fail
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"check", "status", "detail", "fix"}``."""
        return self._asdict()


def _server(config: BridgeConfig) -> Finding:
    if config.nats.url:
        return Finding("server", "ok", f"uses the running server at {config.nats.url}")
    from mailslot.bridge.server import find_nats_server

    try:
        return Finding("server", "ok", f"nats-server at {find_nats_server()}")
    except MailslotError as e:
        return Finding("server", "fail", str(e), "apt-get install nats-server")


def _peers(config: BridgeConfig, status: dict[str, Any]) -> list[Finding]:
    out = []
    peers = status.get("peers") or {}
    for peer in config.peers:
        info = peers.get(peer) or {}
        link = info.get("link", "unknown")
        pin, pout = info.get("pending_in"), info.get("pending_out")
        detail = (
            f"link {link}, pending in {pin}, pending out {pout}, "
            f"last heard {info.get('last_heard') or 'never'}"
        )
        if link != "up":
            out.append(Finding(f"peer:{peer}", "warn", detail, "check the leafnode link"))
        elif max(int(pin or 0), int(pout or 0)) > PENDING_WARN:
            out.append(Finding(f"peer:{peer}", "warn", detail, "a backlog: is a bridge stuck?"))
        else:
            out.append(Finding(f"peer:{peer}", "ok", detail))
    return out


def _streams(status: dict[str, Any]) -> list[Finding]:
    out = []
    for name, info in sorted((status.get("streams") or {}).items()):
        if "error" in info:
            out.append(Finding(f"stream:{name}", "warn", f"unreadable: {info['error']}"))
            continue
        used, limit = int(info.get("bytes") or 0), int(info.get("max_bytes") or -1)
        detail = f"{info.get('messages')} messages, {used} of {limit} bytes"
        if info.get("full"):
            since = info.get("full_since")
            out.append(
                Finding(
                    f"stream:{name}",
                    "fail",
                    "full: it refuses new messages (none dropped)"
                    + (f" since {since}" if since else "")
                    + f"; {detail}",
                    "raise nats.stream_max_bytes in bridge.yaml, or bring the peer back so "
                    "what it holds drains",
                )
            )
        elif limit > 0 and used > limit * STREAM_WARN_FRACTION:
            out.append(Finding(f"stream:{name}", "warn", detail, "nearly full"))
        else:
            out.append(Finding(f"stream:{name}", "ok", detail))
    return out


def _permissions(config: BridgeConfig) -> Finding:
    n = config.nats
    if n.url:
        return Finding(
            "permissions",
            "warn",
            f"uses the running server at {n.url}: its leafnode permissions are its own",
            "deny each peer's leafnode user the subjects 'mailslot bridge init' would "
            "(ms.>, stream changes, consumers on MS_IN_*)",
        )
    if n.leaf_listen and n.leaf_users:
        from mailslot.bridge.server import leaf_denied

        peers = ", ".join(h for h, _ in n.leaf_users)
        return Finding(
            "permissions",
            "ok",
            f"leafnode credentials ({peers}) may not publish mailslot subjects, change this "
            f"host's streams or read MS_IN_* ({len(leaf_denied(config))} subjects denied)",
        )
    if n.leaf_listen:
        return Finding(
            "permissions",
            "warn",
            f"any host that reaches {n.leaf_listen} joins without a credential and without "
            "permissions (the receiving bridge still checks every message's origin)",
            "mailslot bridge init --leaf-user HOST=PASSWORD for each peer",
        )
    return Finding(
        "permissions",
        "ok",
        "this host only connects out; the host it connects to restricts its credential",
    )


def doctor(config: BridgeConfig) -> list[Finding]:
    """Every check for this host's bridge, in order."""
    from mailslot.exchange.arrivals import bridged

    findings = [_server(config), _permissions(config)]
    status = read_status(config)
    if status.get("running"):
        findings.append(Finding("bridge", "ok", f"running (pid {status.get('pid')}), status fresh"))
        findings += _peers(config, status)
        findings += _streams(status)
        err = status.get("write_error")
        if err:
            findings.append(
                Finding(
                    "writes",
                    "fail",
                    f"cannot write what {err.get('peer')} sent since {err.get('since')}: "
                    f"{err.get('reason')} (it waits in the stream, retried)",
                    "make room on the disk of the bridged exchange or chat",
                )
            )
    else:
        age = status.get("age_seconds")
        findings.append(
            Finding(
                "bridge",
                "fail",
                "not running" + (f" (last status {age:.0f}s ago)" if age is not None else ""),
                f"mailslot bridge serve --dir {config.dir}",
            )
        )
    for kind in ("conflicts", "refused"):
        n = int(status.get(kind, 0) or 0)
        if n:
            recent = (status.get(f"recent_{kind}") or [{}])[-1]
            findings.append(
                Finding(
                    kind,
                    "warn",
                    f"{n} so far; latest: {recent.get('path') or recent.get('reason') or '?'}",
                    "a conflict is kept beside the file as .conflict: settle it by hand"
                    if kind == "conflicts"
                    else "a peer sent what it does not host: check its config",
                )
            )
    for d in status.get("diverged") or []:
        findings.append(
            Finding(
                f"sent:{d.get('exchange')}:{d.get('path')}",
                "fail",
                f"{d.get('path')} changed here after it was published (since {d.get('at')}): "
                f"the peers keep the published version (sha256 {d.get('published')})",
                "put the published bytes back (copy the file from a peer's copy), then say "
                "anything new in a new entry",
            )
        )
    for ex in config.exchanges:
        try:
            mark = bridged(ex.root / ".mailslot")
        except MailslotError as e:
            mark, why = None, str(e)
        else:
            why = "no bridge marker (run 'mailslot bridge init' again)"
        if mark is None or mark.host != config.host or mark.home != ex.home:
            findings.append(Finding(f"exchange:{ex.name}", "fail", why, "mailslot bridge init"))
        else:
            role = "runs the tick here" if mark.is_home else f"tick runs on {ex.home}"
            findings.append(Finding(f"exchange:{ex.name}", "ok", f"{ex.root}, {role}"))
    for chat in config.chats:
        if chat.path.is_file():
            findings.append(Finding(f"chat:{chat.name}", "ok", str(chat.path)))
        else:
            findings.append(Finding(f"chat:{chat.name}", "warn", f"{chat.path} is not there yet"))
    return findings

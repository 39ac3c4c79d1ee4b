"""Fixtures for the web channel: real uvicorn servers on 127.0.0.1 (a free port each), peers
files with issued tokens, and apps built from settings."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mailslot.web.auth import new_token
from mailslot.web.settings import BoardSettings, PeerSettings, ServerLimits
from shared_helpers import loopback_server


def serve_app(app: Any, limits: ServerLimits | None = None) -> AbstractContextManager[str]:
    """Run ``app`` on 127.0.0.1:<free port> as the serve commands build it (with ``limits``):
    ``with serve_app(app) as url``."""
    return loopback_server(lambda _port: app, limits or ServerLimits())


@dataclass
class PeerSetup:
    """A peers file with two peers (tidal, reef), their tokens, and an inbox."""

    root: Path
    peers_file: Path
    inbox: Path
    tokens: dict[str, str]

    def settings(self, **kw: Any) -> PeerSettings:
        return PeerSettings(self.peers_file, self.inbox, **kw)

    def stored(self) -> list[Path]:
        if not self.inbox.exists():
            return []
        return sorted(p for p in self.inbox.iterdir() if p.is_file())


@pytest.fixture
def peer_setup(tmp_path: Path) -> PeerSetup:
    peers = tmp_path / "peer" / "peers.json"
    tokens = {name: new_token(peers, name) for name in ("tidal", "reef")}
    return PeerSetup(tmp_path, peers, tmp_path / "peer" / "inbox", tokens)


@pytest.fixture
def peer_server(peer_setup: PeerSetup) -> Callable[..., Any]:
    """Start the peer app with optional settings overrides: ``with peer_server(**kw) as url``."""
    from mailslot.web.peerapp import create_app

    def start(**kw: Any) -> Any:
        settings = peer_setup.settings(**kw)
        return serve_app(create_app(settings), settings.server)

    return start


@pytest.fixture
def board_server(tmp_path: Path) -> Callable[..., Any]:
    """Start the board app: ``with board_server(**kw) as url``; db at tmp/board/agora.db."""
    from mailslot.web.boardapp import create_app

    def start(**kw: Any) -> Any:
        kw.setdefault("db", tmp_path / "board" / "agora.db")
        settings = BoardSettings(**kw)
        return serve_app(create_app(settings), settings.server)

    return start


@pytest.fixture
def serve() -> Callable[[Any], Any]:
    """``with serve(app) as url``: any ASGI app on a real loopback server."""
    return serve_app

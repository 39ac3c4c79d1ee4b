"""``bridge serve``: bring a host up -- its nats-server (unless given a URL) and the bridge.

The server is a child of the bridge: started before, checked every ``SUPERVISE_SECONDS`` and
restarted when it died, stopped after. SIGTERM and Ctrl-C stop both cleanly; after Ctrl-C
``serve`` raises ``KeyboardInterrupt`` once both are down, so the command exits 130 like any
other interrupted server, while SIGTERM (a service manager's stop) returns normally.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from mailslot.bridge.config import BridgeConfig
from mailslot.bridge.run import Bridge
from mailslot.bridge.server import NatsServer

__all__ = ["serve"]

log = logging.getLogger(__name__)

SUPERVISE_SECONDS = 0.5


async def _supervise(server: NatsServer, info: dict[str, Any]) -> None:
    while True:
        await asyncio.sleep(SUPERVISE_SECONDS)
        await asyncio.to_thread(server.check)
        info["server_pid"] = server.pid
        info["server_restarts"] = server.restarts


async def _main(config: BridgeConfig, url: str | None, server: NatsServer | None) -> list[int]:
    """Run until a signal; returns the signals that stopped it."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    got: list[int] = []

    def stopped(sig: int) -> None:
        got.append(sig)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped, sig)
    info: dict[str, Any] = {"server_pid": server.pid if server else None, "server_restarts": 0}
    supervisor = asyncio.create_task(_supervise(server, info)) if server else None
    try:
        await Bridge(config, url).run(stop, info)
    finally:
        if supervisor is not None:
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
    return got


def serve(config: BridgeConfig, url: str | None = None) -> None:
    """Run this host's bridge until SIGTERM (returns) or Ctrl-C (raises ``KeyboardInterrupt``
    once the server is stopped); with ``url`` (or ``nats.url`` in the config) use that server
    instead of starting one. ``NotFound`` when nats-server is missing, ``MailslotError`` when it
    does not start."""
    url = url or config.nats.url
    server = None if url else NatsServer(config)
    if server is not None:
        server.start()
    try:
        got = asyncio.run(_main(config, url, server))
    finally:
        if server is not None:
            server.stop()
    if got[:1] == [signal.SIGINT]:
        raise KeyboardInterrupt

"""This host's JetStream streams, and the connection the bridge reaches them over.

Streams on this host's JetStream (its own domain, named after the host)::

    MS_OUT_<host>    subjects ms.<host>.>   one message per subject, a second one refused
    MS_IN_<peer>     no subjects; sources MS_OUT_<peer> through $JS.<peer>.API

Retention never drops what a peer has not received: both streams are bounded in bytes
(``stream_max_bytes``) with the discard policy ``new``, so a full stream refuses what comes
next (the publish is retried, ``status`` and ``doctor`` say the stream is full) and a full
``MS_IN`` holds its source back. Neither is trimmed by the bridge: a purge of ``MS_OUT`` on
2.9.10 makes a peer's source skip messages when it resumes after a partition (measured), and
``MS_IN`` must keep its newest sourced message, from which a restarted server finds where its
source resumes (an emptied work queue falls back to resuming by time, which clock skew between
hosts turns into a loss).

Sources are store-and-forward: a host cut off from its peers keeps publishing into its own
``MS_OUT`` and a peer's ``MS_IN`` catches up when the link heals, in order per origin.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mailslot.bridge.config import BridgeConfig

__all__ = ["CONSUMER", "connect", "ensure_streams", "in_stream", "out_stream"]

log = logging.getLogger(__name__)

CONSUMER = "mailslot-bridge"
# A message not acknowledged within this is redelivered: what a bridge killed mid-batch had
# fetched reaches its successor this long after. A redelivery to a bridge still writing it is
# harmless (materialising is idempotent), so short beats long.
ACK_WAIT_SECONDS = 5.0
# The retry pause after the local server failed a publish or a fetch.
RETRY_SECONDS = 0.5
# How long entries wait in a stream: far beyond any partition worth riding out.
STREAM_MAX_AGE_SECONDS = 365 * 24 * 3600


def out_stream(host: str) -> str:
    """The stream of what ``host``'s sides wrote."""
    return f"MS_OUT_{host}"


def in_stream(peer: str) -> str:
    """The stream on this host that sources ``peer``'s out stream."""
    return f"MS_IN_{peer}"


async def connect(config: BridgeConfig, url: str, connected: Callable[[bool], None]) -> Any:
    """A NATS connection to ``url`` that reconnects for ever; ``connected`` hears it go down
    and come back."""
    import nats

    n = config.nats

    async def _disconnected() -> None:
        connected(False)

    async def _reconnected() -> None:
        connected(True)

    opts: dict[str, Any] = {}
    if n.user and n.password:
        opts.update(user=n.user, password=n.password)
    nc = await nats.connect(
        url,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
        connect_timeout=2,
        disconnected_cb=_disconnected,
        reconnected_cb=_reconnected,
        **opts,
    )
    connected(True)
    return nc


async def _put_stream(js: Any, cfg: Any) -> None:
    from nats.js.errors import BadRequestError

    try:
        await js.add_stream(cfg)
    except BadRequestError as e:
        if getattr(e, "err_code", None) != 10058:  # in use with another config
            raise
        try:
            await js.update_stream(cfg)
        except BadRequestError as e:  # a change the server cannot make in place
            log.warning("stream %s keeps its old settings: %s", cfg.name, e)


async def ensure_streams(js: Any, config: BridgeConfig) -> None:
    """Create (or bring up to date) this host's out stream, an in stream per peer sourcing the
    peer's out stream, and the durable consumer the bridge pulls each in stream through."""
    from nats.js.api import (
        AckPolicy,
        ConsumerConfig,
        DiscardPolicy,
        ExternalStream,
        StreamConfig,
        StreamSource,
    )

    host = config.host
    max_bytes = config.nats.stream_max_bytes
    await _put_stream(
        js,
        StreamConfig(
            name=out_stream(host),
            subjects=[f"ms.{host}.>"],
            max_msgs_per_subject=1,
            max_bytes=max_bytes,
            discard=DiscardPolicy.NEW,
            discard_new_per_subject=True,
            max_age=STREAM_MAX_AGE_SECONDS,
            duplicate_window=120,
        ),
    )
    for peer in config.peers:
        source = StreamSource(
            name=out_stream(peer),
            filter_subject=f"ms.{peer}.>",
            external=ExternalStream(api=f"$JS.{peer}.API"),
        )
        await _put_stream(
            js,
            StreamConfig(
                name=in_stream(peer),
                sources=[source],
                max_bytes=max_bytes,
                discard=DiscardPolicy.NEW,
                max_age=STREAM_MAX_AGE_SECONDS,
            ),
        )
        await js.add_consumer(
            in_stream(peer),
            ConsumerConfig(
                durable_name=CONSUMER,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=ACK_WAIT_SECONDS,
                max_ack_pending=1024,
            ),
        )

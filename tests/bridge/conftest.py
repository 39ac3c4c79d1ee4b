"""Two hosts on loopback, each with its own exchange copy, bridge and nats-server; the leafnode
link from b to a runs through a proxy the test can cut."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bridge_helpers import Host, Proxy


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every bridge test runs real servers and processes: all are ``slow``."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slow)


def _need_nats() -> None:
    from mailslot.bridge.server import find_nats_server
    from mailslot.core.errors import NotFound

    pytest.importorskip("nats", reason="the bridge extra (nats-py) is not installed")
    try:
        find_nats_server()
    except NotFound as e:
        pytest.skip(str(e))


class Pair:
    """Host a (side a, home) and host b (side b), b's leafnode reaching a through ``proxy``."""

    def __init__(
        self,
        base: Path,
        a_extra: tuple[str, ...] = (),
        b_extra: tuple[str, ...] = (),
        remote: str | None = None,
    ) -> None:
        self.a = Host(base, "a")
        self.b = Host(base, "b")
        self.proxy = Proxy(self.a.leaf_port)
        hosts = {"a": "a", "b": "b"}
        for h in (self.a, self.b):  # each host's copy of one bridged chat, empty at first
            h.base.mkdir(parents=True, exist_ok=True)
            h.chat.touch()
        chat_a = ("--chat", f"room={self.a.chat}")
        chat_b = ("--chat", f"room={self.b.chat}")
        advertise = ("--leaf-advertise", f"127.0.0.1:{self.proxy.port}")
        self.a.init(["b"], hosts, "a", *advertise, *chat_a, *a_extra)
        leaf = remote or f"nats-leaf://127.0.0.1:{self.proxy.port}"
        self.b.init(["a"], hosts, "a", "--leaf-remote", leaf, *chat_b, *b_extra)

    def start(self) -> None:
        self.proxy.start()
        self.a.start()
        self.b.start()

    def stop(self) -> None:
        for h in (self.b, self.a):
            h.stop()
        self.proxy.cut()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    _need_nats()
    p = Pair(tmp_path)
    p.start()
    try:
        yield p
    finally:
        p.stop()

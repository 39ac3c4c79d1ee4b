"""Two hosts on loopback, each with its own exchange copy, bridge and nats-server; the leafnode
link from b to a runs through a proxy the test can cut."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_helpers import Pair, need_nats


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every bridge test runs real servers and processes: all are ``slow``."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    need_nats()
    p = Pair(tmp_path)
    p.start()
    try:
        yield p
    finally:
        p.stop()

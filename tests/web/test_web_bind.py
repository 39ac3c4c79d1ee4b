"""The bind guard: which addresses the private inbox may listen on."""

from __future__ import annotations

import pytest

from mailslot.core.errors import FormatError, MailslotError
from mailslot.web.bind import check_private, parse_bind


@pytest.mark.parametrize(
    "value",
    [
        "127.0.0.1:8790",
        "localhost:1",
        "10.1.2.3:80",
        "172.16.0.1:80",
        "172.31.255.255:1",
        "192.168.1.10:8790",
        "100.64.0.7:8790",
        "100.127.255.254:1",
        "[::1]:8790",
        "[fd7a:115c:a1e0::1]:8790",
        "[::ffff:10.0.0.1]:1",
    ],
)
def test_private_addresses_allowed(value: str) -> None:
    assert check_private(parse_bind(value)).port >= 1


@pytest.mark.parametrize(
    "value",
    [
        "0.0.0.0:1",
        "[::]:1",
        "8.8.8.8:1",
        "172.32.0.1:1",
        "100.128.0.1:1",
        "192.169.0.1:1",
        "[2001:db8::1]:1",
        "[fe80::1]:1",
        "169.254.0.1:1",
        "[::ffff:1.1.1.1]:1",
    ],
)
def test_public_or_wildcard_refused(value: str) -> None:
    with pytest.raises(MailslotError, match="refusing to listen"):
        check_private(parse_bind(value))


@pytest.mark.parametrize(
    "value", ["8790", "host:80", "1.2.3.4", "1.2.3.4:x", "1.2.3.4:70000", "[::1]", ":80"]
)
def test_malformed_bind(value: str) -> None:
    with pytest.raises(FormatError):
        parse_bind(value)

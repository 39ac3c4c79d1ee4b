"""An answer sent before the request's body was read (a 413 on its Content-Length) leaves the
connection in a state the next request can trust: what is left of the body is drained (a bounded
amount) or the connection says ``connection: close`` and closes. The rest of the body is never
parsed as the next request."""

from __future__ import annotations

import socket

import pytest

from mailslot.web.guard import DRAIN_MAX
from mailslot.web.settings import SERVER_HEADER_BYTES, ServerLimits


async def _refuses_before_reading(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    """A POST is refused on its headers alone, its body never read (as a login check or a
    declared length over a cap refuses); a GET is answered."""
    if scope["type"] != "http":
        return
    status, body = (413, b"too large") if scope["method"] == "POST" else (200, b"ok")
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    return host, int(port)


class _Reader:
    """Whole HTTP/1.1 answers (Content-Length framed) from a raw socket, one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        sock.settimeout(10)

    def _more(self) -> bool:
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            chunk = b""
        self.buf += chunk
        return bool(chunk)

    def answer(self) -> tuple[bytes, bytes] | None:
        """(head, body) of the next answer; None once the server has closed without one."""
        while b"\r\n\r\n" not in self.buf:
            if not self._more():
                assert self.buf == b"", self.buf[:200]
                return None
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            assert self._more(), "the server closed in the middle of an answer"
            rest = self.buf.partition(b"\r\n\r\n")[2]
        self.buf = rest[length:]
        return head.lower(), rest[:length]


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed after its answer: what it said is what is judged


# Over the header cap (a leftover taken for headers would be 431), both
# under the drain bound and over it.
SIZES = [SERVER_HEADER_BYTES + 4096, DRAIN_MAX + 1, 4 * DRAIN_MAX]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("body_first", [False, True], ids=["after-answer", "with-headers"])
def test_the_rest_of_a_refused_body_is_never_taken_for_the_next_request(
    serve, size: int, body_first: bool
) -> None:
    head = b"POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size
    body = b"{" + b" " * (size - 2) + b"}"
    after = b"GET /form HTTP/1.1\r\nHost: x\r\n\r\n"
    with serve(_refuses_before_reading) as url:
        for _ in range(5):  # the race between the answer and the body's arrival, several times
            with socket.create_connection(_address(url)) as s:
                reader = _Reader(s)
                if body_first:
                    _send(s, head + body + after)
                else:
                    _send(s, head)
                first = reader.answer()
                assert first is not None and first[0].startswith(b"http/1.1 413 "), first
                if not body_first:
                    _send(s, body + after)
                closing = b"\r\nconnection: close" in first[0]
                second = reader.answer()
                if closing:
                    assert second is None, second
                else:
                    assert second is not None, "kept alive, yet the next request went unanswered"
                    assert second[0].startswith(b"http/1.1 200 "), second


@pytest.mark.parametrize(
    "head",
    [
        b"POST /form HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n",
    ],
    ids=["chunked", "expect-continue"],
)
def test_an_early_answer_to_a_body_of_unknown_rest_closes_the_connection(
    serve, head: bytes
) -> None:
    with serve(_refuses_before_reading) as url, socket.create_connection(_address(url)) as s:
        reader = _Reader(s)
        _send(s, head)
        first = reader.answer()
        assert first is not None and first[0].startswith(b"http/1.1 413 "), first
        assert b"\r\nconnection: close" in first[0]
        _send(s, b"5\r\nhello\r\n0\r\n\r\n" if b"chunked" in head else b"x" * 100)
        _send(s, b"GET /form HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reader.answer() is None


def test_a_rest_that_never_comes_is_cut_off_after_the_body_timeout(serve) -> None:
    quick = ServerLimits(header_timeout=1.0, body_timeout=1.0)
    with serve(_refuses_before_reading, quick) as url, socket.create_connection(_address(url)) as s:
        reader = _Reader(s)
        _send(s, b"POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
        first = reader.answer()
        assert first is not None and first[0].startswith(b"http/1.1 413 "), first
        assert b"connection: close" not in first[0]  # a small rest: drained, kept alive
        assert reader.answer() is None  # ... until the body deadline passes without it

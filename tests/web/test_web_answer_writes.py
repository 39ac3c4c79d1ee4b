"""How an answer leaves the server: its head and body in one write (one system call, one
segment) when the body follows at once; a head whose body is late still leaves within the
loop's next pass; nothing is reordered, and a close sends what is held first."""

from __future__ import annotations

import asyncio

import httpx

from mailslot.web.guard import _OneWrite


class _Sink:
    """A transport that records each write it is given (what the socket would send)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


def test_head_and_body_leave_in_one_write() -> None:
    async def main() -> _Sink:
        sink = _Sink()
        t = _OneWrite(sink, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 201 Created\r\n\r\n")
        t.write(b'{"id":"x"}')
        t.write(b"more")
        await asyncio.sleep(0)
        assert t.get_write_buffer_size() == 0  # everything else is the transport's
        return sink

    sink = asyncio.run(main())
    assert sink.writes == [b'HTTP/1.1 201 Created\r\n\r\n{"id":"x"}', b"more"]


def test_a_head_whose_body_is_late_leaves_within_the_next_pass() -> None:
    async def main() -> list[list[bytes]]:
        sink = _Sink()
        t = _OneWrite(sink, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")
        seen = [list(sink.writes)]
        await asyncio.sleep(0.01)  # a stream's first event is not ready yet
        seen.append(list(sink.writes))
        t.write(b"data: 1\n\n")
        seen.append(list(sink.writes))
        return seen

    before, after_a_pass, with_body = asyncio.run(main())
    assert before == []
    assert after_a_pass == [b"HTTP/1.1 200 OK\r\n\r\n"]
    assert with_body == [b"HTTP/1.1 200 OK\r\n\r\n", b"data: 1\n\n"]


def test_a_close_sends_the_held_head_first() -> None:
    async def main() -> _Sink:
        sink = _Sink()
        t = _OneWrite(sink, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        t.close()
        await asyncio.sleep(0)
        return sink

    sink = asyncio.run(main())
    assert sink.writes == [b"HTTP/1.1 204 No Content\r\n\r\n"] and sink.closed


def test_answers_over_a_kept_alive_connection_stay_whole(peer_setup, peer_server) -> None:
    headers = {"Authorization": f"Bearer {peer_setup.tokens['tidal']}"}
    with peer_server() as url, httpx.Client(headers=headers) as c:
        answers = [c.post(f"{url}/inbox", json={"body": f"m{i}"}) for i in range(20)]
        answers.append(c.post(f"{url}/inbox", content=b"{}"))
        answers.append(c.get(f"{url}/inbox"))
    assert [a.status_code for a in answers] == [201] * 20 + [422, 405]
    assert len({a.json()["id"] for a in answers[:20]}) == 20

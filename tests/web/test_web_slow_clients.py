"""Clients that send slowly, send too much, or come in crowds hold no more of a server than its
limits give: headers and bodies have deadlines, headers a byte cap, connections a bound, and a
crowd of slow clients never locks out a prompt one."""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from mailslot.web.guard import PIPELINE_MAX
from mailslot.web.settings import ServerLimits

QUICK = ServerLimits(header_timeout=1.0, body_timeout=1.0)


def _answer(sock: socket.socket, within: float) -> bytes:
    """Everything the server sends before it closes ``sock`` (bounded by ``within`` seconds)."""
    sock.settimeout(within)
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def _json_error(raw: bytes, status: int) -> str:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), raw[:200]
    error = json.loads(body)["error"]
    assert isinstance(error, str)
    return error


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    return host, int(port)


def test_headers_sent_slowly_get_408_after_the_header_timeout(board_server) -> None:
    with board_server(server=QUICK) as url, socket.create_connection(_address(url)) as s:
        s.sendall(b"POST /api/agora HTTP/1.1\r\nHost: x\r\n")
        for _ in range(4):  # a header line every 0.4 s, never the blank line that ends them
            time.sleep(0.4)
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
        error = _json_error(_answer(s, 10), 408)
    assert "headers not received within 1 s" in error


def test_a_body_sent_slowly_is_cut_off_after_the_body_timeout(board_server) -> None:
    with board_server(server=QUICK) as url, socket.create_connection(_address(url)) as s:
        s.sendall(
            b"POST /api/agora HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        assert _answer(s, 10) == b""  # closed, nothing stored, nothing answered
        listed = httpx.get(f"{url}/api/agora").json()
    assert listed == []


def test_headers_over_the_cap_are_431(peer_setup, peer_server) -> None:
    with peer_server() as url, socket.create_connection(_address(url)) as s:
        s.sendall(b"POST /inbox HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 * 1024))
        error = _json_error(_answer(s, 10), 431)
    assert "over 16384 bytes" in error


def test_headers_over_the_cap_are_431_even_when_they_arrive_whole(peer_setup, peer_server) -> None:
    with peer_server() as url, socket.create_connection(_address(url)) as s:
        s.sendall(
            b"POST /inbox HTTP/1.1\r\nHost: x\r\n"
            + b"X-Many: y\r\n" * 2000  # 24 KB of small headers, in one write
            + b"Authorization: Bearer "
            + peer_setup.tokens["tidal"].encode()
            + b'\r\nContent-Length: 13\r\n\r\n{"body":"hi"}'
        )
        error = _json_error(_answer(s, 10), 431)
    assert "over 16384 bytes" in error
    assert peer_setup.stored() == []


def test_a_kept_alive_connection_gets_a_new_header_deadline(board_server) -> None:
    with board_server(server=QUICK) as url, socket.create_connection(_address(url)) as s:
        s.sendall(b"GET /api/agora HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        s.sendall(b"GET /api/agora HTTP/1.1\r\n")  # the next request, never finished
        error = _json_error(_answer(s, 10), 408)
    assert "headers not received" in error


def _crowd(address: tuple[str, int], n: int, stop: threading.Event, seen: dict[str, int]) -> None:
    """``n`` slow-loris clients: each sends a request line, then one header line every 0.2 s,
    never the end of the headers; each one the server closes connects again at once."""
    socks: list[socket.socket | None] = [None] * n
    try:
        while not stop.is_set():
            for i in range(n):
                s = socks[i]
                if s is None:
                    try:
                        s = socket.create_connection(address, timeout=0.5)
                        s.setblocking(False)
                        s.send(b"POST /inbox HTTP/1.1\r\nHost: x\r\n")
                    except OSError:
                        continue
                    socks[i] = s
                    seen["connects"] += 1
                    continue
                closed = True  # any answer (a 408) or EOF: the server is done with it
                try:
                    s.recv(4096)
                except BlockingIOError:
                    closed = False
                except OSError:
                    pass
                if not closed:
                    try:
                        s.send(b"X-Slow: 1\r\n")
                    except OSError:
                        closed = True
                if closed:
                    s.close()
                    socks[i] = None
                    seen["cut"] += 1
            stop.wait(0.2)
    finally:
        for s in socks:
            if s is not None:
                s.close()


def _open_sockets(pid: int) -> int:
    fd_dir = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fd_dir.iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            pass
    return count


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts sockets in /proc")
def test_a_crowd_of_slow_clients_does_not_lock_out_a_peer(peer_setup) -> None:
    bound, crowd, header_timeout = 50, 120, 2.0
    # The server runs with 96 open files, as a service runs with its own (usually 1,024): a
    # crowd larger than that which the server never cuts off takes every one of them.
    files = 96

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mailslot",
            "peer",
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--peers",
            str(peer_setup.peers_file),
            "--inbox",
            str(peer_setup.inbox),
            "--header-timeout",
            str(header_timeout),
            "--max-connections",
            str(bound),
        ],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit_files,
    )
    stop = threading.Event()
    seen = {"connects": 0, "cut": 0}
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "listening on" in line, line
        url = line.split("listening on ", 1)[1].strip()
        attackers = threading.Thread(
            target=_crowd, args=(_address(url), crowd, stop, seen), daemon=True
        )
        attackers.start()
        deadline = time.monotonic() + 3 * header_timeout
        while seen["connects"] < crowd + bound and time.monotonic() < deadline:
            time.sleep(0.1)  # the crowd is in and keeps coming back
        sockets = _open_sockets(server.pid)
        answers = []
        for _ in range(3):
            answers.append(
                httpx.post(
                    url,
                    json={"body": "the valid message"},
                    headers={"Authorization": f"Bearer {peer_setup.tokens['tidal']}"},
                    timeout=header_timeout,
                )
            )
        assert seen["connects"] > crowd  # the crowd reconnected: it was cut off and came back
    finally:
        stop.set()
        server.terminate()
        try:
            server.wait(30)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(10)
    assert [a.status_code for a in answers] == [201, 201, 201]
    assert all(a.json()["from"] == "tidal" for a in answers)
    # The bound, the listening socket and a few being closed (without one: the whole crowd).
    assert sockets <= bound + 10
    assert len(peer_setup.stored()) == 3


def _stop_reading(address: tuple[str, int]) -> socket.socket:
    """A client that asks for the board's page a few times over and never reads the answers,
    with a receive buffer as small as the kernel allows: the server's buffers fill up."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect(address)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 8)
    return s


@pytest.fixture
def big_board(tmp_path: Path) -> None:
    """50 posts whose page is a few hundred KB (every '<' is escaped to '&lt;')."""
    from mailslot.web.board import Board, NewPost

    board = Board(tmp_path / "board" / "agora.db")
    for _ in range(50):
        board.add(NewPost("ab", "<" * 1200, None), "127.0.0.1")
    board.close()


def test_clients_that_never_read_their_answers_do_not_lock_out_others(
    big_board, board_server
) -> None:
    # Deadlines long enough that only the connection bound can let the next client in.
    limits = ServerLimits(header_timeout=60, body_timeout=60, max_connections=2)
    with board_server(server=limits) as url:
        stuck = [_stop_reading(_address(url)) for _ in range(2)]
        try:
            time.sleep(1)  # the server writes until its buffers are full, then waits on them
            r = httpx.get(f"{url}/api/agora", timeout=30)
        finally:
            for s in stuck:
                s.close()
    assert r.status_code == 200, r.text
    assert len(r.json()) == 50


def test_a_client_that_never_reads_is_cut_off_after_the_body_timeout(
    big_board, board_server
) -> None:
    with board_server(server=QUICK) as url, _stop_reading(_address(url)) as s:
        time.sleep(3)  # past the deadline: the server drops what it still held and closes
        received = _answer(s, 10)
    assert received.startswith(b"HTTP/1.1 200 ")
    assert received.count(b"</html>") < 8


def test_a_slow_upload_that_keeps_sending_outlives_a_crowd_of_idle_connections(
    peer_setup, peer_server
) -> None:
    limits = ServerLimits(header_timeout=60, body_timeout=60, max_connections=3)
    body = json.dumps({"body": "x" * 16_000}).encode()
    idle: list[socket.socket] = []
    with peer_server(server=limits) as url, socket.create_connection(_address(url)) as up:
        up.sendall(
            b"POST /inbox HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + peer_setup.tokens["tidal"].encode() + b"\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        try:
            for i in range(0, len(body), 400):  # 40 slices, one every 0.05 s
                up.sendall(body[i : i + 400])
                time.sleep(0.05)
                if i % 4000 == 0:  # and every 0.5 s a newcomer that sends nothing
                    idle.append(socket.create_connection(_address(url)))
            head = _answer(up, 30).partition(b"\r\n")[0]
        finally:
            for s in idle:
                s.close()
    assert head.startswith(b"HTTP/1.1 201 "), head
    assert len(peer_setup.stored()) == 1


def test_a_client_that_pipelines_a_flood_is_cut_off_not_queued(
    peer_setup, peer_server, caplog
) -> None:
    flood = 2000
    with peer_server() as url, socket.create_connection(_address(url)) as s:
        request = b"POST /inbox HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        try:
            for _ in range(flood // 200):
                s.sendall(request * 200)
        except OSError:
            pass  # already cut off
        answered = _answer(s, 30).count(b"HTTP/1.1 ")
    assert answered <= PIPELINE_MAX + 1, answered  # closed, not 2,000 requests held in memory
    # The request being answered when the cut came ends quietly, no traceback in the log.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("server", "sig", "code"),
    [
        pytest.param("peer", signal.SIGINT, 130, id="peer-ctrl-c"),
        pytest.param("board", signal.SIGINT, 130, id="board-ctrl-c"),
        pytest.param("board", signal.SIGTERM, 0, id="board-sigterm"),
    ],
)
def test_a_client_that_holds_a_request_open_does_not_hold_up_a_stop(
    peer_setup, server: str, sig: int, code: int
) -> None:
    """Ctrl-C or SIGTERM ends a real server within its stop grace even while a client trickles
    a body it never finishes and another never reads its answer (deadlines far beyond)."""
    args = [sys.executable, "-m", "mailslot", server, "serve", "--bind", "127.0.0.1:0"]
    args += ["--header-timeout", "600", "--body-timeout", "600"]
    if server == "peer":
        args += ["--peers", str(peer_setup.peers_file), "--inbox", str(peer_setup.inbox)]
        path, token = "/inbox", peer_setup.tokens["reef"]
    else:
        args += ["--db", str(peer_setup.root / "board.db")]
        path, token = "/api/agora", ""
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on" in line, line
        address = _address(line.split("listening on ", 1)[1].strip())
        trickle = socket.create_connection(address)
        trickle.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
        )
        unread = _stop_reading(address)
        r = httpx.get(f"http://{address[0]}:{address[1]}{path}", timeout=30)
        assert r.status_code in (200, 401, 405), r.text  # the server is answering others
        proc.send_signal(sig)
        proc.wait(timeout=60)  # the deadlines the clients hold are 600 s
        assert proc.returncode == code, proc.stderr.read()
        trickle.close()
        unread.close()
    finally:
        proc.kill()
        proc.wait()

"""Each refusal is raised as its own kind: a script tells a bad path from a bad value, a busy
port from an unreachable peer, by the class (and its fields), not by parsing the message.

Real parts throughout: a real bus on disk, real sockets on 127.0.0.1, a real HTTP server that
refuses, a real FIFO.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mailslot.bus import layout, log, owners, tasks
from mailslot.cli.helpers import read_small_input
from mailslot.core.errors import (
    CannotOpen,
    DirectoryFull,
    FormatError,
    InvalidName,
    InvalidPath,
    InvalidValue,
    PeerRefused,
    PeerUnreachable,
    ServerFailed,
)
from mailslot.core.fsio import numbered_create
from mailslot.web import auth, peer
from mailslot.web.bind import bind_socket, check_private, parse_bind


@pytest.fixture
def bus(tmp_path: Path) -> Path:
    root = tmp_path / "shared"
    layout.init(root, consumer="beacon")
    return root


# -- values and paths ----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["   ", "a\x07bell"])
def test_log_text_that_says_nothing_or_holds_a_control_is_an_invalid_value(
    bus: Path, text: str
) -> None:
    before = (bus / "LOG.md").read_bytes()
    with pytest.raises(InvalidValue):
        log.append(bus, "lantern", text)
    assert (bus / "LOG.md").read_bytes() == before


def test_contradicting_waking_options_are_an_invalid_value(bus: Path) -> None:
    with pytest.raises(InvalidValue, match="contradict"):
        log.append(bus, "lantern", "hello", same_waking=True, new_waking=True)


@pytest.mark.parametrize("path", ["../outside", "/etc/passwd", "a/../../b", "."])
def test_a_path_that_leaves_the_bus_or_names_its_root_is_an_invalid_path(path: str) -> None:
    with pytest.raises(InvalidPath):
        owners.normalise(path)


def test_a_malformed_task_id_is_an_invalid_name(bus: Path) -> None:
    tasks.add(bus, "write the guide")
    with pytest.raises(InvalidName, match="invalid task id") as e:
        tasks.done(bus, "zz")
    assert e.value.kind == "task id" and e.value.value == "zz"


@pytest.mark.parametrize("addr", ["0.0.0.0:8790", "8.8.8.8:8790", "[::]:8790"])
def test_a_public_or_wildcard_bind_is_an_invalid_value(addr: str) -> None:
    with pytest.raises(InvalidValue, match="refusing to listen"):
        check_private(parse_bind(addr))


# -- files ---------------------------------------------------------------------------------


def test_a_fifo_given_as_input_cannot_be_opened_and_is_never_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "body"
    os.mkfifo(fifo)
    with pytest.raises(CannotOpen, match="not a regular file") as e:
        read_small_input(fifo, limit=1024, what="the body file")
    assert e.value.path == fifo


def test_input_that_is_not_utf8_is_a_format_error(tmp_path: Path) -> None:
    body = tmp_path / "body"
    body.write_bytes(b"caf\xe9")
    with pytest.raises(FormatError, match="not UTF-8"):
        read_small_input(body, limit=1024, what="the body file")


def test_a_numbered_directory_with_every_number_used_is_full(tmp_path: Path) -> None:
    for n in range(1, 10):
        (tmp_path / f"{n}-x").write_text("")
    with pytest.raises(DirectoryFull, match="no numbers left"):
        numbered_create(tmp_path, "x", "body", width=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{n}-x" for n in range(1, 10)]


# -- servers and peers ---------------------------------------------------------------------


def test_a_busy_port_is_a_server_failure() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        with pytest.raises(ServerFailed, match=r"cannot listen on 127\.0\.0\.1:"):
            bind_socket(parse_bind(f"127.0.0.1:{taken.getsockname()[1]}"))
    finally:
        taken.close()


def _keys(tmp_path: Path, port: int) -> Path:
    keys = tmp_path / "keys.json"
    auth.add_key(keys, "beacon", f"http://127.0.0.1:{port}", "t0ken-" + "x" * 40)
    return keys


def test_a_peer_nobody_answers_for_is_unreachable(tmp_path: Path) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now: every connection is refused
    with pytest.raises(PeerUnreachable, match="cannot reach peer 'beacon'"):
        peer.send(_keys(tmp_path, port), "beacon", "hello", timeout=2.0)


class _Refuses(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"error": "unknown token"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_peer_that_answers_with_an_error_refused_and_says_its_status(
    tmp_path: Path, refusing_server: int
) -> None:
    with pytest.raises(PeerRefused, match="HTTP 401: unknown token") as e:
        peer.send(_keys(tmp_path, refusing_server), "beacon", "hello", timeout=5.0)
    assert e.value.status == 401

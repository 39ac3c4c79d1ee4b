"""The peer commands: send, inbox, process; keys and peers files; the board's moderate."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

from click.testing import CliRunner
from web_helpers import invoke

from mailslot.cli import cli


def test_files_of_the_other_kind_are_refused(tmp_path: Path) -> None:
    peers, keys = tmp_path / "peers.json", tmp_path / "keys.json"
    token = invoke("peer", "token", "new", "tidal", "--peers", str(peers)).stdout.splitlines()[-1]
    r = invoke("peer", "add", "beacon", "http://127.0.0.1:1", "--keys", str(peers), input=token)
    assert r.exit_code == 1 and "mailslot-peers file" in r.stderr
    invoke("peer", "add", "beacon", "http://127.0.0.1:1", "--keys", str(keys), input=token)
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    r = invoke("peer", "token", "new", "x", "--peers", str(keys))
    assert r.exit_code == 1 and "mailslot-peer-keys file" in r.stderr


def test_send_inbox_process_round_trip(tmp_path: Path, peer_setup, peer_server) -> None:
    keys = tmp_path / "keys.json"
    inbox = str(peer_setup.inbox)
    with peer_server() as url:
        r = invoke(
            "peer",
            "add",
            "beacon",
            url,
            "--keys",
            str(keys),
            input=peer_setup.tokens["tidal"] + "\n",
        )
        assert r.exit_code == 0, r.output
        r = invoke(
            "peer",
            "send",
            "beacon",
            "draft in outbox/ \x1b[31m",
            "review",
            "--keys",
            str(keys),
            "--json",
        )
        assert r.exit_code == 0, r.output
        receipt = json.loads(r.stdout)
        unknown = invoke("peer", "send", "nobody", "hi", "--keys", str(keys))
    assert receipt["from"] == "tidal"
    assert unknown.exit_code == 1
    assert "unknown peer 'nobody'" in unknown.stderr and "beacon" in unknown.stderr
    listed = json.loads(invoke("peer", "inbox", "--inbox", inbox, "--json").stdout)["messages"]
    assert [(m["id"], m["from"], m["subject"]) for m in listed] == [
        (receipt["id"], "tidal", "review")
    ]
    text = invoke("peer", "inbox", "--inbox", inbox).stdout
    assert "\x1b" not in text and "\\x1b[31m" in text  # a body cannot drive the terminal
    r = invoke("peer", "process", receipt["id"].rsplit("-", 1)[1], "--inbox", inbox)
    assert r.exit_code == 0, r.output
    assert invoke("peer", "inbox", "--inbox", inbox, "--json").stdout.strip() == '{"messages": []}'
    assert (peer_setup.inbox / "processed" / f"{receipt['id']}.json").is_file()
    again = invoke("peer", "process", receipt["id"], "--inbox", inbox)
    assert again.exit_code == 1 and "already processed" in again.stderr


def test_send_refuses_oversized_body_locally(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    invoke("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys), input="mst_x")
    r = invoke("peer", "send", "beacon", "x" * 40000, "--keys", str(keys))
    assert r.exit_code == 1 and "at most 32768 bytes allowed" in r.stderr


def test_help_imports_no_web_stack() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from mailslot.cli import cli\n"
        "for args in (['peer', '--help'], ['board', '--help'], ['peer', 'send', '--help']):\n"
        "    assert CliRunner().invoke(cli, args).exit_code == 0\n"
        "heavy = [m for m in ('fastapi', 'uvicorn', 'httpx', 'limits', 'starlette')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_moderate_without_a_database_is_a_clear_error(tmp_path: Path) -> None:
    r = invoke("board", "moderate", "list", "--db", str(tmp_path / "none.db"))
    assert r.exit_code == 1 and "no board database" in r.stderr
    assert not (tmp_path / "none.db").exists()


def test_a_malformed_or_strange_file_does_not_hide_the_inbox(tmp_path: Path) -> None:
    from mailslot.web.peer import store

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    good = store(inbox, "tidal", "hi", "the real message")
    (inbox / "20261130T000002.000Z-tidal-deadbee2.json").write_text('{"from":"tidal","body":')
    os.mkfifo(inbox / "20261130T000003.000Z-tidal-deadbee3.json")  # would block a plain read
    r = CliRunner().invoke(cli, ["peer", "inbox", "--inbox", str(inbox), "--json"])
    assert r.exit_code == 0, r.output
    msgs = json.loads(r.output)["messages"]
    by_id = {m["id"]: m for m in msgs}
    assert by_id[good.id]["body"] == "the real message" and "error" not in by_id[good.id]
    assert "invalid JSON" in by_id["20261130T000002.000Z-tidal-deadbee2"]["error"]
    assert "not a regular file" in by_id["20261130T000003.000Z-tidal-deadbee3"]["error"]
    text = CliRunner().invoke(cli, ["peer", "inbox", "--inbox", str(inbox)]).output
    assert "the real message" in text and text.count("UNREADABLE") == 2


class _DropFirstAnswer:
    """A TCP proxy on 127.0.0.1 that passes the first connection's request to the inbox, reads
    the inbox's whole answer, and resets the client instead of passing it on (the server stored,
    the sender never heard); later connections pass through."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(30)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.dropped: bytes = b""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for _ in range(2):  # the first try and one retry; then the thread ends by itself
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with client, socket.create_connection(self.upstream, timeout=30) as server:
                client.settimeout(30)
                request = b""
                while b"\r\n\r\n" not in request:
                    request += client.recv(65536)
                head, _, body = request.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(body) < length:
                    body += client.recv(65536)
                server.sendall(head + b"\r\n\r\n" + body)
                answer = b""
                while not answer.endswith(b"}"):  # the JSON receipt, whole
                    answer += server.recv(65536)
                if self.connections == 1:
                    self.dropped = answer
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    client.sendall(answer)

    def close(self) -> None:
        self.listener.close()
        self.thread.join(30)


def test_send_retries_a_reset_connection_and_the_message_is_stored_once(
    tmp_path: Path, peer_setup, peer_server
) -> None:
    keys = tmp_path / "keys.json"
    with peer_server() as url:
        proxy = _DropFirstAnswer(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        try:
            add = invoke(
                "peer",
                "add",
                "beacon",
                proxy.url,
                "--keys",
                str(keys),
                input=peer_setup.tokens["tidal"],
            )
            assert add.exit_code == 0, add.output
            r = invoke("peer", "send", "beacon", "exactly once", "--keys", str(keys), "--json")
        finally:
            proxy.close()
    assert r.exit_code == 0, r.output
    receipt = json.loads(r.stdout)
    first = json.loads(proxy.dropped.partition(b"\r\n\r\n")[2])
    assert proxy.connections == 2  # the answer was lost once, and send tried again
    assert receipt == first  # the retry got the first answer
    stored = peer_setup.stored()
    assert [p.stem for p in stored] == [receipt["id"]]
    assert json.loads(stored[0].read_text())["body"] == "exactly once"

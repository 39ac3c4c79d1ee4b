"""The peer commands: tokens, keys, send/inbox/process, and the real ``peer serve`` process."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.cli import cli
from mailslot.web.auth import hash_token, load_peers


def _cli(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_token_new_prints_token_last_and_stores_only_its_hash(tmp_path: Path) -> None:
    peers = tmp_path / "peers.json"
    r = _cli(
        "peer", "token", "new", "tidal", "--peers", str(peers), "--url", "http://100.64.0.9:8790"
    )
    assert r.exit_code == 0, r.output
    token = r.stdout.splitlines()[-1]
    assert token.startswith("mst_") and len(token) > 40
    text = peers.read_text()
    assert token not in text
    assert hash_token(token) in text
    assert oct(peers.stat().st_mode & 0o777) == "0o600"
    entry = load_peers(peers)["tidal"]
    assert entry.address == "http://100.64.0.9:8790"
    assert entry.per_hour == 30  # the limit is written out with the hash
    again = _cli("peer", "token", "new", "tidal", "--peers", str(peers))
    assert again.exit_code == 1 and "--replace" in again.stderr
    bad = _cli("peer", "token", "new", "../evil", "--peers", str(peers))
    assert bad.exit_code == 1 and "invalid peer name" in bad.stderr
    listed = _cli("peer", "token", "list", "--peers", str(peers), "--json")
    assert json.loads(listed.stdout)["peers"][0]["name"] == "tidal"
    assert token not in listed.stdout and hash_token(token) not in listed.stdout


def test_files_of_the_other_kind_are_refused(tmp_path: Path) -> None:
    peers, keys = tmp_path / "peers.json", tmp_path / "keys.json"
    token = _cli("peer", "token", "new", "tidal", "--peers", str(peers)).stdout.splitlines()[-1]
    r = _cli("peer", "add", "beacon", "http://127.0.0.1:1", "--keys", str(peers), input=token)
    assert r.exit_code == 1 and "mailslot-peers file" in r.stderr
    _cli("peer", "add", "beacon", "http://127.0.0.1:1", "--keys", str(keys), input=token)
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    r = _cli("peer", "token", "new", "x", "--peers", str(keys))
    assert r.exit_code == 1 and "mailslot-peer-keys file" in r.stderr


def test_send_inbox_process_round_trip(tmp_path: Path, peer_setup, peer_server) -> None:
    keys = tmp_path / "keys.json"
    inbox = str(peer_setup.inbox)
    with peer_server() as url:
        r = _cli(
            "peer",
            "add",
            "beacon",
            url,
            "--keys",
            str(keys),
            input=peer_setup.tokens["tidal"] + "\n",
        )
        assert r.exit_code == 0, r.output
        r = _cli(
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
        unknown = _cli("peer", "send", "nobody", "hi", "--keys", str(keys))
    assert receipt["from"] == "tidal"
    assert unknown.exit_code == 1
    assert "unknown peer 'nobody'" in unknown.stderr and "beacon" in unknown.stderr
    listed = json.loads(_cli("peer", "inbox", "--inbox", inbox, "--json").stdout)["messages"]
    assert [(m["id"], m["from"], m["subject"]) for m in listed] == [
        (receipt["id"], "tidal", "review")
    ]
    text = _cli("peer", "inbox", "--inbox", inbox).stdout
    assert "\x1b" not in text and "\\x1b[31m" in text  # a body cannot drive the terminal
    r = _cli("peer", "process", receipt["id"].rsplit("-", 1)[1], "--inbox", inbox)
    assert r.exit_code == 0, r.output
    assert _cli("peer", "inbox", "--inbox", inbox, "--json").stdout.strip() == '{"messages": []}'
    assert (peer_setup.inbox / "processed" / f"{receipt['id']}.json").is_file()
    again = _cli("peer", "process", receipt["id"], "--inbox", inbox)
    assert again.exit_code == 1 and "already processed" in again.stderr


def test_send_refuses_oversized_body_locally(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    _cli("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys), input="mst_x")
    r = _cli("peer", "send", "beacon", "x" * 40000, "--keys", str(keys))
    assert r.exit_code == 1 and "at most 32768 bytes allowed" in r.stderr


def _start_serve(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "peer", "serve", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert p.stderr is not None
    line = p.stderr.readline()
    assert "listening on" in line, line + p.stderr.read()
    return p, line.split("listening on ", 1)[1].strip()


@pytest.mark.slow
def test_real_serve_command_accepts_and_busy_port_exits_1(peer_setup, run_cli) -> None:
    args = ("--peers", str(peer_setup.peers_file), "--inbox", str(peer_setup.inbox))
    p, url = _start_serve("--bind", "127.0.0.1:0", *args)
    try:
        import httpx

        r = httpx.post(
            url,
            json={"body": "hi"},
            headers={"Authorization": f"Bearer {peer_setup.tokens['reef']}"},
        )
        assert r.status_code == 201 and r.json()["from"] == "reef"
        port = url.rsplit(":", 1)[1].split("/")[0]
        busy = run_cli("peer", "serve", "--bind", f"127.0.0.1:{port}", *args)
    finally:
        p.terminate()
        p.wait(30)
    assert busy.returncode == 1
    assert busy.stderr.startswith("mailslot: error: cannot listen on 127.0.0.1:")
    assert busy.stderr.count("\n") == 1 and "Traceback" not in busy.stderr


def test_busy_port_held_by_another_program_exits_1(peer_setup, run_cli) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = run_cli(
            "peer",
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--peers",
            str(peer_setup.peers_file),
            "--inbox",
            str(peer_setup.inbox),
        )
    assert r.returncode == 1
    assert r.stderr.startswith("mailslot: error: cannot listen") and r.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "bind",
    [
        "0.0.0.0:8790",
        "[::]:8790",
        "8.8.8.8:8790",
        "[2001:4860::1]:8790",
        "[::ffff:8.8.8.8]:1",
        "169.254.1.1:8790",
        "example.com:8790",
    ],
)
def test_public_bind_refused(peer_setup, run_cli, bind: str) -> None:
    r = run_cli(
        "peer",
        "serve",
        "--bind",
        bind,
        "--peers",
        str(peer_setup.peers_file),
        "--inbox",
        str(peer_setup.inbox),
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("mailslot: error: ") and r.stderr.count("\n") == 1
    assert not peer_setup.inbox.exists() or not any(peer_setup.inbox.iterdir())


def test_serve_without_peers_file_is_a_clear_error(tmp_path: Path) -> None:
    r = _cli(
        "peer",
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--peers",
        str(tmp_path / "none.json"),
        "--inbox",
        str(tmp_path / "inbox"),
    )
    assert r.exit_code == 1 and "peer token new" in r.stderr


def test_board_serve_busy_port_exits_1(tmp_path: Path, run_cli) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = run_cli(
            "board", "serve", "--bind", f"127.0.0.1:{port}", "--db", str(tmp_path / "agora.db")
        )
    assert r.returncode == 1
    assert r.stderr.startswith("mailslot: error: cannot listen") and r.stderr.count("\n") == 1


def test_address_not_on_this_host_exits_1(peer_setup, run_cli) -> None:
    # 10.255.255.254 is private but (on a test machine) assigned to no interface: bind fails.
    r = run_cli(
        "peer",
        "serve",
        "--bind",
        "10.255.255.254:8790",
        "--peers",
        str(peer_setup.peers_file),
        "--inbox",
        str(peer_setup.inbox),
    )
    if r.returncode == 0:  # pragma: no cover - a host that really owns the address
        pytest.skip("this host has 10.255.255.254")
    assert r.returncode == 1
    assert r.stderr.startswith("mailslot: error: cannot listen on 10.255.255.254:8790")
    assert r.stderr.count("\n") == 1


def test_token_new_through_the_console_command(tmp_path: Path, run_cli) -> None:
    peers = tmp_path / "p.json"
    r = run_cli("peer", "token", "new", "tidal", "--peers", str(peers))
    assert r.returncode == 0, r.stderr
    token = r.stdout.rstrip("\n").splitlines()[-1]
    assert token.startswith("mst_") and " " not in token
    assert load_peers(peers)["tidal"].token_sha256 == hash_token(token)


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


@pytest.mark.slow
def test_real_board_serve_command(tmp_path: Path, run_cli) -> None:
    import httpx

    db = tmp_path / "board" / "agora.db"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mailslot",
            "board",
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--db",
            str(db),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stderr is not None
    try:
        line = p.stderr.readline()
        assert "listening on" in line, line
        url = line.split("listening on ", 1)[1].strip().rstrip("/")
        posted = httpx.post(f"{url}/api/agora", json={"agent": "tidal", "message": "hi"})
        listed = httpx.get(f"{url}/api/agora").json()
        card = httpx.get(f"{url}/.well-known/agent-card.json").json()
    finally:
        p.terminate()
        p.wait(30)
    assert posted.status_code == 201 and listed == [posted.json()]
    assert card["supportedInterfaces"][0]["url"] == f"{url}/api/agora"
    out = run_cli("board", "moderate", "list", "--db", str(db), "--json")
    assert json.loads(out.stdout)["posts"][0]["agent"] == "tidal"


def test_moderate_without_a_database_is_a_clear_error(tmp_path: Path) -> None:
    r = _cli("board", "moderate", "list", "--db", str(tmp_path / "none.db"))
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
            add = _cli(
                "peer",
                "add",
                "beacon",
                proxy.url,
                "--keys",
                str(keys),
                input=peer_setup.tokens["tidal"],
            )
            assert add.exit_code == 0, add.output
            r = _cli("peer", "send", "beacon", "exactly once", "--keys", str(keys), "--json")
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


def test_a_token_saved_with_redirection_is_added_as_saved(tmp_path: Path, run_cli) -> None:
    """The README's steps: `peer token new tidal > token.txt`, then `peer add ... < token.txt`."""
    peers, keys, saved = tmp_path / "p.json", tmp_path / "k.json", tmp_path / "token.txt"
    r = run_cli("peer", "token", "new", "tidal", "--peers", str(peers))
    assert r.returncode == 0, r.stderr
    saved.write_text(r.stdout)
    token = r.stdout.strip()
    assert r.stdout == token + "\n" and token.startswith("mst_")  # the token alone on stdout
    assert "shown once" in r.stderr
    r = run_cli("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys),
                input=saved.read_text())  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(keys.read_text())["peers"]["beacon"]["token"] == token


@pytest.mark.parametrize(
    ("saved", "says"),
    [
        ("", "the input was empty"),
        (
            "# token for peer tidal (shown once):\nmst_abcdef\n",
            "got 2 lines; a line starting with '#'",
        ),
        ("mst_abc def\n", "contains spaces"),
    ],
)
def test_a_bad_token_file_says_what_is_wrong_with_it(tmp_path: Path, saved: str, says: str) -> None:
    r = _cli("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(tmp_path / "k.json"),
             input=saved)  # fmt: skip
    assert r.exit_code == 1 and says in r.stderr, r.stderr
    assert "mst_abc" not in r.stderr  # the secret is never echoed
    assert not (tmp_path / "k.json").exists()


@pytest.mark.parametrize("kind", ["fifo", "device", "oversized"])
def test_a_token_file_that_is_no_small_regular_file_is_refused_at_once(
    tmp_path: Path, run_cli, kind: str
) -> None:
    """A FIFO nobody writes would block the reader, a device feeds it without end, a huge file
    is not a token: each is refused with a clear error, read at most 4 KB + 1, never waited on."""
    source = tmp_path / "token.txt"
    if kind == "fifo":
        os.mkfifo(source)
    elif kind == "device":
        source.symlink_to("/dev/zero")  # the path the operator named may be a symlink
    else:
        source.write_text("mst_" + "a" * 10_000 + "\n")
    keys = tmp_path / "k.json"
    r = run_cli("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys),
                "--token-file", str(source), timeout=30)  # fmt: skip
    assert r.returncode == 1, r.stderr
    says = "more than 4096 bytes" if kind == "oversized" else "not a regular file"
    assert says in r.stderr and "the token file" in r.stderr, r.stderr
    assert "aaaa" not in r.stderr  # the input is never echoed
    assert not keys.exists()


def test_a_token_file_is_read_through_a_symlink_the_operator_named(tmp_path: Path) -> None:
    (tmp_path / "token.txt").write_text("mst_abcdefghijklmnop\n")
    (tmp_path / "link").symlink_to(tmp_path / "token.txt")
    keys = tmp_path / "k.json"
    r = _cli("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys),
             "--token-file", str(tmp_path / "link"))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert json.loads(keys.read_text())["peers"]["beacon"]["token"] == "mst_abcdefghijklmnop"

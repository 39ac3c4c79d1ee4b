"""``peer serve`` and ``board serve`` as real processes: they listen where told, or exit 1 with why.

A busy port (held by another serve or another program), a public bind for the private inbox, an
address not on this host and a missing peers file each end the command with exit 1 and one line.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from web_helpers import invoke


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
    r = invoke(
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

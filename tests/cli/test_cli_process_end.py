"""How a mailslot process ends: Ctrl-C and SIGTERM on real processes, and output kept whole.

Ctrl-C in a blocking command is one line and exit 130 (not click's "Aborted!" and exit 1, which
reads as a refusal); a server stopped with SIGTERM (systemd's stop) exits 0; the MCP server ends
when its host closes standard input or interrupts it, even with a watch pending.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import DEADLINE, in_kernel_wait, spawn, until

pytestmark = pytest.mark.slow


def _mailslot(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailslot", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
        timeout=DEADLINE,
    )


def _exchange(tmp_path: Path) -> Path:
    root = tmp_path / "ex"
    _mailslot("exchange", "init", str(root), "--side", "claude", "--side", "olu", "--no-git")
    return root


def _blocking(tmp_path: Path, which: str) -> list[str]:
    if which == "exchange watch":
        root = _exchange(tmp_path)
        return ["--root", str(root), "--as", "claude", "exchange", "watch", "--timeout", "600"]
    if which == "chat wait":
        chat = _mailslot("--as", "ana", "chat", "new", "--dir", str(tmp_path), "t").stdout
        path = chat.splitlines()[0]
        return ["--as", "ana", "chat", "wait", path, "--timeout", "600"]
    if which == "outbox take --wait":
        bus = tmp_path / "shared"
        _mailslot("bus", "init", str(bus), "--consumer", "beacon")
        return ["--root", str(bus), "--as", "beacon", "outbox", "take", "--wait", "600"]
    if which == "relay serve":
        mb = tmp_path / "mb"
        _mailslot("relay", "init", str(mb), "--worker", "w1", "--manager", "manager")
        return ["--root", str(mb), "--as", "manager", "relay", "serve", "--timeout", "600"]
    raise AssertionError(which)


@pytest.mark.parametrize(
    "which", ["exchange watch", "chat wait", "outbox take --wait", "relay serve"]
)
def test_ctrl_c_in_a_blocking_command_is_one_line_and_exit_130(tmp_path: Path, which: str) -> None:
    proc = spawn(*_blocking(tmp_path, which))
    until(lambda: in_kernel_wait(proc), proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 130, err
    assert err.decode() == "mailslot: interrupted\n"
    assert b"Aborted" not in err and out == b""


def test_ctrl_c_while_the_command_line_is_parsed_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Parsing the global options runs before any command: a Ctrl-C landing there (a send
    # interrupted at random moments hit it) ends the same way, not with click's "Aborted!".
    import click

    from mailslot.cli import cli

    def interrupted(*args: object, **kwargs: object) -> click.Context:
        raise KeyboardInterrupt

    monkeypatch.setattr(click.Command, "make_context", interrupted)
    with pytest.raises(SystemExit) as ended:
        cli.main(args=["--as", "olu", "exchange", "topics"], prog_name="mailslot")
    assert ended.value.code == 130
    assert capsys.readouterr().err.endswith("mailslot: interrupted\n")


def test_ctrl_c_while_the_command_line_loads_is_one_line_and_exit_130(tmp_path: Path) -> None:
    # Before the command line's modules are loaded, nothing of click's or ours catches a
    # Ctrl-C: the entry point does, whatever error the cut-short import surfaces as.
    script = (
        "import sys\n"
        "from mailslot.__main__ import main\n"
        "class Cut:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'click':\n"
        "            raise RuntimeError('import cut short') from KeyboardInterrupt()\n"
        "sys.meta_path.insert(0, Cut())\n"
        "sys.argv = ['mailslot', 'exchange', 'topics']\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 130, r.stderr
    assert r.stderr == "mailslot: interrupted\n"


def _assert_the_watch_took_nothing(root: Path) -> None:
    """An entry olu sends now is there for claude's next watch: the abandoned one took nothing."""
    _mailslot(
        "--root", str(root), "--as", "olu", "exchange", "send", "--topic", "t", "--action", "fyi",
        "after",
    )  # fmt: skip
    r = _mailslot("--root", str(root), "--as", "claude", "exchange", "watch", "--timeout", "0")
    assert "0001-olu.md" in r.stdout


def test_an_interrupted_watch_took_nothing(tmp_path: Path) -> None:
    args = _blocking(tmp_path, "exchange watch")
    root = Path(args[1])
    proc = spawn(*args)
    until(lambda: in_kernel_wait(proc), proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=DEADLINE)
    _assert_the_watch_took_nothing(root)


def test_sigterm_in_a_blocking_command_is_one_line_and_exit_143(tmp_path: Path) -> None:
    proc = spawn(*_blocking(tmp_path, "exchange watch"))
    until(lambda: in_kernel_wait(proc), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 128 + signal.SIGTERM and err.decode() == "mailslot: terminated\n"


def _listening(proc: subprocess.Popen[bytes], seen: list[bytes]) -> Callable[[], bool]:
    def ready() -> bool:
        assert proc.stderr is not None
        seen.append(proc.stderr.readline())
        return b"listening on" in seen[-1]

    return ready


@pytest.mark.parametrize("server", ["peer", "board"])
def test_sigterm_stops_a_web_server_with_exit_0(tmp_path: Path, server: str) -> None:
    if server == "peer":
        _mailslot("--root", str(tmp_path), "peer", "token", "new", "tidal")
    proc = spawn("--root", str(tmp_path), server, "serve", "--bind", "127.0.0.1:0")
    seen: list[bytes] = []
    until(_listening(proc, seen), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err


def test_ctrl_c_stops_a_web_server_with_exit_130(tmp_path: Path) -> None:
    proc = spawn("--root", str(tmp_path), "board", "serve", "--bind", "127.0.0.1:0")
    until(_listening(proc, []), proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 130 and err.decode().endswith("mailslot: interrupted\n")


def _mcp_with_a_pending_watch(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    root = _exchange(tmp_path)
    proc = spawn("--root", str(root), "--as", "claude", "mcp", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        }
    )
    assert json.loads(proc.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "exchange_watch", "arguments": {"timeout": 300}},
        }
    )
    until(lambda: in_kernel_wait(proc), proc)
    return proc, root


@pytest.mark.parametrize("stop", ["stdin closes", "SIGINT", "SIGTERM"])
def test_mcp_server_ends_with_a_watch_pending(tmp_path: Path, stop: str) -> None:
    proc, root = _mcp_with_a_pending_watch(tmp_path)
    assert proc.stdin is not None
    if stop == "stdin closes":
        proc.stdin.close()
    else:
        proc.send_signal(getattr(signal, stop))
    try:
        proc.wait(timeout=DEADLINE)
    finally:
        proc.kill()
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.returncode == {"stdin closes": 0, "SIGTERM": 0, "SIGINT": 130}[stop], err
    assert "Traceback" not in err and "Aborted" not in err
    _assert_the_watch_took_nothing(root)


def test_a_blocking_commands_output_reaches_a_file_whole(tmp_path: Path) -> None:
    root = _exchange(tmp_path)
    for i in range(40):
        _mailslot(
            "--root", str(root), "--as", "olu", "exchange", "send", "--topic", f"t{i}",
            "--action", "fyi", "x" * 2000,
        )  # fmt: skip
    out = tmp_path / "out.json"
    watch = ["exchange", "watch", "--timeout", "5", "--json"]
    with out.open("wb") as f:
        r = subprocess.run(
            [sys.executable, "-m", "mailslot", "--root", str(root), "--as", "claude", *watch],
            stdout=f,
            timeout=DEADLINE,
        )
    assert r.returncode == 0
    data = json.loads(out.read_text())
    assert len(data["items"]) == 40


def _threads(proc: subprocess.Popen[bytes]) -> list[int]:
    """The ids of ``proc``'s threads other than its main thread."""
    return sorted(int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid)


def _interrupt_thread(proc: subprocess.Popen[bytes], tid: int) -> None:
    """Deliver SIGINT to thread ``tid`` of ``proc`` alone, as the kernel may deliver Ctrl-C."""
    libc = ctypes.CDLL(None, use_errno=True)
    tgkill = 234 if platform.machine() == "x86_64" else 131  # aarch64
    assert libc.syscall(tgkill, proc.pid, tid, signal.SIGINT) == 0, ctypes.get_errno()


def _busy_server(tmp_path: Path, server: str) -> subprocess.Popen[bytes]:
    """``server`` running with its helper threads started: the MCP server with a watch
    pending; a web server after it answered a request."""
    if server == "mcp":
        return _mcp_with_a_pending_watch(tmp_path)[0]
    headers = {}
    if server == "peer":
        made = _mailslot("--root", str(tmp_path), "peer", "token", "new", "tidal")
        headers["Authorization"] = f"Bearer {made.stdout.splitlines()[-1]}"
        args = ["peer", "serve"]
    elif server == "web":
        args = ["web", "--root", str(_exchange(tmp_path))]
    else:
        args = [server, "serve"]
    proc = spawn("--root", str(tmp_path), *args, "--bind", "127.0.0.1:0")
    seen: list[bytes] = []
    until(_listening(proc, seen), proc)
    url = "/".join(seen[-1].decode().split("listening on ", 1)[1].split("/")[:3])
    import httpx

    for path in ("/", "/login", "/api/agora", "/inbox"):
        httpx.post(f"{url}{path}", json={"body": "x"}, headers=headers, timeout=DEADLINE)
    return proc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tgkill names one thread")
@pytest.mark.parametrize("server", ["mcp", "peer", "web"])
def test_ctrl_c_ends_a_server_whichever_of_its_threads_receives_it(
    tmp_path: Path, server: str
) -> None:
    """The kernel hands a process's SIGINT to any thread not blocking it; Python acts on it
    only in the main thread. A main thread asleep in an untimed wait would never end."""
    threads = _threads(_probe := _busy_server(tmp_path / "probe", server))
    _probe.kill()
    _probe.wait()
    assert threads, "no helper thread to aim at"
    for i in range(len(threads)):
        proc = _busy_server(tmp_path / f"run-{i}", server)
        others = _threads(proc)
        if i >= len(others):
            proc.kill()
            proc.wait()
            continue
        _interrupt_thread(proc, others[i])
        try:
            proc.wait(timeout=DEADLINE)  # stdin stays open: closing it would end the MCP server
        finally:
            proc.kill()
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert proc.returncode == 130, (i, err)
        assert b"Traceback" not in err

"""Hosts on one machine for the bridge tests: each its own exchange root, bridge dir, nats-server
(started by a real ``mailslot bridge serve`` process) and ports on 127.0.0.1. The demo's TCP
proxy carries a leafnode link so a test can cut it (a real partition) and heal it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# The cuttable link is the demo's own: the tests partition hosts the way the demo shows.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from bridge_demo import Link
from bridge_demo import port as free_port

EX = "ex"


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def cli(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mailslot", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"mailslot {' '.join(args)} failed: {proc.stderr}")
    return proc


class Proxy(Link):
    """The demo's cuttable link 127.0.0.1:port -> 127.0.0.1:target, keeping every byte it
    carried, both ways (a test looks there for plaintext)."""

    def __init__(self, target: int) -> None:
        super().__init__(target)
        self.seen = bytearray()

    def carried(self, data: bytes) -> None:
        self.seen += data


class Host:
    """One "host": exchange root, bridge dir, ports, and its ``bridge serve`` process."""

    def __init__(self, base: Path, name: str) -> None:
        self.name = name
        self.base = base / name
        self.root = self.base / EX
        self.dir = self.base / "bridge"
        self.chat = self.base / "room.txt"
        self.client_port = free_port()
        self.leaf_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    def init(self, peers: list[str], hosts: dict[str, str], home: str, *extra: str) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        if not (self.root / ".mailslot").exists():
            sides = [a for s in sorted(hosts) for a in ("--side", s)]
            cli("exchange", "init", str(self.root), *sides, "--no-git")
        args = ["bridge", "init", "--dir", str(self.dir), "--host", self.name]
        args += ["--listen", f"127.0.0.1:{self.client_port}"]
        args += ["--leaf-listen", f"127.0.0.1:{self.leaf_port}"]
        for p in peers:
            args += ["--peer", p]
        args += ["--exchange", str(self.root), "--name", EX, "--home", home]
        for side, host in sorted(hosts.items()):
            args += ["--side", f"{side}={host}"]
        cli(*args, *extra)

    def start(self) -> None:
        log = open(self.base / "serve.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mailslot", "bridge", "serve", "--dir", str(self.dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
            start_new_session=True,
        )
        log.close()
        proc = self.proc

        def up() -> bool:
            # this process's own status (a killed one's may still look fresh), its server known
            assert proc.poll() is None, f"bridge {self.name} exited: see {self.base}/serve.log"
            st = self.status()
            return bool(st.get("running") and st.get("pid") == proc.pid and st.get("server_pid"))

        wait_for(up, 30, f"bridge {self.name} up")

    def status(self) -> dict[str, Any]:
        path = self.dir / "state" / "status.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        data["running"] = time.time() - path.stat().st_mtime < 3
        return data

    def server_pid(self) -> int | None:
        return self.status().get("server_pid")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.proc = None

    def kill9(self) -> None:
        """SIGKILL the bridge and, since it was the server's parent, the server too."""
        if self.proc is None:
            return
        pid = self.server_pid()
        self.proc.kill()
        self.proc.wait()
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not _alive(pid), 10, "server gone")
        self.proc = None

    def send(self, side: str, topic: str, body: str, action: str = "fyi") -> str:
        out = cli(
            "--root",
            str(self.root),
            "--as",
            side,
            "exchange",
            "send",
            "--topic",
            topic,
            "--action",
            action,
            body,
        )
        return out.stdout.strip().splitlines()[-1]

    def files(self) -> dict[str, bytes]:
        """Every non-dot file under the exchange's to-* folders: relpath -> bytes."""
        out = {}
        for path in sorted(self.root.glob("to-*/**/*")):
            rel = path.relative_to(self.root)
            if path.is_file() and not any(p.startswith(".") for p in rel.parts):
                out[str(rel)] = path.read_bytes()
        return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


async def _publish_raw(url: str, subject: str, data: bytes, headers: dict[str, str] | None) -> Any:
    import nats

    nc = await nats.connect(url)
    try:
        return await nc.jetstream().publish(subject, data, headers=headers)
    finally:
        await nc.close()


def publish_raw(url: str, subject: str, data: bytes, headers: dict[str, str] | None = None) -> Any:
    """Publish straight into a host's server, as a hostile host could on its own server."""
    return asyncio.run(_publish_raw(url, subject, data, headers))


def send_many(host: Host, side: str, topic: str, count: int, tag: str = "") -> list[str]:
    """``count`` entries from ``side`` on ``host`` in-process (the CLI's own send); relpaths."""
    from mailslot.exchange import load_exchange, send

    ex = load_exchange(host.root)
    out = []
    for i in range(count):
        result = send(ex, side, topic, "fyi", f"{tag} message {i} from {side}")
        out.append(result.relpath)
    return out


def converged(*hosts: Host) -> bool:
    first = hosts[0].files()
    return all(h.files() == first for h in hosts[1:])


def chat_messages(host: Host) -> list[tuple[str, str, str]]:
    """``(sender, time, body)`` of every message in the host's copy of the chat."""
    from mailslot.chat.format import parse_messages

    messages, _ = parse_messages(host.chat.read_bytes())
    return [(m.sender, m.time_raw, m.body) for m in messages]


def need_nats() -> None:
    from mailslot.bridge.server import find_nats_server
    from mailslot.core.errors import NotFound

    pytest.importorskip("nats", reason="the bridge extra (nats-py) is not installed")
    try:
        find_nats_server()
    except NotFound as e:
        pytest.skip(str(e))


class Pair:
    """Host a (side a, home) and host b (side b), b's leafnode reaching a through ``proxy``."""

    def __init__(
        self,
        base: Path,
        a_extra: tuple[str, ...] = (),
        b_extra: tuple[str, ...] = (),
        remote: str | None = None,
    ) -> None:
        self.a = Host(base, "a")
        self.b = Host(base, "b")
        self.proxy = Proxy(self.a.leaf_port)
        hosts = {"a": "a", "b": "b"}
        for h in (self.a, self.b):  # each host's copy of one bridged chat, empty at first
            h.base.mkdir(parents=True, exist_ok=True)
            h.chat.touch()
        chat_a = ("--chat", f"room={self.a.chat}")
        chat_b = ("--chat", f"room={self.b.chat}")
        advertise = ("--leaf-advertise", f"127.0.0.1:{self.proxy.port}")
        self.a.init(["b"], hosts, "a", *advertise, *chat_a, *a_extra)
        leaf = remote or f"nats-leaf://127.0.0.1:{self.proxy.port}"
        self.b.init(["a"], hosts, "a", "--leaf-remote", leaf, *chat_b, *b_extra)

    def start(self) -> None:
        self.proxy.heal()
        self.a.start()
        self.b.start()

    def stop(self) -> None:
        for h in (self.b, self.a):
            h.stop()
        self.proxy.cut()

"""The bridge demo: one exchange across two "hosts", the link cut and healed, nothing lost.

Two hosts on this machine: each has its own copy of the exchange, its own nats-server (started
and supervised by a real `mailslot bridge serve`) and ports on 127.0.0.1. Host "laptop" hosts side
claude, host "server" hosts side olu and runs the tick. The leafnode link between them runs
through a small TCP proxy so the demo can cut it: a real partition. Run it with `make demo-bridge`
(needs Debian's nats-server: `make sysdeps`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

EXE = shutil.which("mailslot", path=str(Path(sys.executable).parent)) or "mailslot"


def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Link:
    """The wire between the hosts: a TCP proxy that can be cut and healed."""

    def __init__(self, target: int) -> None:
        self.target, self.port = target, port()
        self.srv: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self._lock = threading.Lock()  # the accepting thread adds connections, cut takes them

    def heal(self) -> None:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(16)
        self.srv = srv
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()

    def _accept(self, srv: socket.socket) -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            if self.srv is not srv:
                c.close()
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:  # the server behind is down: drop this one, keep accepting
                c.close()
                continue
            u.settimeout(None)
            with self._lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                self.carried(data)
                b.sendall(data)
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def carried(self, data: bytes) -> None:
        """Called with every chunk the link carries, either way (nothing here)."""

    def cut(self) -> None:
        srv, self.srv = self.srv, None
        if srv is not None:
            with contextlib.suppress(OSError):
                srv.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            srv.close()
        with self._lock:
            conns, self.conns = self.conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class Host:
    def __init__(self, base: Path, name: str) -> None:
        self.name = name
        self.root = base / name / "exchange"
        self.dir = base / name / "bridge"
        self.client, self.leaf = port(), port()
        self.env = {**os.environ, "XDG_STATE_HOME": str(base / name / "state")}
        self.proc: subprocess.Popen[bytes] | None = None

    def run(self, *args: str) -> str:
        r = subprocess.run([EXE, *args], env=self.env, text=True, capture_output=True, timeout=60)
        if r.returncode != 0:
            raise SystemExit(
                f"demo step failed on {self.name}: mailslot {' '.join(args)}\n{r.stderr}"
            )
        return r.stdout.strip()

    def send(self, side: str, topic: str, action: str, body: str) -> str:
        """``side`` sends an entry on this host, as an agent would; its path in the exchange."""
        return self.run(
            "--root", str(self.root), "--as", side,
            "exchange", "send", "--topic", topic, "--action", action, body,
        )  # fmt: skip

    def serve(self) -> None:
        log = open(self.dir.parent / "bridge.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [EXE, "bridge", "serve", "--dir", str(self.dir)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        status = self.dir / "state" / "status.json"
        deadline = time.monotonic() + 30
        while not (status.exists() and time.time() - status.stat().st_mtime < 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bridge on {self.name} did not start; see {log.name}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(15)

    def link_up(self) -> bool:
        try:
            status = json.loads((self.dir / "state" / "status.json").read_text())
        except (OSError, ValueError):
            return False
        peers = status.get("peers", {}).values()
        return all(p.get("link") == "up" and p.get("active_ms_ago") is not None for p in peers)

    def entries(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.root))
            for p in self.root.glob("to-*/**/*.md")
            if p.name[:4].isdigit()
        )


def wait(what: str, check: object, timeout: float = 30) -> float:
    started = time.monotonic()
    while not check():  # type: ignore[operator]
        if time.monotonic() - started > timeout:
            raise SystemExit(f"demo: timed out waiting for {what}")
        time.sleep(0.02)
    return time.monotonic() - started


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="mailslot-bridge-demo-"))
    laptop, server = Host(base, "laptop"), Host(base, "server")
    link = Link(server.leaf)
    sides = {"claude": "laptop", "olu": "server"}
    try:
        for h in (laptop, server):
            h.run("exchange", "init", str(h.root), "--side", "claude", "--side", "olu", "--no-git")
        common = [f"--side={s}={h}" for s, h in sides.items()] + ["--home", "server"]
        server.run(
            "bridge",
            "init",
            "--dir",
            str(server.dir),
            "--host",
            "server",
            "--peer",
            "laptop",
            "--listen",
            f"127.0.0.1:{server.client}",
            "--leaf-listen",
            f"127.0.0.1:{server.leaf}",
            "--leaf-advertise",
            f"127.0.0.1:{link.port}",
            "--exchange",
            str(server.root),
            "--name",
            "demo",
            *common,
        )
        laptop.run(
            "bridge",
            "init",
            "--dir",
            str(laptop.dir),
            "--host",
            "laptop",
            "--peer",
            "server",
            "--listen",
            f"127.0.0.1:{laptop.client}",
            "--leaf-remote",
            f"nats-leaf://127.0.0.1:{link.port}",
            "--exchange",
            str(laptop.root),
            "--name",
            "demo",
            *common,
        )
        link.heal()
        server.serve()
        laptop.serve()
        wait("the link", lambda: laptop.link_up() and server.link_up(), 60)
        print(f"two hosts up in {base}: laptop (side claude) and server (side olu, home)\n")

        rel = laptop.send("claude", "gate-bug", "required", "Is the gate fixed?")
        took = wait("the entry on the server", lambda: (server.root / rel).exists())
        print(f"laptop  claude sent {rel}")
        print(
            f"server  it is there {took * 1000:.0f} ms later, byte for byte: "
            f"{(server.root / rel).read_bytes() == (laptop.root / rel).read_bytes()}"
        )
        topic = rel.split("/")[1]

        print("\n--- the link is cut ---")
        link.cut()
        for i in range(3):
            laptop.send("claude", topic, "fyi", f"note {i} written while cut off")
            server.send("olu", topic, "fyi", f"reply {i} written while cut off")
        print(
            f"laptop  {len(laptop.entries())} entries here; server  {len(server.entries())} there"
        )
        print(
            "        both hosts kept working; numbers were claimed twice, (number, from) keeps both"
        )

        print("\n--- the link heals ---")
        healed = time.monotonic()
        link.heal()
        wait(
            "convergence",
            lambda: laptop.entries() == server.entries() and len(server.entries()) == 7,
            60,
        )
        print(
            f"both hosts hold the same {len(laptop.entries())} entries "
            f"{time.monotonic() - healed:.1f} s after the heal:"
        )
        for e in laptop.entries():
            print(f"  {e}")
        status = json.loads(laptop.run("bridge", "status", "--dir", str(laptop.dir), "--json"))
        peer = status["peers"]["server"]
        print(
            f"\nlaptop bridge status: link {peer.get('link')}, "
            f"pending in {peer.get('pending_in')}, conflicts {status['conflicts']}, "
            f"refused {status['refused']}"
        )
        out = subprocess.run(
            [EXE, "--root", str(laptop.root), "exchange", "tick"],
            env=laptop.env,
            text=True,
            capture_output=True,
        )
        print(f"laptop  exchange tick -> {out.stderr.strip()}")
        print("\nnothing lost, nothing doubled.")
    finally:
        laptop.stop()
        server.stop()
        link.cut()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The bridge between hosts, on loopback: two "hosts" (own roots, own nats-servers, each started
and supervised by a real ``mailslot bridge serve``), the leafnode link through a TCP proxy.

Rows: an entry renamed into place on host A to visible on host B (inotify on B), sparse traffic
as agents write; bridged throughput one way (B's rate from its first to its last arrival while
it drains a backlog A wrote during a partition: the bridge's rate, not A's disk); catch-up after
a partition heals (from the heal to the last entry written while cut off arriving on B)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import Result, dist

# The cuttable leafnode link is the demo's own: the benchmark measures the bridge the demo shows.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from bridge_demo import Link
from bridge_demo import port as _port

LATENCY_ROUNDS = 300
THROUGHPUT_ENTRIES = 2000
CATCHUP_ENTRIES = 300
TOPICS = 20
ENTRY = "---\nfrom: a\nat: 2026-12-01T10:00:00.000Z\naction: fyi\n---\n" + "x" * 900 + "\n"


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "mailslot", *args], check=True, capture_output=True)


class _Host:
    def __init__(self, base: Path, name: str) -> None:
        self.name, self.base = name, base / name
        self.root, self.dir = self.base / "ex", self.base / "bridge"
        self.client, self.leaf = _port(), _port()
        self.proc: subprocess.Popen[bytes] | None = None

    def init(self, peer: str, *extra: str) -> None:
        _cli("exchange", "init", str(self.root), "--side", "a", "--side", "b", "--no-git")
        _cli(
            "bridge", "init", "--dir", str(self.dir), "--host", self.name, "--peer", peer,
            "--listen", f"127.0.0.1:{self.client}", "--leaf-listen", f"127.0.0.1:{self.leaf}",
            "--exchange", str(self.root), "--name", "ex", "--side", "a=a", "--side", "b=b",
            "--home", "a", *extra,
        )  # fmt: skip

    def start(self) -> None:
        with open(self.base / "serve.log", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mailslot", "bridge", "serve", "--dir", str(self.dir)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        status = self.dir / "state" / "status.json"
        deadline = time.monotonic() + 30
        while not (status.exists() and time.time() - status.stat().st_mtime < 2):
            if time.monotonic() > deadline:
                raise RuntimeError(f"bridge {self.name} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def kill9(self) -> None:
        """SIGKILL the bridge and its server (the server dies with its parent's care)."""
        pid = self.status().get("server_pid")
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        if isinstance(pid, int):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)

    def kill9_server(self) -> None:
        pid = self.status().get("server_pid")
        if isinstance(pid, int):
            os.kill(pid, signal.SIGKILL)

    def status(self) -> dict[str, object]:
        try:
            return dict(json.loads((self.dir / "state" / "status.json").read_text()))
        except (OSError, ValueError):
            return {}


class _Arrivals:
    """inotify on B's topic folders: when each entry name appeared (monotonic ns)."""

    def __init__(self, dirs: list[Path]) -> None:
        from mailslot.core.inotify import INotify, flags

        self.ino = INotify()
        self.wd = {}
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            self.wd[self.ino.add_watch(str(d), flags.CREATE | flags.MOVED_TO)] = d
        self.seen: dict[str, int] = {}
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            for ev in self.ino.read(timeout=100):
                if ev.name and not ev.name.startswith("."):
                    self.seen.setdefault(f"{self.wd[ev.wd].name}/{ev.name}", time.monotonic_ns())

    def wait(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.seen) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True


def _faults(a: _Host, b: _Host, proxy: Link) -> Result:
    from mailslot.core.fsio import atomic_create

    stop = threading.Event()
    written: dict[str, list[str]] = {"a": [], "b": []}

    def writer(host: _Host, side: str, inbox: str) -> None:
        folder = host.root / f"to-{inbox}" / f"2026-12-01-faults-{side}"
        folder.mkdir(parents=True, exist_ok=True)
        n = 0
        while not stop.is_set():
            n += 1
            name = f"{n:04d}-{side}.md"
            atomic_create(folder / name, ENTRY.replace("from: a", f"from: {side}"))
            written[side].append(f"to-{inbox}/{folder.name}/{name}")
            time.sleep(0.02)

    threads = [
        threading.Thread(target=writer, args=(a, "a", "b"), daemon=True),
        threading.Thread(target=writer, args=(b, "b", "a"), daemon=True),
    ]
    for t in threads:
        t.start()
    faults = []
    for round_ in range(3):
        time.sleep(1.0)
        proxy.cut()
        faults.append("partition")
        time.sleep(1.5)
        if round_ == 0:
            b.kill9()
            b.start()
        elif round_ == 1:
            a.kill9_server()  # the bridge's supervisor restarts it
        else:
            a.kill9()
            a.start()
        faults.append("kill -9")
        proxy.heal()
    stop.set()
    for t in threads:
        t.join()
    healed = time.monotonic()

    def entries(h: _Host) -> list[str]:
        return sorted(
            str(p.relative_to(h.root)) for p in h.root.glob("to-*/2026-12-01-faults-*/*.md")
        )

    want = sorted(written["a"] + written["b"])
    deadline = healed + 60
    while (entries(a) != want or entries(b) != want) and time.monotonic() < deadline:
        time.sleep(0.05)
    catch = time.monotonic() - healed
    ea, eb = entries(a), entries(b)
    lost = len(set(want) - set(ea)) + len(set(want) - set(eb))
    extra = len(set(ea) - set(want)) + len(set(eb) - set(want))
    conflicts = sum(int(h.status().get("conflicts", 0) or 0) for h in (a, b))  # type: ignore[call-overload]
    return Result(
        "bridge: 3 partitions + 3 kill -9, both hosts writing",
        "s",
        value=round(catch, 2),
        n=len(want),
        target="0 lost, 0 duplicated; catch-up <= 10 s",
        ok=lost == 0 and extra == 0 and conflicts == 0 and catch <= 10,
        note=f"{len(want)} entries; lost {lost}, extra {extra}, conflicts {conflicts}; value = "
        "last heal to both trees complete",
    )


def _published(host: _Host, count: int, timeout: float) -> None:
    """Wait until ``host``'s bridge has published ``count`` messages (its status says so)."""
    deadline = time.monotonic() + timeout
    while int(dict(host.status().get("counts") or {}).get("published", 0)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{host.name} published too few within {timeout}s")
        time.sleep(0.1)


def run(tmp: Path) -> list[Result]:
    if not (shutil.which("nats-server") or os.access("/usr/sbin/nats-server", os.X_OK)):
        return [Result("bridge", "ms", note="skipped: nats-server not installed (make sysdeps)")]
    try:
        import nats  # noqa: F401
    except ImportError:
        return [Result("bridge", "ms", note="skipped: the bridge extra (nats-py) is not installed")]
    from mailslot.core.fsio import atomic_create
    from mailslot.exchange import load_exchange, send

    os.environ["MAILSLOT_STATE_DIR"] = str(tmp / "state")
    a, b = _Host(tmp, "a"), _Host(tmp, "b")
    proxy = Link(a.leaf)
    a.init("b", "--leaf-advertise", f"127.0.0.1:{proxy.port}")
    b.init("a", "--leaf-remote", f"nats-leaf://127.0.0.1:{proxy.port}")
    rows: list[Result] = []
    proxy.heal()
    a.start()
    b.start()
    try:
        topics = [f"2026-12-01-t{i:02d}" for i in range(TOPICS)]
        for t in [*topics, "2026-12-01-lat", "2026-12-01-cut"]:
            (a.root / "to-b" / t).mkdir()
        arrivals = _Arrivals(
            [b.root / "to-b" / t for t in [*topics, "2026-12-01-lat", "2026-12-01-cut"]]
        )
        time.sleep(1.0)  # the watches above are armed on both bridges

        # 1. latency, sparse: the agent's own send on A -> the file appears on B
        ex = load_exchange(a.root)
        sent: dict[str, int] = {}
        for _ in range(LATENCY_ROUNDS):
            r = send(ex, "a", "2026-12-01-lat", "fyi", "ping")
            sent[f"2026-12-01-lat/{r.path.name}"] = time.monotonic_ns()
            time.sleep(0.01)
        arrivals.wait(LATENCY_ROUNDS, 60)
        lat = [(arrivals.seen[k] - t) / 1e6 for k, t in sent.items() if k in arrivals.seen]
        rows.append(
            dist(
                "bridge: entry on host A -> visible on host B",
                lat,
                "ms",
                target="p50 <= 10 ms, p99 <= 50 ms",
                ok=bool(lat)
                and sorted(lat)[len(lat) // 2] <= 10
                and sorted(lat)[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))] <= 50,
                note=f"{len(lat)}/{LATENCY_ROUNDS} arrived; sends 10 ms apart; loopback leafnode; "
                f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            )
        )

        # 2. throughput one way: A writes the entries while cut off (its bridge publishes them
        # into its own stream), then the link heals and B drains the backlog: B's rate from its
        # first arrival to its last is the bridge's (source transfer + materialise), not A's disk
        proxy.cut()
        time.sleep(1.0)
        before = len(arrivals.seen)
        for i in range(THROUGHPUT_ENTRIES):
            atomic_create(
                a.root / "to-b" / topics[i % TOPICS] / f"{i // TOPICS + 1:04d}-a.md", ENTRY
            )
        _published(a, LATENCY_ROUNDS + THROUGHPUT_ENTRIES, 120)
        proxy.heal()
        ok = arrivals.wait(before + THROUGHPUT_ENTRIES, 180)
        got = sorted(v for k, v in arrivals.seen.items() if not k.startswith("2026-12-01-lat"))
        span = (got[-1] - got[0]) / 1e9 if len(got) > 1 else float("nan")
        rate = (len(got) - 1) / span if len(got) > 1 else 0.0
        rows.append(
            Result(
                "bridge: throughput one way (B drains A's backlog)",
                "msg/s",
                value=round(rate),
                n=len(got),
                target=">= 500 entries/s",
                ok=ok and rate >= 500,
                note=f"{len(got)} x 1 KiB entries, B's first to last arrival {span:.2f}s; "
                f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            )
        )

        # 3. catch-up: entries written during a partition, from the heal to the last on B
        proxy.cut()
        time.sleep(1.0)
        before = len(arrivals.seen)
        for i in range(CATCHUP_ENTRIES):
            atomic_create(a.root / "to-b" / "2026-12-01-cut" / f"{i + 1:04d}-a.md", ENTRY)
        time.sleep(2.0)
        crossed = len(arrivals.seen) - before
        healed = time.monotonic_ns()
        proxy.heal()
        ok = arrivals.wait(before + CATCHUP_ENTRIES, 60)
        last = max(v for k, v in arrivals.seen.items() if k.startswith("2026-12-01-cut/"))
        catch = (last - healed) / 1e9
        rows.append(
            Result(
                "bridge: catch-up after a partition heals",
                "s",
                value=round(catch, 2),
                n=CATCHUP_ENTRIES,
                target="<= 10 s",
                ok=ok and crossed == 0 and catch <= 10,
                note=f"{crossed} crossed while cut; {CATCHUP_ENTRIES} entries; includes the "
                "leafnode reconnect and the source's retry",
            )
        )
        arrivals.stop = True

        # 4. faults: both hosts keep writing through 3 partitions and 3 kill -9s; afterwards
        # every entry is on both hosts exactly once
        rows.append(_faults(a, b, proxy))
    finally:
        b.stop()
        a.stop()
        proxy.cut()
    return rows

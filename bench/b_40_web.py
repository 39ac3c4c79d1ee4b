"""Web channel: the peer inbox's accepted durable messages per second, and the board's GET
throughput, each under a real load generator (wrk) on loopback against the real
``mailslot peer serve`` / ``mailslot board serve`` processes.

The peer run raises the per-peer hourly limit (``--per-hour``) so the limiter does not cap the
measurement; every other check (token, payload, fsync'd atomic write) runs as in production.
Bounded: each run lasts DURATION seconds on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from common import Result

DURATION = 5  # seconds per load run
CONNECTIONS = 32
PEER_TARGET = 1000.0  # accepted durable messages/s on 2 cores (the target in the README)
BOARD_TARGET = 2000.0  # GET req/s (the target in the README)


def _serve(*args: str) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "mailslot", *args, "--bind", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stderr is not None
    line = p.stderr.readline()
    if "listening on" not in line:
        p.kill()
        raise RuntimeError(f"server did not start: {line}{p.stderr.read()}")
    return p, line.split("listening on ", 1)[1].strip()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process (and its threads) has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop(p: subprocess.Popen[str]) -> None:
    p.send_signal(signal.SIGINT)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()


def _wrk(url: str, script: Path | None = None) -> dict[str, float]:
    cmd = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{DURATION}s", "--latency", url]
    if script is not None:
        cmd[1:1] = ["-s", str(script)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=DURATION + 60).stdout
    m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", out)
    if not m:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    seconds = float(m.group(2)) / (1000 if m.group(3) == "ms" else 1)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    lat = {}
    for q in ("50", "90", "99"):
        lm = re.search(rf"\s{q}%\s+([\d.]+)(us|ms|s)", out)
        if lm:
            scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[lm.group(2)]
            lat[q] = float(lm.group(1)) * scale
    return {
        "requests": float(m.group(1)),
        "seconds": seconds,
        "bad": float(bad.group(1)) if bad else 0.0,
        **{f"p{q}": v for q, v in lat.items()},
    }


def _peer(tmp: Path) -> Result:
    peers, inbox = tmp / "peers.json", tmp / "inbox"
    out = subprocess.run(
        [sys.executable, "-m", "mailslot", "peer", "token", "new", "bench", "--peers", str(peers)],
        capture_output=True,
        text=True,
        check=True,
    )
    token = out.stdout.splitlines()[-1]
    body = json.dumps({"subject": "bench", "body": "new guide draft in outbox/, please review"})
    script = tmp / "post.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        f"wrk.body = {json.dumps(body)}\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.headers["Authorization"] = "Bearer {token}"\n'
    )
    p, url = _serve(
        "peer", "serve", "--peers", str(peers), "--inbox", str(inbox), "--per-hour", "1000000000"
    )
    try:
        cpu0 = _cpu_seconds(p.pid)
        w = _wrk(url, script)
        cpu = _cpu_seconds(p.pid) - cpu0
    finally:
        _stop(p)
    files = [f for f in os.listdir(inbox) if f.endswith(".json") and not f.startswith(".")]
    for name in files[:: max(1, len(files) // 50)]:  # spot-check that what was stored is whole
        assert json.loads((inbox / name).read_text())["from"] == "bench"
    rate = len(files) / w["seconds"]
    return Result(
        "web.peer_inbox_accepted",
        "msg/s",
        w.get("p50"),
        w.get("p90"),
        w.get("p99"),
        value=rate,
        n=len(files),
        target=f">= {PEER_TARGET:,.0f} msg/s",
        ok=rate >= PEER_TARGET and w["bad"] == 0,
        note=f"wrk -c{CONNECTIONS} {DURATION}s; fsync'd files counted; per-hour limit raised; "
        f"non-2xx={int(w['bad'])}; server used {cpu / w['seconds']:.2f} cores "
        f"({len(files) / max(cpu, 1e-9):,.0f} msg per CPU-s); load {os.getloadavg()[0]:.1f}; "
        "latency ms",
        extra={"server_cpu_s": cpu, "loadavg": os.getloadavg()},
    )


def _board(tmp: Path, path: str, name: str) -> Result:
    from mailslot.web.board import Board, NewPost

    db = tmp / "agora.db"
    if not db.exists():
        board = Board(db)
        for i in range(60):
            board.add(
                NewPost(f"agent{i % 7}", f"post {i}: " + "words " * 30, "https://example.org/x"),
                "127.0.0.1",
            )
        board.close()
    p, url = _serve("board", "serve", "--db", str(db))
    try:
        w = _wrk(url.rstrip("/") + path)
    finally:
        _stop(p)
    rate = w["requests"] / w["seconds"]
    return Result(
        name,
        "req/s",
        w.get("p50"),
        w.get("p90"),
        w.get("p99"),
        value=rate,
        n=int(w["requests"]),
        target=f">= {BOARD_TARGET:,.0f} req/s",
        ok=rate >= BOARD_TARGET and w["bad"] == 0,
        note=f"wrk -c{CONNECTIONS} {DURATION}s; 50 posts of ~200 chars; latency ms",
    )


def run(tmp: Path) -> list[Result]:
    if shutil.which("wrk") is None:
        return [Result("web", "", ok=False, note="wrk not installed (make sysdeps)")]
    (tmp / "peer").mkdir()
    (tmp / "board").mkdir()
    return [
        _peer(tmp / "peer"),
        _board(tmp / "board", "/api/agora", "web.board_get_api"),
        _board(tmp / "board", "/", "web.board_get_page"),
    ]

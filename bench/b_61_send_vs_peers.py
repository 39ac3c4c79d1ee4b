"""Sending, beside the peers doing the same work in the same run.

In-process, in interleaved batches: ``exchange.send`` (entry file fsync'd, linked into place
under the numbering lock, directory fsync'd), the bare durable create it is built on
(``core.fsio.numbered_create``: temp + fsync + link + dir fsync), letterbox's send (what its MCP
tool ``send_message`` does: temp + rename, no fsync by default; and with its opt-in fsync) and
agent-chat's ``post`` (mkdir lock, scan for the next number, write; no fsync). The peers run in
their own venv's interpreter (``peer_driver.py send``), timed there per call.

Commands, round-robin: ``mailslot exchange send``, ``mailslot chat say`` and ``agent-chat post``
(letterbox has no send command: its agents send through the MCP tool).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from common import PEER_DRIVER, Peers, Result, Vs, dist, mailslot_exe, pct, peers

from mailslot import chat
from mailslot.core.fsio import numbered_create
from mailslot.exchange.create import create_exchange
from mailslot.exchange.entries import send
from mailslot.exchange.layout import load_exchange

ROUNDS = 9  # the first is a warm-up
BATCH = 50
CLI_ROUNDS = 16  # the first is a warm-up
PEER_OPS = {
    "lb": "peer letterbox 1.2.2: send (temp + rename, its default)",
    "lb-fsync": "peer letterbox 1.2.2: send with its fsync=True (file + dir fsync)",
    "ac": "peer agent-chat 0.7.5: post, in-process (mkdir lock + write)",
}


class _PeerSender:
    """The peers' in-process sends, timed per call in their own interpreter."""

    def __init__(self, python: Path, root: Path) -> None:
        cmd = [str(python), str(PEER_DRIVER), "send", str(root)]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdin is not None and self.p.stdout is not None
        self.stdin, self.stdout = self.p.stdin, self.p.stdout

    def batch(self, op: str, n: int) -> list[float]:
        self.stdin.write(f"{op} {n}\n")
        self.stdin.flush()
        samples: list[float] = json.loads(self.stdout.readline())
        return samples

    def close(self) -> None:
        self.stdin.close()
        self.p.wait(timeout=30)


def in_process(tmp: Path, pe: Peers) -> list[Result]:
    ex = load_exchange(create_exchange(tmp / "ex", ["claude", "olu"], git=False).root)
    topic = send(ex, "claude", "bench", "fyi", "opening").topic
    a, b = tmp / "create" / "to-olu" / "t", tmp / "create" / "to-claude" / "t"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    body = "---\nfrom: claude\nat: 2026-11-29T18:14:00.123Z\naction: fyi\n---\n" + "x" * 400
    got: dict[str, list[float]] = {k: [] for k in ("send", "create", *PEER_OPS)}
    driver = _PeerSender(pe.python, tmp / "peers") if pe.python is not None else None
    for r in range(ROUNDS):
        batch: dict[str, list[float]] = {"send": [], "create": []}
        for i in range(BATCH):
            who = "claude" if i % 2 else "olu"
            t = time.perf_counter_ns()
            send(ex, who, topic, "fyi", f"message {r}.{i}")
            batch["send"].append((time.perf_counter_ns() - t) / 1e6)
        for _ in range(BATCH):
            t = time.perf_counter_ns()
            numbered_create(a, "claude.md", body, siblings=[b], lock=tmp / "create" / "send.lock")
            batch["create"].append((time.perf_counter_ns() - t) / 1e6)
        if driver is not None:
            for op in PEER_OPS:
                batch[op] = driver.batch(op, BATCH)
        if r:
            for k, v in batch.items():
                got[k] += v
    if driver is not None:
        driver.close()
    peer_vs = [Vs(f"send.{op}", label) for op, label in (("lb", "letterbox"), ("ac", "agent-chat"))]
    rows = [
        dist(
            "exchange send (in-process, fsync'd)",
            got["send"],
            "ms",
            key="send.exchange",
            vs=[Vs("send.create", "durable create", max_ratio=1.5), *peer_vs],
            note="interleaved batches; the peers' sends do not fsync (their default)",
        ),
        dist(
            "durable create (numbered, fsync), interleaved with the sends",
            got["create"],
            "ms",
            key="send.create",
            note="baseline: temp + fsync + link + dir fsync, as under every mailslot send",
        ),
    ]
    for op, name in PEER_OPS.items():
        rows.append(dist(name, got[op], "ms", key=f"send.{op}") if got[op] else pe.na(name, "ms"))
    return rows


def commands(tmp: Path, pe: Peers) -> list[Result]:
    exe = mailslot_exe()
    root = create_exchange(tmp / "cli-ex", ["claude", "olu"], git=False).root
    path = chat.new_chat("say", tmp, "alice").path
    exchange = [exe, "--root", str(root), "--as", "claude", "exchange", "send"]
    exchange += ["--topic", "bench", "--action", "fyi"]
    say = [exe, "chat", "say", str(path), "--as", "alice"]
    cmds = {"exchange": exchange, "say": say}
    if pe.bin is not None:
        ac_root = tmp / "agent-chat"
        ac = [str(pe.bin / "agent-chat"), "--root", str(ac_root)]
        init = [*ac, "init", "bench", "--members", "claude,olu"]
        subprocess.run(init, check=True, capture_output=True)
        cmds["peer"] = [*ac, "post", "bench", "--from", "claude", "--title", "bench", "--body"]
    got: dict[str, list[float]] = {k: [] for k in cmds}
    for i in range(CLI_ROUNDS):
        for k, cmd in cmds.items():
            t = time.perf_counter()
            subprocess.run([*cmd, f"message {i}"], check=True, capture_output=True)
            if i:
                got[k].append((time.perf_counter() - t) * 1e3)
    rows = []
    for k, what in (("exchange", "mailslot exchange send"), ("say", "mailslot chat say")):
        rows.append(
            dist(
                f"{what} command (wall)",
                got[k],
                "ms",
                key=f"cmd.{k}",
                target="p50 <= 60 ms or <= 1x agent-chat post",
                ok=pct(got[k], 50) <= 60,
                vs=[Vs("cmd.post", "agent-chat post", max_ratio=1.0)],
                need="any",
                note="start, send durably, print, exit",
            )
        )
    name = "peer agent-chat 0.7.5: post command (wall)"
    rows.append(
        dist(name, got["peer"], "ms", key="cmd.post", note="letterbox has no send command")
        if "peer" in got
        else pe.na(name, "ms")
    )
    return rows


def run(tmp: Path) -> list[Result]:
    os.environ["MAILSLOT_STATE_DIR"] = str(tmp / "state")  # chat names of this run only
    try:
        pe = peers()
        return in_process(tmp, pe) + commands(tmp, pe)
    finally:
        os.environ.pop("MAILSLOT_STATE_DIR", None)

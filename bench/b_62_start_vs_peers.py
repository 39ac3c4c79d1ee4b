"""Starting the command, what an agent pays on every call: ``mailslot --help`` beside
``agent-chat --help``, ``letterbox --help`` and a bare interpreter (``python -c pass``), run
round-robin so a busy machine slows them alike."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from common import Result, Vs, dist, mailslot_exe, peers

ROUNDS = 21  # the first is a warm-up


def run(tmp: Path) -> list[Result]:
    pe = peers()
    cmds = {
        "mailslot": [mailslot_exe(), "--help"],
        "bare": [sys.executable, "-c", "pass"],
    }
    if pe.bin is not None:
        cmds["agent-chat"] = [str(pe.bin / "agent-chat"), "--help"]
        cmds["letterbox"] = [str(pe.bin / "letterbox"), "--help"]
    got: dict[str, list[float]] = {k: [] for k in cmds}
    for i in range(ROUNDS):
        for k, cmd in cmds.items():
            t = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, cwd=tmp)
            if i:
                got[k].append((time.perf_counter() - t) * 1e3)
    rows = [
        dist(
            "mailslot --help (wall)",
            got["mailslot"],
            "ms",
            key="start.mailslot",
            vs=[
                Vs("start.agent-chat", "agent-chat --help", max_ratio=1.1),
                Vs("start.bare", "python -c pass", max_over=45),
            ],
            need="any",
        ),
        dist(
            "python -c pass (bare interpreter start)",
            got["bare"],
            "ms",
            key="start.bare",
            note="baseline: the interpreter running the benchmark",
        ),
    ]
    for k, version in (("agent-chat", "0.7.5"), ("letterbox", "1.2.2")):
        name = f"peer {k} {version}: {k} --help (wall)"
        rows.append(dist(name, got[k], "ms", key=f"start.{k}") if k in got else pe.na(name, "ms"))
    return rows

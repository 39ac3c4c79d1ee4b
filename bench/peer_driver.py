"""Drive the peers (letterbox, agent-chat-plugin) the way their own code does; run by the peers'
venv interpreter (``bench/results/.peers-venv``), never by mailslot's, and imports no mailslot.

    python peer_driver.py lb-wait STATE_DIR N   letterbox's Watcher (watchdog/inotify, asyncio
                                                queue) blocked for N messages from another sender
    python peer_driver.py send ROOT             in-process sends, one batch per stdin line:
                                                "lb N" | "lb-fsync N" | "ac N" -> JSON list of ms

lb-wait prints ``armed TMP FINAL`` once the round's message is written to its ``.json.tmp`` (as
letterbox's ``write_message`` does), then waits; the benchmark renames TMP to FINAL (the moment
the message becomes visible, from another process) and reads back the monotonic ns at which the
queue handed the event to the consumer. letterbox has no send command: its agents send through
the MCP tool ``send_message``, i.e. ``make_message_filename`` + ``new_message`` +
``write_message`` (no fsync by default; ``lb-fsync`` is its opt-in durable write).
agent-chat's send is ``cmd_post`` (mkdir lock, scan for the next number, write the file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path


def lb_wait(state_dir: Path, n: int) -> None:
    from letterbox.channel import Channel
    from letterbox.protocol import make_message_filename, new_message, to_json_bytes
    from letterbox.watcher import Watcher, WatcherEvent

    out = os.fdopen(1, "w", buffering=1)
    ch = Channel.get_or_create("bench", "olu", "claude", state_dir=state_dir)

    async def main() -> None:
        queue: asyncio.Queue[WatcherEvent] = asyncio.Queue()
        w = Watcher(ch, self_sender="olu", self_instance_id="olu-bench", queue=queue)
        await w.start()
        try:
            for i in range(n):
                stem = make_message_filename().removesuffix(".json")
                msg = new_message(
                    id=stem,
                    channel=ch.name,
                    instance_id="claude-bench",
                    sender="claude",
                    body=f"message {i}",
                )
                tmp = ch.path / f"{stem}.json.tmp"
                tmp.write_bytes(to_json_bytes(msg))
                out.write(f"armed {tmp} {ch.path / (stem + '.json')}\n")
                await queue.get()
                out.write(f"{time.monotonic_ns()}\n")
        finally:
            await w.stop()

    asyncio.run(main())


def send(root: Path) -> None:
    from letterbox.channel import Channel
    from letterbox.protocol import make_message_filename, new_message, write_message

    import chat  # agent-chat-plugin's module

    ch = Channel.get_or_create("bench", "claude", "olu", state_dir=root / "letterbox")
    ac_root = root / "agent-chat"
    with contextlib.redirect_stdout(io.StringIO()):
        chat.cmd_init(ac_root, argparse.Namespace(channel="bench", members="claude,olu", topic=""))

    def lb(i: int, fsync: bool) -> None:
        stem = make_message_filename().removesuffix(".json")
        msg = new_message(
            id=stem, channel=ch.name, instance_id="claude-bench", sender="claude", body=f"m {i}"
        )
        write_message(ch.path, msg, fsync=fsync)

    def ac(i: int) -> None:
        a = argparse.Namespace(
            channel="bench",
            sender="claude",
            to=None,
            reply=None,
            status="discussion",
            title="bench",
            body=f"m {i}",
            body_file=None,
        )
        with contextlib.redirect_stdout(io.StringIO()):
            chat.cmd_post(ac_root, a)

    ops = {"lb": lambda i: lb(i, False), "lb-fsync": lambda i: lb(i, True), "ac": ac}
    for line in sys.stdin:
        what, count = line.split()
        op = ops[what]
        samples = []
        for i in range(int(count)):
            t = time.perf_counter_ns()
            op(i)
            samples.append((time.perf_counter_ns() - t) / 1e6)
        print(json.dumps(samples), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "lb-wait":
        lb_wait(Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "send":
        send(Path(sys.argv[2]))
    else:
        raise SystemExit(f"unknown role {sys.argv[1]!r}")

"""Waiting, beside the peers doing the same work in the same run: one message becomes visible
(written by another process), the waiter returns it.

In-process: a process blocked in ``exchange.Watcher.watch`` (and one more whose inbox holds
``SEEN_ENTRIES`` entries already seen, held to the small inbox's figure: a wake must cost what
changed, not the size of the inbox) and one in ``chat.Waiter.wait``
(both kept across waits, with their defaults: the cursor is saved), one calling ``chat.wait``
afresh for each message (a new watch each time: for reference), letterbox's ``Watcher``
(watchdog's inotify thread feeding an asyncio queue) and the bare kernel wake (``core.wait.Watch``
on a file) run side by side and are served round-robin, so a busy machine slows them all alike;
so does a waiter making the exchange wake's system calls with none of its logic (``FLOOR``), to
tell what of the exchange row is the disk's and what is Python's.
Commands: ``mailslot exchange watch``, ``mailslot chat wait``, ``mailslot relay ask`` (the
manager's reply appended by hand) and ``mailslot outbox take --wait`` (an item renamed in, its
bytes fsync'd first as ``outbox put`` does) started, left to block, then the message lands; timed
to the first line of output and to the process's exit (a blocking ``waitpid``: the kernel's own
report, no polling interval added), beside ``agent-chat wait`` (a sleep-poll every 5 s by
default, so its few samples are spread evenly over that period). Times run from just before the
syscall that makes the message visible (a rename, or the append) to the waiter's own
``CLOCK_MONOTONIC`` reading, which processes share.

Every row is set up alike: a message that becomes visible by a rename has its temp written
before the waiter is seen blocked (letterbox's driver writes its ``.json.tmp`` before it says
``armed``; the exchange entry's ``.incoming-N``, the outbox item and agent-chat's temp are
written in the same place), and only the rename is timed. The temp's own events (create, write,
close) are then over before the clock starts, for every waiter alike: none of them is timed
working through them, and none is handed a head start by them (a wake on the temp, moments
before the rename, would have the waiter already running when the timed event lands; measured
here, that made the exchange row ~10 % faster than the same waiter given its temp earlier).
A writer that fsyncs its temp (``exchange send``, ``outbox put``) leaves that gap anyway.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from common import PEER_DRIVER, Result, Vs, dist, mailslot_exe, peers, wait_blocked

from mailslot import chat
from mailslot.bus import layout
from mailslot.chat.format import render_message
from mailslot.core.clock import now
from mailslot.core.cursor import CursorStore
from mailslot.exchange.create import create_exchange
from mailslot.exchange.watch import WATCH_NAMESPACE, mark_all_seen
from mailslot.relay import format_line
from mailslot.relay import init as relay_init

ROUNDS = 200
WARMUP = 10
CLI_ROUNDS = 31  # the first is a warm-up
PEER_POLL = 5.0  # agent-chat wait's default --interval
PEER_CLI_PHASES = 4
# The large inbox: this many entries, all seen, in topics of SEEN_PER_TOPIC, half of them archived
SEEN_ENTRIES = 10_000
SEEN_PER_TOPIC = 50

RAW = r"""
import os, sys, time
from pathlib import Path
from mailslot.core.wait import Watch
log = Path(sys.argv[1]); n = int(sys.argv[2])
out = os.fdopen(1, "w", buffering=1)
seen = 0
with Watch([log]) as w:
    for _ in range(n):
        out.write("armed\n")
        while os.stat(log).st_size <= seen:
            w.wait(30)
        out.write(f"{time.monotonic_ns()}\n")
        seen = os.stat(log).st_size
"""

# The exchange wake's system calls with none of its logic: the entry ``lstat``'d, opened, read
# and closed, then the seen-mark's lock taken, its two names ``lstat``'d, one line appended and
# ``fstat``'d, the lock let go. What the exchange row costs over this is Python, not the disk.
FLOOR = r"""
import fcntl, os, sys, time
from pathlib import Path
from mailslot.core.wait import Watch
topic, state, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
out = os.fdopen(1, "w", buffering=1)
lock, log = str(state / "floor.lock"), str(state / "floor.json")
lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
log_fd = os.open(log, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
with Watch([topic], dot_names=False) as w:
    for _ in range(n):
        out.write("armed\n")
        one = None
        while one is None:
            w.wait(30)
            one = w.take_one()
        path = f"{topic}/{one.name}"
        st = os.lstat(path)
        fd = os.open(path, flags)
        os.read(fd, 65537)
        os.close(fd)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        os.lstat(lock)
        os.lstat(log)
        line = f'{{"add": ["{one.name}"], "meta": {{"marked_ns": {st.st_mtime_ns}}}}}\n'
        os.write(log_fd, line.encode())
        os.fstat(log_fd)
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        out.write(f"{time.monotonic_ns()} 1\n")
"""

EXCHANGE = r"""
import os, sys, time
from pathlib import Path
from mailslot.exchange.layout import load_exchange
from mailslot.exchange.watch import Watcher
ex = load_exchange(Path(sys.argv[1])); n = int(sys.argv[2])
out = os.fdopen(1, "w", buffering=1)
w = Watcher(ex, "olu")
for _ in range(n):
    r = w.watch(30, on_armed=lambda: out.write("armed\n"))
    out.write(f"{time.monotonic_ns()} {len(r.items)}\n")
"""

CHAT = r"""
import os, sys, time
from mailslot import chat
path, n = sys.argv[1], int(sys.argv[2])
out = os.fdopen(1, "w", buffering=1)
with chat.Waiter(path, "bob") as w:
    for _ in range(n):
        out.write("armed\n")
        batch = w.wait(30)
        out.write(f"{time.monotonic_ns()} {len(batch.messages)}\n")
"""

CHAT_CALL = r"""
import os, sys, time
from mailslot import chat
path, n = sys.argv[1], int(sys.argv[2])
out = os.fdopen(1, "w", buffering=1)
for _ in range(n):
    out.write("armed\n")
    batch = chat.wait(path, "bob", timeout=30)
    out.write(f"{time.monotonic_ns()} {len(batch.messages)}\n")
"""

# Round i's message made ready (a temp written; nothing else for an append): the call returned
# makes it visible and gives the ns just before
Fire = Callable[[int, list[str]], Callable[[], int]]


def _entry(body: str) -> bytes:
    at = "2026-11-29T10:00:01Z"
    return f"---\nfrom: claude\nat: {at}\naction: required\n---\n{body}\n".encode()


def _exchange(root: Path, state: Path, seen: int = 0) -> tuple[Path, Fire]:
    """A two-sided exchange whose olu side has seen everything (``seen`` entries besides the
    opening one, in topics of ``SEEN_PER_TOPIC``, every other topic archived); fire renames an
    entry in (its temp written first)."""
    ex = create_exchange(root, ["claude", "olu"], git=False)
    old = _entry("seen before")
    for t in range(0, seen, SEEN_PER_TOPIC):
        done = ex.inbox("olu") / "done" if t // SEEN_PER_TOPIC % 2 else ex.inbox("olu")
        d = done / f"2026-11-28-seen-{t // SEEN_PER_TOPIC:05d}"
        d.mkdir(parents=True)
        for n in range(1, min(SEEN_PER_TOPIC, seen - t) + 1):
            (d / f"{n:04d}-claude.md").write_bytes(old)
    topic = ex.inbox("olu") / "2026-11-29-bench"
    topic.mkdir()
    (topic / "0001-claude.md").write_bytes(_entry("opening"))
    mark_all_seen(ex, "olu", store=CursorStore(WATCH_NAMESPACE, state))
    count = iter(range(2, 10_000))

    def fire(i: int, _: list[str]) -> Callable[[], int]:
        n = next(count)
        tmp = topic / f".incoming-{n}"
        tmp.write_bytes(_entry(f"entry {i}"))
        return lambda: _timed_rename(tmp, topic / f"{n:04d}-claude.md")

    return ex.root, fire


def _chat(tmp: Path, name: str) -> tuple[Path, Fire]:
    """A chat alice and bob joined; fire appends alice's block as a hand agent does."""
    path = chat.new_chat(name, tmp, "alice").path
    chat.join(path, "bob")

    def fire(i: int, _: list[str]) -> Callable[[], int]:
        data = render_message("alice", now(), f"message {i}").encode()
        return lambda: _hand_append(path, data)

    return path, fire


def _relay(root: Path) -> tuple[Path, Fire]:
    """A relay mailbox for w1 and manager; fire appends the manager's reply to w1's open turn
    by hand (one line, as ``relay post`` checks it)."""
    relay_init(root, "w1", "manager")
    asks, inbox = root / "to-manager.md", root / "to-w1.md"

    def fire(i: int, _: list[str]) -> Callable[[], int]:
        def reply() -> int:  # the ask is written once the command runs: read when it blocks
            asked = asks.read_text().splitlines()[-1]  # the open turn: "... id=C<N> T0=..."
            number = asked.split(" id=C", 1)[1].split()[0]
            line = format_line("10:00", "manager", f"id=R{number}", {"T1": 1}, say=f"reply {i}")
            return _hand_append(inbox, f"{line}\n".encode())

        return reply

    return root, fire


def _outbox(root: Path) -> tuple[Path, Fire]:
    """A bus whose consumer is beacon; fire renames an item into outbox/, its bytes fsync'd
    first, as ``outbox put`` publishes one."""
    layout.init(root, consumer="beacon")
    outbox = root / "outbox"
    count = iter(range(1, 10_000))

    def fire(i: int, _: list[str]) -> Callable[[], int]:
        n = next(count)
        tmp = outbox / f".incoming-{n}"
        with tmp.open("wb") as f:
            f.write(f"deliverable {i}\n".encode())
            f.flush()
            os.fsync(f.fileno())
        return lambda: _timed_rename(tmp, outbox / f"{n:06d}-card.txt")

    return root, fire


def _timed_rename(src: Path | str, dst: Path | str) -> int:
    visible = time.monotonic_ns()
    os.rename(src, dst)
    return visible


def _rename(_: int, words: list[str]) -> Callable[[], int]:
    """letterbox's round: its driver wrote the temp before it said ``armed``."""
    return lambda: _timed_rename(words[0], words[1])


class _Waiter:
    def __init__(self, cmd: list[str], fire: Fire, env: dict[str, str]) -> None:
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        assert self.p.stdout is not None
        self.out: IO[str] = self.p.stdout
        self.fire = fire
        self.samples: list[float] = []

    def round(self, i: int) -> None:
        words = self.out.readline().split()
        assert words and words[0] == "armed", words
        visible_now = self.fire(i, words[1:])  # the temp written before the waiter blocks
        wait_blocked(self.p.pid, 5.0)
        time.sleep(0.002)  # blocked in its wait, not between two checks
        visible = visible_now()
        woke = int(self.out.readline().split()[0])
        if i >= WARMUP:
            self.samples.append((woke - visible) / 1e6)


def in_process(tmp: Path) -> list[Result]:
    env = {**os.environ, "MAILSLOT_STATE_DIR": str(tmp / "state")}
    os.environ["MAILSLOT_STATE_DIR"] = env["MAILSLOT_STATE_DIR"]
    log = tmp / "raw.log"
    log.touch()
    n = str(ROUNDS)
    ex_root, ex_fire = _exchange(tmp / "ex", tmp / "state")
    big_root, big_fire = _exchange(tmp / "ex-big", tmp / "state", SEEN_ENTRIES)
    floor_root, floor_fire = _exchange(tmp / "ex-floor", tmp / "state")
    floor_topic = floor_root / "to-olu" / "2026-11-29-bench"
    chat_path, chat_fire = _chat(tmp, "wait")
    call_path, call_fire = _chat(tmp, "wait-call")
    waiters = {
        "raw": _Waiter(
            [sys.executable, "-c", RAW, str(log), n],
            lambda i, _: lambda: _append(log),
            env,
        ),
        "floor": _Waiter(
            [sys.executable, "-c", FLOOR, str(floor_topic), str(tmp / "state"), n],
            floor_fire,
            env,
        ),
        "exchange": _Waiter([sys.executable, "-c", EXCHANGE, str(ex_root), n], ex_fire, env),
        "exchange-big": _Waiter([sys.executable, "-c", EXCHANGE, str(big_root), n], big_fire, env),
        "chat": _Waiter([sys.executable, "-c", CHAT, str(chat_path), n], chat_fire, env),
        "chat-call": _Waiter([sys.executable, "-c", CHAT_CALL, str(call_path), n], call_fire, env),
    }
    pe = peers()
    if pe.python is not None:
        cmd = [str(pe.python), str(PEER_DRIVER), "lb-wait", str(tmp / "letterbox"), n]
        waiters["letterbox"] = _Waiter(cmd, _rename, env)
    try:
        for i in range(ROUNDS):
            for w in waiters.values():
                w.round(i)
        for w in waiters.values():
            w.p.wait(timeout=60)
    finally:  # a round that failed leaves the others blocked in their waits: end them
        for w in waiters.values():
            if w.p.poll() is None:
                w.p.kill()
                w.p.wait()
    ahead = [
        Vs("wait.letterbox", "letterbox Watcher", max_ratio=1.0),
        Vs("wait.raw", "raw inotify", max_ratio=2.0),
    ]
    note = "one process per waiter, served round-robin with the others in this block"
    rows = [
        dist(
            "wait, bare inotify on a file (cross-process, interleaved)",
            waiters["raw"].samples,
            "ms",
            key="wait.raw",
            note="baseline: core.wait.Watch armed once; the kernel's own wake",
        ),
        dist(
            "wait, bare inotify + the exchange wake's system calls (no logic)",
            waiters["floor"].samples,
            "ms",
            key="wait.floor",
            vs=[Vs("wait.raw", "raw inotify")],
            note="an entry renamed in; read, then one line appended under a lock, as a take does",
        ),
        dist(
            "exchange Watcher.watch, visible -> returned (default, cursor saved)",
            waiters["exchange"].samples,
            "ms",
            key="wait.exchange",
            vs=ahead,
            note=note,
        ),
        dist(
            f"exchange Watcher.watch, {SEEN_ENTRIES:,} entries seen in the inbox",
            waiters["exchange-big"].samples,
            "ms",
            key="wait.exchange.big",
            vs=[Vs("wait.exchange", "small inbox", max_ratio=1.5)],
            note=f"{SEEN_ENTRIES // SEEN_PER_TOPIC} topics, half archived; otherwise as above",
        ),
        dist(
            "chat Waiter.wait, visible -> returned (default, stored cursor)",
            waiters["chat"].samples,
            "ms",
            key="wait.chat",
            vs=ahead,
            note=note,
        ),
        dist(
            "chat.wait called per message, visible -> returned (stored cursor)",
            waiters["chat-call"].samples,
            "ms",
            key="wait.chat.call",
            vs=ahead,
            note="a new watch, cursor file and read of the chat on every call",
        ),
    ]
    name = "peer letterbox 1.2.2: Watcher, visible -> event off its queue"
    if "letterbox" in waiters:
        rows.append(
            dist(
                name,
                waiters["letterbox"].samples,
                "ms",
                key="wait.letterbox",
                note="watchdog inotify thread -> asyncio queue; written .json.tmp -> rename",
            )
        )
    else:
        rows.append(pe.na(name, "ms"))
    return rows


def _hand_append(path: Path, data: bytes) -> int:
    """Append ``data`` as an agent following the chat's convention by hand does (``flock``, one
    appending write, unlock); the clock starts at the write, which makes the bytes visible, as
    it starts at the rename for the entries. The writer's own cost is the send rows'."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        visible = time.monotonic_ns()
        os.write(fd, data)
    finally:
        os.close(fd)
    return visible


def _append(log: Path) -> int:
    return _hand_append(log, b"x\n")


def _command(
    cmd: list[str],
    env: dict[str, str],
    fire: Callable[[], Callable[[], int]],
    phase: float = 0.0,
) -> tuple[float, float]:
    """Start ``cmd``, let it block, make a message visible (its temp written before the command
    is seen blocked): (ms to first output, ms to exit)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    assert p.stdout is not None
    visible_now = fire()
    wait_blocked(p.pid, 10.0)
    time.sleep(0.002 + phase)
    visible = visible_now()
    p.stdout.readline()
    first = time.monotonic_ns()
    p.stdout.read()
    # A blocking waitpid returns as the kernel reports the exit; ``wait(timeout=...)`` polls
    # with sleeps of 0.5 ms and more, which would be timed as exit. The timer only ends a hang.
    stuck = threading.Timer(60, p.kill)
    stuck.start()
    rc = p.wait()
    gone = time.monotonic_ns()
    stuck.cancel()
    assert rc == 0, (cmd, rc)
    return (first - visible) / 1e6, (gone - visible) / 1e6


# The blocking commands timed end to end: key -> what the rows call it.
COMMANDS = {
    "watch": "mailslot exchange watch",
    "wait": "mailslot chat wait",
    "ask": "mailslot relay ask",
    "take": "mailslot outbox take --wait",
}


def commands(tmp: Path) -> list[Result]:
    state = tmp / "cli-state"
    env = {**os.environ, "MAILSLOT_STATE_DIR": str(state)}
    os.environ["MAILSLOT_STATE_DIR"] = str(state)
    exe = mailslot_exe()
    ex_root, ex_fire = _exchange(tmp / "cli-ex", state)
    chat_path, chat_fire = _chat(tmp, "cli-wait")
    relay_root, relay_fire = _relay(tmp / "cli-relay")
    bus_root, bus_fire = _outbox(tmp / "cli-bus")
    runs: dict[str, tuple[list[str], Fire]] = {
        "watch": (
            [exe, "--root", str(ex_root), "--as", "olu", "exchange", "watch", "--timeout", "30"],
            ex_fire,
        ),
        "wait": (
            [exe, "chat", "wait", str(chat_path), "--as", "bob", "--timeout", "30"],
            chat_fire,
        ),
        "ask": (
            [exe, "--root", str(relay_root), "--as", "w1", "relay", "ask", "--timeout", "30", "q"],
            relay_fire,
        ),
        "take": (
            [exe, "--root", str(bus_root), "--as", "beacon", "outbox", "take", "--wait", "30"],
            bus_fire,
        ),
    }
    got: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in (*COMMANDS, "peer")}
    pe = peers()
    peer_cmd: list[str] = []
    if pe.bin is not None:
        ac_root = tmp / "agent-chat"
        init = [str(pe.bin / "agent-chat"), "--root", str(ac_root), "init", "bench"]
        subprocess.run([*init, "--members", "claude,olu"], check=True, capture_output=True)
        channel = ac_root / "bench"
        peer_cmd = [str(pe.bin / "agent-chat"), "--root", str(ac_root), "wait", "bench"]
        peer_cmd += ["--as", "olu", "--timeout", "30"]
        seq = iter(range(1, 10_000))

        def peer_fire() -> Callable[[], int]:
            n = next(seq)
            src = channel / f".incoming-{n}"
            src.write_text(
                f"---\nseq: {n}\nfrom: claude\nto: all\nchannel: bench\n"
                f"ts: 2026-11-29T10:00:00+00:00\nstatus: discussion\ntitle: bench\n---\n"
                f"message {n}\n"
            )
            return lambda: _timed_rename(src, channel / f"{n:04d}-claude-bench.md")

    phases = iter(range(PEER_CLI_PHASES))
    for i in range(CLI_ROUNDS):
        for key, (cmd, fire) in runs.items():
            first, gone = _command(cmd, env, lambda i=i, fire=fire: fire(i, []))  # type: ignore[misc]
            if i:
                got[key][0].append(first)
                got[key][1].append(gone)
        if peer_cmd and i % 7 == 1 and (k := next(phases, None)) is not None:
            first, gone = _command(peer_cmd, env, peer_fire, k / PEER_CLI_PHASES * PEER_POLL)
            got["peer"][0].append(first)
            got["peer"][1].append(gone)
    rows = []
    for key, what in COMMANDS.items():
        shown, exits = got[key]
        peer_vs = [Vs(f"cmd.peer.{p}", "agent-chat wait") for p in ("first", "exit")]
        rows.append(
            dist(
                f"{what} command: visible -> first output",
                shown,
                "ms",
                key=f"cmd.{key}.first",
                vs=peer_vs[:1] if key in ("watch", "wait") else [],
                note="started, left to block (wchan), then the message lands",
            )
        )
        rows.append(
            dist(
                f"{what} command: visible -> process exit",
                exits,
                "ms",
                key=f"cmd.{key}.exit",
                target="p50 <= 3 ms",
                ok=bool(exits) and sorted(exits)[len(exits) // 2] <= 3.0,
                vs=peer_vs[1:] if key in ("watch", "wait") else [],
                note="output flushed, state written, then the exit the caller waits for",
            )
        )
    for part, label in (("first", "first output"), ("exit", "process exit")):
        name = f"peer agent-chat 0.7.5: wait command, visible -> {label}"
        if peer_cmd:
            rows.append(
                dist(
                    name,
                    got["peer"][0 if part == "first" else 1],
                    "ms",
                    key=f"cmd.peer.{part}",
                    note=f"sleep-poll every {PEER_POLL:g} s (its default); phases spread evenly",
                )
            )
        else:
            rows.append(pe.na(name, "ms"))
    return rows


def run(tmp: Path) -> list[Result]:
    try:
        return in_process(tmp) + commands(tmp)
    finally:
        os.environ.pop("MAILSLOT_STATE_DIR", None)

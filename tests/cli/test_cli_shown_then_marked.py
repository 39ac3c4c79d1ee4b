"""Blocking readers take only what they showed: real processes, interrupted between the two.

``exchange watch``, ``chat wait``, ``relay ask`` and ``outbox take`` write their output first and
record the take after (a seen-mark, a cursor, a delivery record; for the outbox the move comes
first and is undone). Whatever lands in between -- a reader that closed the pipe, Ctrl-C while
the write is stalled on a full pipe, SIGKILL after the output, Ctrl-C or SIGTERM after it --
the next reader gets everything the last one did not show; at worst something shown twice,
never something lost. ``MAILSLOT_TEST_PAUSE_AFTER_OUTPUT`` holds a process between its output
and its record so a test can strike exactly there.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from cli_helpers import DEADLINE, in_kernel_wait, spawn, until

from mailslot.chat import join, new_chat, say, wait
from mailslot.exchange.create import create_exchange
from mailslot.exchange.entries import send
from mailslot.exchange.layout import Exchange
from mailslot.relay import init as relay_init
from mailslot.relay import reply as relay_reply

pytestmark = pytest.mark.slow

PAUSE = {"MAILSLOT_TEST_PAUSE_AFTER_OUTPUT": str(DEADLINE)}
PAUSE_LINE = b"mailslot: paused between output and record (test hook)\n"
BIG = "x" * 60_000  # four of these overflow a pipe (64 KiB), so the write stalls


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mailslot", *args]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(*args), capture_output=True, text=True, timeout=DEADLINE)


def _pipe_full(proc: subprocess.Popen[bytes]) -> bool:
    """Its stdout pipe holds all it can: the writer is stalled inside its output."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    return bool(queued >= fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))


def _paused(proc: subprocess.Popen[bytes]) -> None:
    """Wait until the process is between its output and its record (the test hook says so),
    or has ended (a build without the hook: what it left behind is asserted next)."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line in (PAUSE_LINE, b""), line + proc.stderr.read()


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=DEADLINE)
    return proc.returncode, err.decode()


# -- exchange watch ------------------------------------------------------------------------


@pytest.fixture
def ex(tmp_path: Path) -> Exchange:
    return create_exchange(tmp_path / "x", ["claude", "olu"], git=False)


def _watch(ex: Exchange, *more: str) -> list[str]:
    return ["--root", str(ex.root), "--as", "claude", "exchange", "watch", *more]


def _delivered(ex: Exchange) -> list[str]:
    """The keys the next watch delivers (nothing: [])."""
    r = _run(*_watch(ex, "--timeout", "0", "--json"))
    assert r.returncode in (0, 3), r.stderr
    return [i["key"] for i in json.loads(r.stdout)["items"]]


def _send(ex: Exchange, n: int, body: str = "hello") -> list[str]:
    keys = []
    for _ in range(n):
        r = send(ex, "olu", "gate", "fyi", body)
        keys.append(f"{r.topic}/{r.relpath.rsplit('/', 1)[1].removesuffix('.md')}")
    return keys


def test_watch_into_a_pipe_closed_early_marks_nothing(ex: Exchange, tmp_path: Path) -> None:
    keys = _send(ex, 4, BIG)
    script = f"{' '.join(map(repr, _cmd(*_watch(ex, '--json', '--timeout', '0'))))} | head -c 1"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=DEADLINE)
    assert r.stdout == "{"
    assert _delivered(ex) == keys


def test_watch_into_a_pipe_nobody_reads_ends_after_its_timeout_and_marks_nothing(
    ex: Exchange,
) -> None:
    keys = _send(ex, 4, BIG)  # more than the pipe holds
    r_fd, w_fd = os.pipe()  # read by nobody until the command has ended
    started = time.monotonic()
    proc = subprocess.Popen(
        _cmd(*_watch(ex, "--json", "--timeout", "1")), stdout=w_fd, stderr=subprocess.PIPE
    )
    os.close(w_fd)
    try:
        code, err = _finish(proc)
    finally:
        proc.kill()  # a watch still held by the pipe fails the test without staying behind
        os.close(r_fd)
    assert code == 1, err
    assert time.monotonic() - started < DEADLINE  # not held by the pipe
    assert err.startswith("mailslot: error:") and "past the timeout" in err, err
    assert "nothing was marked read or seen" in err, err
    assert _delivered(ex) == keys


def test_watch_whose_reader_went_away_marks_nothing(ex: Exchange) -> None:
    proc = spawn(*_watch(ex, "--timeout", "600"))
    until(lambda: in_kernel_wait(proc), proc)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before anything arrives: the write is EPIPE
    keys = _send(ex, 1)
    code, err = _finish(proc)
    assert code == 141 and err == ""  # a closed pipe ends it like SIGPIPE: 141, silently
    assert _delivered(ex) == keys


def test_ctrl_c_while_the_output_is_stalled_marks_nothing(ex: Exchange) -> None:
    keys = _send(ex, 4, BIG)
    proc = spawn(*_watch(ex, "--json", "--timeout", "600"))
    until(lambda: _pipe_full(proc), proc)
    proc.send_signal(signal.SIGINT)
    code, err = _finish(proc)
    assert code == 130 and err == "mailslot: interrupted\n"
    assert _delivered(ex) == keys


def _paused_after_output(ex: Exchange) -> tuple[subprocess.Popen[bytes], list[str], dict]:
    keys = _send(ex, 2)
    proc = spawn(*_watch(ex, "--json", "--timeout", "600"), env=PAUSE)
    assert proc.stdout is not None
    shown = json.loads(proc.stdout.readline())  # the whole output, flushed, before any mark
    _paused(proc)
    return proc, keys, shown


def test_killed_after_the_output_redelivers(ex: Exchange) -> None:
    proc, keys, shown = _paused_after_output(ex)
    assert [i["key"] for i in shown["items"]] == keys
    proc.kill()
    proc.communicate(timeout=DEADLINE)
    assert _delivered(ex) == keys  # shown twice, never lost


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_after_the_output_finishes_the_mark(ex: Exchange, sig: int, code: int) -> None:
    proc, keys, shown = _paused_after_output(ex)
    assert [i["key"] for i in shown["items"]] == keys
    proc.send_signal(sig)
    got, err = _finish(proc)
    assert got == code, err
    assert _delivered(ex) == []  # shown once, marked once
    more = _send(ex, 1)
    assert _delivered(ex) == more


@pytest.mark.parametrize("damage", [b"{not json", b'{"seen": 5}', b"\xff\xfe", b""])
def test_an_unreadable_seen_mark_warns_and_delivers_everything(ex: Exchange, damage: bytes) -> None:
    keys = _send(ex, 2)
    assert _delivered(ex) == keys
    marks = list((Path(os.environ["XDG_STATE_HOME"]) / "mailslot/cursors").rglob("*.json"))
    assert len(marks) == 1
    marks[0].write_bytes(damage)
    r = _run(*_watch(ex, "--timeout", "0"))
    assert r.returncode == 0, r.stderr
    assert "mailslot: warning: seen-mark" in r.stderr and "Traceback" not in r.stderr
    assert all(k.split("/")[1] in r.stdout for k in keys)
    assert _delivered(ex) == []  # the mark was written afresh


# -- chat wait -----------------------------------------------------------------------------


def _chat(tmp_path: Path, *bodies: str) -> Path:
    path = new_chat("release", tmp_path, "ana").path
    join(path, "bob")
    wait(path, "ana", timeout=0)  # ana has read bob's joining message
    for body in bodies:
        say(path, body, "bob")
    return path


def _chat_wait(path: Path, *more: str) -> list[str]:
    return ["--as", "ana", "chat", "wait", str(path), "--json", *more]


def _waited(path: Path) -> list[str]:
    r = _run(*_chat_wait(path, "--timeout", "0"))
    assert r.returncode in (0, 3), r.stderr
    return [m["body"] for m in json.loads(r.stdout)["messages"]]


def test_chat_wait_whose_reader_went_away_keeps_the_cursor(tmp_path: Path) -> None:
    path = _chat(tmp_path)
    proc = spawn(*_chat_wait(path, "--timeout", "600"))
    until(lambda: in_kernel_wait(proc), proc)
    assert proc.stdout is not None
    proc.stdout.close()
    say(path, "are we shipping?", "bob")
    code, err = _finish(proc)
    assert code == 141 and err == ""  # a closed pipe ends it like SIGPIPE: 141, silently
    assert _waited(path) == ["are we shipping?"]


def test_chat_wait_interrupted_in_a_stalled_write_keeps_the_cursor(tmp_path: Path) -> None:
    path = _chat(tmp_path, *(f"{n}{BIG}" for n in range(4)))
    proc = spawn(*_chat_wait(path, "--timeout", "600"))
    until(lambda: _pipe_full(proc), proc)
    proc.send_signal(signal.SIGINT)
    code, _ = _finish(proc)
    assert code == 130
    assert [b[:1] for b in _waited(path)] == ["0", "1", "2", "3"]


def test_chat_wait_killed_after_the_output_redelivers(tmp_path: Path) -> None:
    path = _chat(tmp_path, "one", "two")
    proc = spawn(*_chat_wait(path, "--timeout", "600"), env=PAUSE)
    assert proc.stdout is not None
    assert [m["body"] for m in json.loads(proc.stdout.readline())["messages"]] == ["one", "two"]
    _paused(proc)
    proc.kill()
    proc.communicate(timeout=DEADLINE)
    assert _waited(path) == ["one", "two"]


def test_chat_wait_interrupted_after_the_output_moves_the_cursor(tmp_path: Path) -> None:
    path = _chat(tmp_path, "one")
    proc = spawn(*_chat_wait(path, "--timeout", "600"), env=PAUSE)
    assert proc.stdout is not None
    assert [m["body"] for m in json.loads(proc.stdout.readline())["messages"]] == ["one"]
    _paused(proc)
    proc.send_signal(signal.SIGINT)
    code, _ = _finish(proc)
    assert code == 130
    assert _waited(path) == []


# -- relay ask, outbox take ----------------------------------------------------------------


def test_relay_ask_whose_reader_went_away_leaves_the_reply_to_recover(tmp_path: Path) -> None:
    mb = tmp_path / "mb"
    relay_init(mb, "w1", "manager")
    proc = spawn(
        "--root", str(mb), "--as", "w1", "relay", "ask", "ship friday?", "--timeout", "600"
    )
    until(lambda: "id=C01" in (mb / "to-manager.md").read_text(), proc)
    assert proc.stdout is not None
    proc.stdout.close()
    relay_reply(mb, "manager", "C01", "Yes, friday.")
    code, err = _finish(proc)
    assert code == 141 and err == ""  # a closed pipe ends it like SIGPIPE: 141, silently
    r = _run("--root", str(mb), "--as", "w1", "relay", "recover", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["say"] == "Yes, friday."


def test_outbox_take_whose_reader_went_away_puts_the_item_back(tmp_path: Path) -> None:
    bus = tmp_path / "shared"
    assert _run("bus", "init", str(bus), "--consumer", "beacon").returncode == 0
    take = ["--root", str(bus), "--as", "beacon", "outbox", "take"]
    proc = spawn(*take, "--wait", "600")
    until(lambda: in_kernel_wait(proc), proc)
    assert proc.stdout is not None
    proc.stdout.close()
    card = tmp_path / "card.txt"
    card.write_text("the card\n")
    put = _run("--root", str(bus), "--as", "lantern", "outbox", "put", str(card), "--note", "n")
    assert put.returncode == 0, put.stderr
    code, err = _finish(proc)
    assert code == 141 and err == ""  # a closed pipe ends it like SIGPIPE: 141, silently
    again = _run(*take, "--json")
    assert again.returncode == 0, again.stderr
    item = json.loads(again.stdout)
    assert item["note"] == "n" and Path(item["abspath"]).read_text() == "the card\n"
    assert not list((bus / "outbox/taken").glob("*.txt.*"))  # taken once, under its own name

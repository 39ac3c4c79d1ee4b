"""A command started with standard output or input closed (``>&-``, ``<&-``: a daemon's, a
cron job's) fails with one line instead of passing for done: a waiting reader that shows nothing
marks nothing seen, a take that shows nothing takes nothing, and a send with no input writes
nothing. Both faces, the click-free one (``python -m mailslot``) and click's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mailslot import chat
from mailslot.bus import layout, outbox
from mailslot.exchange.create import create_exchange
from mailslot.exchange.entries import send
from mailslot.exchange.layout import load_exchange

FACES = {
    "fast": ["-m", "mailslot"],
    "click": ["-c", "import sys\nfrom mailslot.cli import main\nmain(sys.argv[1:])"],
}


def _run(
    tmp_path: Path, face: str, args: list[str], close: int
) -> subprocess.CompletedProcess[str]:
    """``mailslot ARGS`` with descriptor ``close`` (0 or 1) closed before it starts."""
    env = {**os.environ, "MAILSLOT_STATE_DIR": str(tmp_path / "state")}
    env.pop("COLUMNS", None)
    r, w = os.pipe()  # stands in for the closed one until the child closes it
    try:
        return subprocess.run(
            [sys.executable, *FACES[face], *args],
            cwd=tmp_path,
            env=env,
            stdin=r if close == 0 else subprocess.DEVNULL,
            stdout=w if close == 1 else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            preexec_fn=lambda: os.close(close),
        )
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("face", FACES)
def test_a_watch_with_stdout_closed_marks_nothing_seen(tmp_path: Path, face: str) -> None:
    ex = create_exchange(tmp_path / "ex", ["claude", "olu"], git=False)
    send(load_exchange(ex.root), "claude", "plan", "fyi", "the plan")
    watch = ["--root", "ex", "--as", "olu", "exchange", "watch", "--timeout", "0"]
    r = _run(tmp_path, face, watch, close=1)
    assert (r.returncode, r.stderr) == (
        1,
        "mailslot: error: standard output is closed; nothing was shown\n",
    )
    again = _run(tmp_path, face, [*watch, "--json"], close=0)
    assert again.returncode == 0 and "plan" in again.stdout, again.stderr


@pytest.mark.parametrize("face", FACES)
def test_a_chat_wait_with_stdout_closed_moves_no_cursor(tmp_path: Path, face: str) -> None:
    state = tmp_path / "state"
    path = chat.new_chat("quick", tmp_path, "alice", state=state).path
    chat.join(path, "bob", state=state)
    chat.say(path, "are you there?", "alice", state=state)
    wait = ["chat", "wait", path.name, "--as", "bob", "--timeout", "0"]
    r = _run(tmp_path, face, wait, close=1)
    assert r.returncode == 1 and "standard output is closed" in r.stderr, r.stderr
    again = _run(tmp_path, face, wait, close=0)
    assert again.returncode == 0 and "are you there?" in again.stdout, again.stderr


@pytest.mark.parametrize("face", FACES)
def test_a_take_with_stdout_closed_takes_nothing(tmp_path: Path, face: str) -> None:
    bus = tmp_path / "shared"
    layout.init(bus, consumer="beacon")
    (tmp_path / "card.txt").write_text("the card\n")
    item = outbox.put(bus, "lantern", tmp_path / "card.txt", note="a card")
    r = _run(tmp_path, face, ["--root", "shared", "--as", "beacon", "outbox", "take"], close=1)
    assert r.returncode == 1 and "standard output is closed" in r.stderr, r.stderr
    assert [i.name for i in outbox.list_items(bus)] == [item.name]
    assert outbox.list_items(bus, taken=True) == []


@pytest.mark.parametrize("face", FACES)
def test_a_send_with_stdin_closed_writes_nothing(tmp_path: Path, face: str) -> None:
    ex = create_exchange(tmp_path / "ex", ["claude", "olu"], git=False)
    before = sorted(p.name for p in ex.root.rglob("*"))
    base = ["--root", "ex", "--as", "claude", "exchange", "send", "--topic", "t", "--action", "fyi"]
    no_body = _run(tmp_path, face, base, close=0)
    assert no_body.returncode == 2 and "give BODY as an argument" in no_body.stderr
    dash = _run(tmp_path, face, [*base, "-"], close=0)
    assert (dash.returncode, dash.stderr) == (
        1,
        "mailslot: error: standard input is closed; give BODY as an argument\n",
    )
    assert "Traceback" not in no_body.stderr + dash.stderr
    assert sorted(p.name for p in ex.root.rglob("*")) == before


@pytest.mark.parametrize("face", FACES)
def test_a_put_from_stdin_closed_puts_nothing(tmp_path: Path, face: str) -> None:
    bus = tmp_path / "shared"
    layout.init(bus, consumer="beacon")
    put = ["--root", "shared", "--as", "lantern", "outbox", "put", "-", "--name", "card.txt"]
    r = _run(tmp_path, face, put, close=0)
    assert (r.returncode, r.stderr) == (1, "mailslot: error: standard input is closed\n")
    assert outbox.list_items(bus) == []

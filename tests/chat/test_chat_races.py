"""Real processes racing on one chat file: mailslot writers, hand-run bash writers, waiters."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from chat_helpers import BASH_APPEND, bash_write_started

from mailslot import chat
from mailslot.chat.format import parse_messages

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent(
    """
    import sys, time
    from mailslot import chat
    path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(n):
        lines = [f"{name}-{i}-line-{k} " + "x" * 60 for k in range(40)]
        chat.say(path, f"{name} #{i}\\n" + "\\n".join(lines), name)
        time.sleep(0.002)
    """
)

# The hand-run agent's writing procedure in a loop, with a shorter spin (0.01 s instead of 0.1 s).
BASH_WRITER = (
    BASH_APPEND
    + r"""
CHAT_FILE="$1"; NAME="$2"; N="$3"
PAD=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
for i in $(seq 0 $((N-1))); do
  BODY=$(for k in $(seq 0 39); do printf '%s-%s-line-%s %s\n' "$NAME" "$i" "$k" "$PAD"; done)
  bash_append "$CHAT_FILE" "$NAME" "$NAME #$i
$BODY" 0.01
done
"""
)


def expected_body(name: str, i: int) -> str:
    lines = [f"{name}-{i}-line-{k} " + "x" * 60 for k in range(40)]
    return f"{name} #{i}\n" + "\n".join(lines)


def test_many_concurrent_writers_never_interleave(chat_file: Path, tmp_path: Path) -> None:
    writers, per = 8, 25
    names = [f"py{w}" for w in range(writers)]
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(chat_file), name, str(per)])
        for name in names
    ]
    bash = shutil.which("bash")
    if bash:  # hand-run bash agents share the file (they only know the mkdir lock)
        script = tmp_path / "bash-writer.sh"
        script.write_text(BASH_WRITER)
        for b in range(2):
            names.append(f"Bash{b}-4829{b}")
            procs.append(subprocess.Popen([bash, str(script), str(chat_file), names[-1], str(per)]))
    for p in procs:
        assert p.wait(timeout=240) == 0
    messages, end = parse_messages(chat_file.read_bytes())
    assert end == chat_file.stat().st_size
    assert len(messages) == 1 + per * len(names)
    for name in names:
        mine = [m for m in messages if m.sender == name]
        assert [m.body for m in mine] == [expected_body(name, i) for i in range(per)]
        assert all(m.at is not None for m in mine)  # date -Iseconds stamps parse too
    assert not Path(f"{chat_file}.lock").exists()


WAITER = textwrap.dedent(
    """
    import json, sys
    from mailslot import chat
    path, n = sys.argv[1], int(sys.argv[2])
    got = []
    while len(got) < n:
        got += [m.body for m in chat.wait(path, "bob", timeout=60).messages]
    print(json.dumps(got))
    """
)


def test_a_waiter_in_another_process_gets_every_message_once(chat_file: Path) -> None:
    chat.join(chat_file, "bob")  # bob's cursor exists before any of the writes below
    n = 60
    p = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(chat_file), str(n)], stdout=subprocess.PIPE, text=True
    )
    for i in range(n):  # no pacing: writes land before, during and after each wait
        chat.say(chat_file, f"m{i}", "alice")
        if i % 7 == 0:
            chat.say(chat_file, f"own {i}", "bob")  # bob's own lines are never delivered to him
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0
    assert json.loads(out) == [f"m{i}" for i in range(n)]


def test_a_mailslot_waiter_wakes_for_a_hand_run_bash_agent(chat_file: Path) -> None:
    chat.join(chat_file, "bob")
    env = {"TZ": "Asia/Kolkata"}  # date -Iseconds writes +05:30
    p = bash_write_started(chat_file, "Kiran-48291", "Hand-run agent here, by hand.", env=env)
    batch = chat.wait(chat_file, "bob", timeout=60)
    assert p.wait(timeout=60) == 0
    [m] = batch.messages
    assert (m.sender, m.body) == ("Kiran-48291", "Hand-run agent here, by hand.")
    assert m.time_raw.endswith("+05:30") and m.at is not None
    assert m.to_json()["time"].endswith("Z")  # read back in UTC
    assert chat.status(chat_file).participants == ["alice", "bob", "Kiran-48291"]


def test_a_lock_left_by_a_dead_bash_agent_is_reported_not_broken(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mailslot.chat import room
    from mailslot.core.errors import LockBusy

    Path(f"{chat_file}.lock").mkdir()  # a writer died between mkdir and rmdir
    monkeypatch.setattr(room, "LOCK_WAIT_SECONDS", 0.2)
    before = chat_file.read_bytes()
    with pytest.raises(LockBusy, match="rmdir"):
        chat.say(chat_file, "anyone?", "alice")
    assert chat_file.read_bytes() == before and Path(f"{chat_file}.lock").is_dir()


HOLD_CHAT_LOCK = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mailslot.chat import room
    with room._mkdir_lock(Path(sys.argv[1])):
        open(sys.argv[2], "w").close()
        time.sleep(60)
    """
)


def test_a_lock_left_by_a_killed_mailslot_writer_is_broken_by_the_next_say(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os
    import time

    from mailslot.chat import room

    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_CHAT_LOCK, str(chat_file), str(ready)], env=env
    )
    while not ready.exists():
        assert holder.poll() is None
        time.sleep(0.005)
    holder.kill()  # SIGKILL while it holds the mkdir lock
    holder.wait(timeout=30)
    assert Path(f"{chat_file}.lock").is_dir()
    monkeypatch.setattr(room, "LOCK_WAIT_SECONDS", 5.0)  # well under the 30 s it waited before
    chat.say(chat_file, "still here", "alice")
    assert [m.body for m in chat.read(chat_file).messages][-1] == "still here"
    assert not Path(f"{chat_file}.lock").exists()

"""A writer SIGKILLed inside its append leaves no message: the fragment is cut out, not delivered.

The kill is real: a ``mailslot chat say`` process dies by SIGKILL in the middle of writing its
block, leaving half of it in the file (and seed 002's ``FILE.lock`` directory behind, which the
human removes as the lock error says).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mailslot import chat
from mailslot.chat import room
from mailslot.core.errors import LockBusy

BIG = "the long plan, " * 2000  # a 30 KB message: its write is the first large one


def test_a_message_torn_by_a_kill_is_never_delivered(
    chat_file: Path, killed_in_write, run_cli
) -> None:
    chat.join(chat_file, "bob")
    before = chat_file.stat().st_size
    killed_in_write("chat", "say", str(chat_file), BIG, "--as", "alice", at_bytes=16384)
    assert chat_file.stat().st_size > before  # half of alice's block is in the file
    os.rmdir(f"{chat_file}.lock")  # the dead writer's seed lock; the lock error says to remove it

    # meanwhile readers see the chat as it was before the torn block
    assert [m.sender for m in chat.read(chat_file).messages] == ["alice", "bob"]

    # the next writer's block follows the fragment: it must not complete it into a message
    r = run_cli("chat", "say", str(chat_file), "after the crash", "--as", "bob")
    assert r.returncode == 0, r.stderr
    got = json.loads(run_cli("chat", "read", str(chat_file), "--json").stdout)["messages"]
    assert [(m["from"], m["body"]) for m in got][1:] == [
        ("bob", got[1]["body"]),
        ("bob", "after the crash"),
    ]
    assert not any(BIG[:100] in m["body"] for m in got)

    # the fragment is kept aside and the status names it
    torn = Path(f"{chat_file}.torn")
    assert BIG[:1000] in torn.read_text()
    st = json.loads(run_cli("chat", "status", str(chat_file), "--json").stdout)
    assert st["torn"] == {"path": str(torn), "size": torn.stat().st_size}
    text = run_cli("chat", "status", str(chat_file)).stdout
    assert f"TORN: {torn.stat().st_size} bytes" in text and str(torn) in text
    # no sidecar is left once repaired
    assert [n for n in os.listdir(chat_file.parent) if n.endswith(".intent")] == []


def test_a_whole_message_leaves_no_sidecar_and_no_torn_file(chat_file: Path) -> None:
    chat.say(chat_file, BIG, "alice")
    assert sorted(os.listdir(chat_file.parent)) == [chat_file.name]
    assert chat.status(chat_file).torn is None


# Seed 002's writing procedure for one message: spin on the mkdir lock, `cat >>`, rmdir.
SEED_SAY = r"""
CHAT_FILE="$1"
while ! mkdir "$CHAT_FILE.lock" 2>/dev/null; do sleep 0.1; done
cat >> "$CHAT_FILE" <<EOF

---MSG---
FROM: Kiran-48291
TIME: $(date -Iseconds)
---
Hand-run agent, waiting on the lock.
EOF
rmdir "$CHAT_FILE.lock"
"""


def test_a_bash_agent_that_was_waiting_on_the_dead_writers_lock_keeps_its_message(
    chat_file: Path, killed_in_write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bash = shutil.which("bash")
    if not bash:
        pytest.skip("bash not installed")
    chat.join(chat_file, "bob")
    killed_in_write("chat", "say", str(chat_file), BIG, "--as", "alice", at_bytes=16384)
    script = tmp_path / "seed-say.sh"
    script.write_text(SEED_SAY)
    agent = subprocess.Popen([bash, str(script), str(chat_file)])  # spins on the dead lock

    monkeypatch.setattr(room, "LOCK_WAIT_SECONDS", 0.2)
    with pytest.raises(LockBusy, match="rmdir"):  # the next mailslot writer finds the lock held
        chat.say(chat_file, "anyone?", "carol")
    os.rmdir(f"{chat_file}.lock")  # as the error says; the waiting agent goes at once
    assert agent.wait(timeout=60) == 0

    said = "Hand-run agent, waiting on the lock."
    assert [m.body for m in chat.read(chat_file).messages][-1] == said  # readers see it
    chat.say(chat_file, "after the crash", "bob")
    bodies = [m.body for m in chat.read(chat_file).messages]
    assert bodies[-2:] == [said, "after the crash"] and bodies.count(said) == 1
    torn = Path(f"{chat_file}.torn").read_text()
    assert BIG[:1000] in torn and said not in torn  # only the fragment is kept aside


@pytest.mark.parametrize("next_one", ["read", "say"])
def test_messages_bash_agents_append_after_a_torn_block_are_kept(
    chat_file: Path, killed_in_write, run_cli, tmp_path: Path, next_one: str
) -> None:
    bash = shutil.which("bash")
    if not bash:
        pytest.skip("bash not installed")
    chat.join(chat_file, "bob")
    killed_in_write("chat", "say", str(chat_file), BIG, "--as", "alice", at_bytes=16384)
    os.rmdir(f"{chat_file}.lock")  # the dead writer's seed lock, removed by hand
    script = tmp_path / "seed-say.sh"
    script.write_text(SEED_SAY)
    for _ in range(2):  # two hand-run agents follow the procedure before any mailslot writer
        subprocess.run([bash, str(script), str(chat_file)], check=True, timeout=60)

    said = "Hand-run agent, waiting on the lock."
    if next_one == "say":
        r = run_cli("chat", "say", str(chat_file), "after the crash", "--as", "bob")
        assert r.returncode == 0, r.stderr
    got = json.loads(run_cli("chat", "read", str(chat_file), "--json").stdout)["messages"]
    bodies = [(m["from"], m["body"]) for m in got][2:]
    expected = [("Kiran-48291", said)] * 2
    assert bodies == expected + ([("bob", "after the crash")] if next_one == "say" else [])
    torn = Path(f"{chat_file}.torn").read_text()
    assert BIG[:1000] in torn and said not in torn and torn.count("--- torn append") == 1
    assert [n for n in os.listdir(chat_file.parent) if n.endswith((".intent", ".repair"))] == []

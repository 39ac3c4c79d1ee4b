"""Entries written on one host appear, whole and once, on the other."""

from __future__ import annotations

from pathlib import Path

from bridge_helpers import wait_for


def test_an_entry_sent_on_a_appears_on_b_byte_for_byte(pair) -> None:
    rel = pair.a.send("a", "hello", "Please look at the gate bug.", action="required")
    assert rel.startswith("to-b/") and rel.endswith("/0001-a.md")
    original = (pair.a.root / rel).read_bytes()
    wait_for(lambda: (pair.b.root / rel).exists(), what="the entry on b")
    assert (pair.b.root / rel).read_bytes() == original
    # b's own tools read it as an entry of the topic
    topic = rel.split("/")[1]
    assert b"gate bug" in (pair.b.root / "to-b" / topic / "0001-a.md").read_bytes()


def test_entries_and_state_travel_both_ways_and_never_echo(pair) -> None:
    first = pair.a.send("a", "both", "from a")
    wait_for(lambda: (pair.b.root / first).exists(), what="a's entry on b")
    second = pair.b.send("b", "both", "from b")
    assert second.endswith("/0002-b.md")  # numbering saw a's entry, materialised on b
    wait_for(lambda: (pair.a.root / second).exists(), what="b's entry on a")
    topic = first.split("/")[1]
    from bridge_helpers import cli

    cli("--root", str(pair.b.root), "--as", "b", "exchange", "state", topic, "in-progress")
    state_b = pair.b.root / "to-a" / topic / "STATE.md"
    wait_for(
        lambda: (
            (pair.a.root / "to-a" / topic / "STATE.md").exists()
            and (pair.a.root / "to-a" / topic / "STATE.md").read_bytes() == state_b.read_bytes()
        ),
        what="b's STATE.md on a",
    )
    wait_for(lambda: pair.a.files() == pair.b.files(), what="identical trees")
    assert pair.a.status()["counts"]["published"] >= 1


def test_status_and_doctor_say_what_the_bridge_is_doing(pair) -> None:
    import json

    from bridge_helpers import cli

    rel = pair.a.send("a", "health", "hello")
    wait_for(lambda: (pair.b.root / rel).exists(), what="the entry on b")

    def settled() -> bool:
        out = cli("bridge", "status", "--dir", str(pair.b.dir), "--json").stdout
        peer = json.loads(out)["peers"]["a"]
        return peer.get("link") == "up" and peer.get("pending_in") == 0

    wait_for(settled, what="link up and nothing pending in status")
    status = json.loads(cli("bridge", "status", "--dir", str(pair.b.dir), "--json").stdout)
    assert status["running"] and status["peers"]["a"]["pending_in"] == 0
    doc = cli("bridge", "doctor", "--dir", str(pair.b.dir), "--json")
    checks = {c["check"]: c["status"] for c in json.loads(doc.stdout)["checks"]}
    assert checks["bridge"] == "ok" and checks["peer:a"] == "ok" and checks["exchange:ex"] == "ok"
    pair.b.stop()
    pair.proxy.cut()
    import time

    time.sleep(5.5)  # the status file goes stale: nobody is running
    down = cli("bridge", "doctor", "--dir", str(pair.b.dir), check=False)
    assert down.returncode == 1 and "FAIL bridge: not running" in down.stdout
    text = cli("bridge", "status", "--dir", str(pair.b.dir)).stdout
    assert "NOT RUNNING" in text


def test_different_bytes_under_one_name_become_a_conflict_file_never_an_overwrite(pair) -> None:
    import json

    from bridge_helpers import cli

    pair.proxy.cut()
    rel = pair.a.send("a", "clash", "the real entry from a")
    # on b someone writes a's outbox by hand, under the same name, other bytes
    forged = pair.b.root / rel
    forged.parent.mkdir(parents=True, exist_ok=True)
    forged.write_bytes(b"---\nfrom: a\nat: 2026-12-01T10:00:00Z\naction: fyi\n---\nnot a's\n")
    pair.proxy.heal()
    wait_for(lambda: pair.b.status().get("conflicts", 0) == 1, 30, "the conflict on b")
    assert forged.read_bytes().endswith(b"not a's\n")  # never overwritten
    aside = [p for p in forged.parent.iterdir() if p.name.endswith(".conflict")]
    assert len(aside) == 1 and aside[0].name.startswith("0001-a.md.")
    assert aside[0].read_bytes() == (pair.a.root / rel).read_bytes()
    doc = json.loads(cli("bridge", "doctor", "--dir", str(pair.b.dir), "--json").stdout)
    assert {c["check"]: c["status"] for c in doc["checks"]}["conflicts"] == "warn"


def test_a_hand_writer_still_writing_is_never_sent_half(pair) -> None:
    import subprocess
    import sys

    first = pair.a.send("a", "byhand", "a topic to write into")
    wait_for(lambda: (pair.b.root / first).exists(), what="the first entry on b")
    rel = first.replace("0001-a.md", "0002-a.md")
    head = "---\nfrom: a\nat: 2026-12-01T10:00:00Z\naction: fyi\n---\n"
    script = (
        "import sys, time\n"
        "f = open(sys.argv[1], 'w')\n"
        f"f.write({head!r}); f.flush()\n"
        "time.sleep(2)\n"
        "f.write('the second half, written later\\n'); f.close()\n"
    )
    subprocess.run([sys.executable, "-c", script, str(pair.a.root / rel)], check=True)
    wait_for(lambda: (pair.b.root / rel).exists(), what="the hand-written entry on b")
    assert (pair.b.root / rel).read_bytes() == (pair.a.root / rel).read_bytes()
    assert (pair.b.root / rel).read_bytes().endswith(b"written later\n")


def test_a_waiting_watch_on_b_wakes_on_an_entry_written_on_a(pair) -> None:
    import json
    import os
    import subprocess
    import sys
    import time

    first = pair.a.send("a", "wake", "so the topic exists on b")
    wait_for(lambda: (pair.b.root / first).exists(), what="the first entry on b")
    cli_base = [sys.executable, "-m", "mailslot", "--root", str(pair.b.root), "--as", "b"]
    subprocess.run([*cli_base, "exchange", "watch", "--mark-all-seen"], check=True,
                   capture_output=True, env=os.environ.copy())  # fmt: skip
    watcher = subprocess.Popen(
        [*cli_base, "exchange", "watch", "--timeout", "30", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    time.sleep(1.0)  # the watcher is armed and blocked
    rel = pair.a.send("a", "wake", "wake up, b")
    out, err = watcher.communicate(timeout=40)
    assert watcher.returncode == 0, err
    assert rel.split("/")[-1] in out and "wake up, b" in json.dumps(json.loads(out))


def test_serve_stopped_by_ctrl_c_exits_130_and_stops_its_server(pair) -> None:
    import signal

    from bridge_helpers import _alive

    proc, server = pair.a.proc, pair.a.server_pid()
    assert proc is not None and server and _alive(server)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(15) == 130
    pair.a.proc = None
    assert "mailslot: interrupted" in (pair.a.base / "serve.log").read_text()
    wait_for(lambda: not _alive(server), 10, "the nats-server child stopped")


def test_serve_after_a_killed_bridge_stops_the_server_it_left_and_runs_its_own(pair) -> None:
    from bridge_helpers import _alive

    proc, left = pair.a.proc, pair.a.server_pid()
    assert proc is not None and left and _alive(left)
    proc.kill()  # the bridge alone: its nats-server child keeps running, holding the port
    proc.wait()
    pair.a.proc = None
    assert _alive(left)
    pair.a.start()
    wait_for(lambda: not _alive(left), 10, "the server left behind stopped")
    assert pair.a.server_pid() not in (None, left)
    assert "left running by a bridge that was killed" in (pair.a.base / "serve.log").read_text()
    rel = pair.a.send("a", "after-restart", "still carried")
    wait_for(lambda: (pair.b.root / rel).exists(), 30, "the entry on b")


def test_an_entry_rewritten_after_it_was_sent_is_a_conflict_on_its_host_never_silent(
    pair,
) -> None:
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from bridge_helpers import cli

    first = pair.a.send("a", "torn", "a topic written into by hand")
    wait_for(lambda: (pair.b.root / first).exists(), what="the first entry on b")
    rel = first.replace("0001-a.md", "0002-a.md")
    head = "---\nfrom: a\nat: 2026-12-02T08:10:00.000Z\naction: fyi\n---\n"
    # a hand writer with the file open: nothing is sent while it holds it
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time\n"
            "f=open(sys.argv[1],'w')\n"
            f"f.write({head + 'HALF'!r}); f.flush()\n"
            "print('written', flush=True); time.sleep(60)\n",
            str(pair.a.root / rel),
        ],
        stdout=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stdout.readline() == b"written\n"
    time.sleep(3)  # the publisher had every event and a rescan could not send it either
    assert not (pair.b.root / rel).exists()
    os.kill(writer.pid, signal.SIGKILL)  # killed mid-write: what it left is closed, so sent
    writer.wait()
    torn = (pair.a.root / rel).read_bytes()
    wait_for(lambda: (pair.b.root / rel).exists(), what="the torn entry on b")
    assert (pair.b.root / rel).read_bytes() == torn
    # the agent runs again and writes the whole entry in place
    (pair.a.root / rel).write_bytes((head + "HALF then whole\n").encode())

    def flagged() -> list[dict[str, object]]:
        return list(pair.a.status().get("diverged") or [])

    diverged = wait_for(flagged, 30, "the change after sending flagged on a")
    assert diverged[0]["path"] == rel
    assert pair.a.status()["conflicts"] == 1
    status = json.loads(cli("bridge", "status", "--dir", str(pair.a.dir), "--json").stdout)
    assert status["conflicts"] == 1 and status["diverged"][0]["path"] == rel
    text = cli("bridge", "status", "--dir", str(pair.a.dir)).stdout
    assert f"CHANGED AFTER SENT ex:{rel}" in text
    doc = cli("bridge", "doctor", "--dir", str(pair.a.dir), check=False)
    assert doc.returncode == 1 and f"FAIL sent:ex:{rel}" in doc.stdout
    assert "conflict:" in (pair.a.base / "serve.log").read_text()
    assert (pair.b.root / rel).read_bytes() == torn  # never overwritten
    # b keeps the new version beside it, visible, and counts the conflict too
    whole = (pair.a.root / rel).read_bytes()
    topic_b = (pair.b.root / rel).parent

    def aside() -> list[Path]:
        return [p for p in topic_b.iterdir() if p.name.endswith(".conflict")]

    kept = wait_for(aside, 30, "the new version beside the entry on b")
    assert len(kept) == 1 and kept[0].name.startswith("0002-a.md.")
    assert kept[0].read_bytes() == whole
    wait_for(lambda: pair.b.status().get("conflicts", 0) == 1, 30, "the conflict counted on b")
    assert (pair.b.root / rel).read_bytes() == torn
    # a restarted bridge (a rescan from scratch) still says so, and alerts once
    pair.a.stop()
    pair.a.start()
    time.sleep(2)
    assert flagged() and pair.a.status()["conflicts"] == 1
    assert len(aside()) == 1 and pair.b.status()["conflicts"] == 1
    # the published bytes put back: the conflict is settled
    (pair.a.root / rel).write_bytes(torn)
    wait_for(lambda: not flagged(), 30, "the conflict settled on a")
    doc = cli("bridge", "doctor", "--dir", str(pair.a.dir), check=False)
    assert f"sent:ex:{rel}" not in doc.stdout

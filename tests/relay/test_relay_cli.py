"""``mailslot relay`` through CliRunner and the real console command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from mailslot.cli import cli


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_a_conversation_through_the_console(tmp_path: Path, run_cli) -> None:
    mb = tmp_path / "mb"
    r = run_cli("relay", "init", str(mb), "--worker", "w1", "--manager", "manager")
    assert r.returncode == 0, r.stderr
    env = {"MAILSLOT_ROOT": str(mb)}
    manager = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "--as", "manager", "relay", "serve", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mailslot",
            "relay",
            "ask",
            "--to",
            "manager",
            "When?",
            "--as",
            "w1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    out, _ = manager.communicate(timeout=60)
    turn = json.loads(out)
    assert (turn["id"], turn["say"], turn["from"]) == ("C01", "When?", "w1")
    r = run_cli("--as", "manager", "relay", "reply", "--id", "C01", "Friday.", env=env)
    assert r.returncode == 0 and r.stdout.strip() == "sent R01"
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert out.strip() == "Friday."
    stats = json.loads(run_cli("relay", "stats", "--json", env=env).stdout)
    assert {s["stage"] for s in stats["stages"]} >= {"transport", "think", "held"}
    assert stats["turns"][0]["id"] == "C01" and stats["turns"][0]["T2"] is not None


def test_timeout_exits_3_and_stop_exits_4(tmp_path: Path, run_cli) -> None:
    mb = tmp_path / "mb"
    run_cli("relay", "init", str(mb), "--worker", "w1", "--manager", "manager")
    env = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "w1"}
    r = run_cli("relay", "ask", "anyone?", "--timeout", "0.2", env=env)
    assert r.returncode == 3 and "relay recover" in r.stderr
    server = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "relay", "serve", "--as", "w1", "--timeout", "60"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    r = run_cli("relay", "stop", "the human said stop", env={**env, "MAILSLOT_AGENT": "manager"})
    assert r.returncode == 0 and "cannot be recalled" in r.stdout
    _, err = server.communicate(timeout=60)
    assert server.returncode == 4 and err.startswith("mailslot: gone:")
    r = run_cli("relay", "ask", "more?", env=env)
    assert r.returncode == 1 and "stopped" in r.stderr


def test_a_json_wait_that_times_out_still_answers_in_json(tmp_path: Path, run_cli) -> None:
    mb = tmp_path / "mb"
    run_cli("relay", "init", str(mb), "--worker", "w1", "--manager", "manager")
    worker = {"MAILSLOT_ROOT": str(mb), "MAILSLOT_AGENT": "w1"}
    r = run_cli("relay", "ask", "anyone?", "--timeout", "0.2", "--json", env=worker)
    assert r.returncode == 3
    assert json.loads(r.stdout) == {
        "id": "C01",
        "reply_id": "R01",
        "say": None,
        "timed_out": True,
    }
    r = run_cli("relay", "serve", "--timeout", "0.2", "--json", env=worker)
    assert r.returncode == 3
    assert json.loads(r.stdout) == {"id": None, "say": None, "timed_out": True}


def test_refusals_and_status(tmp_path: Path) -> None:
    mb = tmp_path / "mb"
    assert run("relay", "init", str(mb), "--worker", "w1", "--manager", "manager").exit_code == 0
    base = ["--root", str(mb)]
    r = run("relay", "ask", "q", "--no-wait", *base, "--as", "w1")
    assert r.exit_code == 0 and r.output.strip() == "sent C01"
    words = " ".join(["w"] * 26)
    r = run("relay", "reply", "--id", "C01", words, *base, "--as", "manager")
    assert r.exit_code == 1 and "26 words" in r.stderr
    r = run("relay", "post", "latency was 2 ms", *base, "--as", "manager")
    assert r.exit_code == 1 and "not a turn line" in r.stderr
    st = json.loads(run("relay", "status", "--json", *base).output)
    assert st["open_turn"]["id"] == "C01" and st["stopped"] is None
    r = run("relay", "note", "diag", *base, "--as", "manager")
    assert r.exit_code == 0 and r.output.strip().endswith("manager-notes.md")
    r = run("relay", "ask", "q", *base)
    assert r.exit_code == 2  # who is acting? is a usage error

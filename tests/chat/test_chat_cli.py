"""``mailslot chat`` through CliRunner and the real console command: output shapes, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from mailslot.cli import cli


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_new_prints_the_absolute_path_first(tmp_path: Path) -> None:
    r = run("chat", "new", "ship it", "--dir", str(tmp_path), "--as", "alice")
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert Path(first).is_absolute() and Path(first).parent == tmp_path
    assert Path(first).is_file() and "name: alice" in r.output


def test_json_shapes_follow_the_design(tmp_path: Path) -> None:
    path = run("chat", "new", "t", "--dir", str(tmp_path), "--as", "alice").output.splitlines()[0]
    assert run("chat", "join", path, "--as", "bob").exit_code == 0
    r = run("chat", "say", path, "-", "--as", "alice", input="from stdin\nline two\n")
    assert r.exit_code == 0, r.output
    data = json.loads(run("chat", "read", path, "--json").output)
    assert set(data) >= {"messages", "cursor"}
    assert all(set(m) >= {"from", "time", "body"} for m in data["messages"])
    assert data["messages"][-1]["body"] == "from stdin\nline two"
    assert data["cursor"] == Path(path).stat().st_size
    data = json.loads(run("chat", "wait", path, "--as", "bob", "--json").output)
    assert [m["body"] for m in data["messages"]] == ["from stdin\nline two"]
    assert data["cursor"] == Path(path).stat().st_size
    run("chat", "check", path, "split the work?", "--as", "bob")
    st = json.loads(run("chat", "status", path, "--json").output)
    assert st["participants"] == ["alice", "bob"]
    assert st["end_request"] is None and st["ended"] is False
    assert st["human_check"]["from"] == "bob"
    st = json.loads(run("chat", "end", path, "request", "--as", "alice", "--json").output)
    assert st["end_request"]["from"] == "alice"
    st = json.loads(run("chat", "end", path, "accept", "--as", "bob", "--json").output)
    assert st["ended"] is True


def test_refusals_exit_1_with_one_line(tmp_path: Path) -> None:
    path = run("chat", "new", "t", "--dir", str(tmp_path), "--as", "alice").output.splitlines()[0]
    r = run("chat", "end", path, "accept", "--as", "alice")
    assert r.exit_code == 1
    assert r.stderr.startswith("mailslot: error:") and r.stderr.count("\n") == 1


def test_wait_timeout_exits_3_through_the_console(tmp_path: Path, run_cli) -> None:
    r = run_cli("chat", "new", "t", "--dir", str(tmp_path), "--as", "alice")
    path = r.stdout.splitlines()[0]
    assert run_cli("chat", "join", path, "--as", "bob").returncode == 0
    r = run_cli("chat", "wait", path, "--as", "bob", "--timeout", "0.2")
    assert r.returncode == 3 and r.stderr.startswith("mailslot: timeout:")


def test_removed_file_ends_a_blocked_wait_with_exit_4(tmp_path: Path, run_cli) -> None:
    r = run_cli("chat", "new", "t", "--dir", str(tmp_path), "--as", "alice")
    path = Path(r.stdout.splitlines()[0])
    p = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "chat", "wait", str(path), "--as", "alice"],
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # usually blocked by now; if not, it finds the file gone at start
    path.unlink()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 4
    assert err.startswith("mailslot: gone:") and "removed" in err


def test_conversation_through_the_console(tmp_path: Path, run_cli) -> None:
    env = {"MAILSLOT_SESSION": "creator"}
    r = run_cli("chat", "new", "plan", "--dir", str(tmp_path), env=env)
    path = r.stdout.splitlines()[0]
    name = r.stdout.splitlines()[1].removeprefix("name: ")
    joined = run_cli("chat", "join", path, "hi", env={"MAILSLOT_SESSION": "joiner"})
    assert joined.returncode == 0 and "TOPIC: plan" in joined.stdout
    seen = run_cli("chat", "wait", path, "--timeout", "30", env=env)  # the join message
    assert seen.returncode == 0 and "joined." in seen.stdout
    waiter = subprocess.Popen(
        [sys.executable, "-m", "mailslot", "chat", "wait", path, "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert run_cli("chat", "say", path, "over to you", env={"MAILSLOT_SESSION": "joiner"})
    out, _ = waiter.communicate(timeout=60)
    data = json.loads(out)
    assert [m["body"] for m in data["messages"]] == ["over to you"]
    assert data["messages"][0]["from"] != name


def test_a_cursor_out_of_range_is_one_line_naming_it(tmp_path: Path) -> None:
    path = run("chat", "new", "t", "--dir", str(tmp_path), "--as", "alice").output.splitlines()[0]
    for since in ("99999999999999999999999", "1000000"):
        r = run("chat", "read", path, "--since", since)
        assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.output
        assert r.stderr.startswith("mailslot: error:") and "field 'since'" in r.stderr
    r = run("chat", "wait", path, "--as", "alice", "--cursor", "1000000", "--timeout", "0")
    assert r.exit_code == 1 and "field 'cursor'" in r.stderr and "past the end" in r.stderr


def test_a_wait_whose_output_nobody_reads_ends_by_its_timeout_and_marks_nothing(
    tmp_path: Path, run_cli
) -> None:
    """Four long messages overflow a pipe (64 KiB) that nobody reads: the write would block for
    ever. The timeout covers the output: the command ends soon after it (once the pipe took
    nothing for OUTPUT_STALL_SECONDS), exit 1 saying so, and the cursor has not moved, so the
    next wait shows all four again -- through a pipe that is read, with --timeout 0 too."""
    path = run("chat", "new", "t", "--dir", str(tmp_path), "--as", "alice").output.splitlines()[0]
    assert run("chat", "join", path, "--as", "bob").exit_code == 0
    for n in range(4):
        assert run("chat", "say", path, f"{n}" + "x" * 60_000, "--as", "alice").exit_code == 0
    for timeout, args in (("2", ["--json"]), ("0", [])):
        r_fd, w_fd = os.pipe()  # read by nobody until the command has ended
        started = time.monotonic()
        cmd = ["chat", "wait", path, "--as", "bob", "--timeout", timeout, *args]
        p = subprocess.Popen(
            [sys.executable, "-m", "mailslot", *cmd],
            stdout=w_fd,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(w_fd)
        try:
            _, err = p.communicate(timeout=60)
        finally:
            p.kill()  # a wait still held by the pipe fails the test without staying behind
            os.close(r_fd)
        assert p.returncode == 1, err
        assert time.monotonic() - started < float(timeout) + 30  # not held by the pipe
        assert err.startswith("mailslot: error:") and "past the timeout" in err, err
        assert "nothing was marked read or seen" in err and err.count("\n") == 1
    r = run_cli("chat", "wait", path, "--as", "bob", "--timeout", "5", "--json")
    assert [m["body"][:1] for m in json.loads(r.stdout)["messages"]] == ["0", "1", "2", "3"]

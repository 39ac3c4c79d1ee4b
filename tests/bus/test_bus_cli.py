"""The bus on the command line: CliRunner for most, the real console command for some."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mailslot.cli import cli


def run(root: Path, *args: str, input: str | None = None, agent: str | None = None):
    env = {"MAILSLOT_ROOT": str(root)}
    if agent:
        env["MAILSLOT_AGENT"] = agent
    return CliRunner().invoke(cli, list(args), input=input, env=env)


def test_bus_init_lays_out_and_keeps(tmp_path: Path) -> None:
    target = tmp_path / "shared"
    r = CliRunner().invoke(cli, ["bus", "init", str(target), "--consumer", "beacon", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {"LOG.md", "TASKS.md", "DIVISION-OF-WORK.md", "README.md", "outbox/taken/"} <= set(
        out["created"]
    )
    assert "| outbox/taken/ | beacon |" in (target / "DIVISION-OF-WORK.md").read_text()
    assert "log tail --since-mine" in (target / "README.md").read_text()
    (target / "LOG.md").write_text("# Log\n\nkept line\n")
    r = CliRunner().invoke(cli, ["bus", "init", str(target), "--json"])
    assert r.exit_code == 0 and "LOG.md" in json.loads(r.stdout)["kept"]
    assert "kept line" in (target / "LOG.md").read_text()
    r = CliRunner().invoke(cli, ["bus", "init", str(target), "--consumer", "lantern"])
    assert r.exit_code == 1 and "already names beacon" in r.stderr


def test_init_without_consumer_blocks_take(tmp_path: Path) -> None:
    target = tmp_path / "shared"
    assert CliRunner().invoke(cli, ["bus", "init", str(target)]).exit_code == 0
    r = run(target, "outbox", "take", "--as", "beacon")
    assert r.exit_code == 1 and "nobody may take" in r.stderr


def test_log_append_and_tail(root: Path) -> None:
    r = run(root, "log", "append", "--as", "lantern", "delivered the card")
    assert r.exit_code == 0 and r.stdout.rstrip().endswith("[Lantern] w01: delivered the card")
    r = run(root, "log", "append", "delivered again", agent="lantern")
    assert r.exit_code == 1 and "one line per waking" in r.stderr and r.stderr.count("\n") == 1
    r = run(root, "log", "append", "--as", "lantern", "--same-waking", "second line")
    assert r.exit_code == 0
    r = run(root, "log", "append", "--as", "beacon", "-", input="from stdin\n")
    assert r.exit_code == 0 and r.stdout.rstrip().endswith("w01: from stdin")
    r = run(root, "log", "tail", "--since-mine", "--as", "lantern", "--json")
    data = json.loads(r.stdout)
    assert [e["text"] for e in data["entries"]] == ["from stdin"] and data["mine_found"]
    r = run(root, "log", "tail", "-n", "2")
    assert r.stdout.count("\n") == 2 and "second line" in r.stdout


def test_log_multi_line_refused(root: Path) -> None:
    before = (root / "LOG.md").read_bytes()
    r = run(root, "log", "append", "--as", "lantern", "two\nlines")
    assert r.exit_code == 1 and "mailslot: error: log text" in r.stderr
    r = run(root, "log", "append", "--as", "lantern", "-", input="a\nb\n")
    assert r.exit_code == 1
    assert (root / "LOG.md").read_bytes() == before


def test_log_waking_env(root: Path) -> None:
    env = {"MAILSLOT_ROOT": str(root), "MAILSLOT_WAKING": "run-1"}
    r = CliRunner().invoke(cli, ["log", "append", "--as", "x", "a"], env=env)
    assert r.exit_code == 0
    r = CliRunner().invoke(cli, ["log", "append", "--as", "x", "b"], env=env)
    assert r.exit_code == 1 and "same MAILSLOT_WAKING" in r.stderr
    env["MAILSLOT_WAKING"] = "run-2"
    r = CliRunner().invoke(cli, ["log", "append", "--as", "x", "c"], env=env)
    assert r.exit_code == 0 and "w02: c" in r.stdout


def test_outbox_flow(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "draft.md"
    src.write_text("# draft\n")
    r = run(root, "outbox", "put", "--as", "lantern", str(src), "--note", "guide draft")
    assert r.exit_code == 0 and r.stdout.strip() == "outbox/000001-draft.md"
    r = run(root, "outbox", "list", "--json")
    [item] = json.loads(r.stdout)["items"]
    assert item["from"] == "lantern" and item["note"] == "guide draft" and item["sha256"]
    r = run(root, "outbox", "take", "--as", "lantern")
    assert r.exit_code == 1 and "beacon is the outbox consumer" in r.stderr
    r = run(root, "outbox", "take", "--as", "beacon")
    assert r.exit_code == 0 and r.stdout.strip() == str(root / "outbox/taken/000001-draft.md")
    r = run(root, "outbox", "take", "--as", "beacon")
    assert r.exit_code == 3 and r.stderr.startswith("mailslot: empty: nothing to take")
    r = run(root, "outbox", "list", "--taken")
    assert "taken by beacon" in r.stdout
    assert run(root, "outbox", "list").stdout.strip() == "outbox/ is empty"


def test_tasks_flow(root: Path) -> None:
    r = run(root, "tasks", "add", "--for", "lantern", "review the draft", "--json")
    assert r.exit_code == 0
    task = json.loads(r.stdout)
    assert task["for"] == "lantern" and task["file"] == "tasks-lantern.md"
    r = run(root, "tasks", "list", "--for", "lantern")
    assert r.stdout.startswith(task["id"]) and "[ ]" in r.stdout
    r = run(root, "tasks", "done", task["id"][:5])
    assert r.exit_code == 0 and "[x]" in r.stdout
    r = run(root, "tasks", "list", "--open", "--json")
    assert json.loads(r.stdout)["tasks"] == []
    assert run(root, "tasks", "list", "--open").stdout.strip() == "no open tasks"
    r = run(root, "tasks", "done", "ffffffff")
    assert r.exit_code == 1 and "no task with id" in r.stderr


def test_owners_check_cli(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(
        "| path | writer |\n|---|---|\n| src/ | beacon |\n| src/docs/ | lantern |\n"
    )
    r = run(root, "owners", "check", "--as", "lantern", "src/docs/a.md", "free.txt")
    assert r.exit_code == 0 and "ok   src/docs/a.md" in r.stdout
    r = run(root, "owners", "check", "--as", "lantern", "src/docs/a.md", "src/b.py", "--json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert [p["allowed"] for p in data["paths"]] == [True, False]
    assert data["paths"][1]["owner"] == "beacon"
    assert "src/b.py is owned by beacon" in r.stderr
    r = run(root, "owners", "show", "--json")
    assert [x["path"] for x in json.loads(r.stdout)["rules"]] == ["src/", "src/docs/"]


def test_not_a_bus_is_a_clear_error(tmp_path: Path) -> None:
    r = run(tmp_path, "log", "tail")
    assert r.exit_code == 1 and "not a bus" in r.stderr


def test_help_teaches(root: Path) -> None:
    for group in ("bus", "log", "outbox", "tasks", "owners"):
        r = CliRunner().invoke(cli, [group, "--help"])
        assert r.exit_code == 0
    r = CliRunner().invoke(cli, ["log", "append", "--help"])
    assert "Example" in r.output and "--same-waking" in r.output


@pytest.mark.slow
def test_real_console_command(run_cli, root: Path, tmp_path: Path) -> None:
    env = {"MAILSLOT_ROOT": str(root)}
    r = run_cli("log", "append", "--as", "lantern", "via the real command", env=env)
    assert r.returncode == 0, r.stderr
    r = run_cli("log", "tail", "--json", env=env)
    assert json.loads(r.stdout)["entries"][-1]["text"] == "via the real command"
    r = run_cli("outbox", "take", "--as", "beacon", env=env)
    assert r.returncode == 3 and r.stderr.startswith("mailslot: empty:")
    src = tmp_path / "a.txt"
    src.write_text("a")
    r = run_cli("outbox", "put", str(src), "--as", "lantern", env=env)
    assert r.returncode == 0 and r.stdout.strip() == "outbox/000001-a.txt"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = run_cli("outbox", "take", "--as", "beacon", env=env, cwd=elsewhere)
    # a path that works from where the caller stands, not relative to the bus root
    taken = Path(r.stdout.strip())
    assert r.returncode == 0 and taken == root / "outbox" / "taken" / "000001-a.txt"
    assert taken.is_absolute() and taken.read_text() == "a"
    r = run_cli("owners", "check", "--as", "lantern", "outbox/taken/x", env=env)
    assert r.returncode == 1 and "owned by beacon" in r.stderr


def test_text_written_by_others_is_shown_escaped(root: Path) -> None:
    """A hand-written LOG.md line, task or outbox name carrying terminal escapes: the text
    output escapes them (nothing recolours the screen or retitles the window); JSON stays raw."""
    esc = "esc \x1b[31mRED\x1b]0;TITLE\x07 done"
    with open(root / "LOG.md", "a") as f:
        f.write(f"2026-12-02T08:02:00Z — [Beacon] w04: {esc}\n")
    with open(root / "TASKS.md", "a") as f:
        f.write(f"- [ ] {esc}\n")
    (root / "outbox" / "evil\x1b[31mname.png").write_bytes(b"png")
    for args in (("log", "tail"), ("tasks", "list", "--as", "lantern"), ("outbox", "list")):
        r = run(root, *args)
        assert r.exit_code == 0, r.output
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout, args
        assert "\\x1b[31m" in r.stdout, args
    r = run(root, "log", "tail", "--json")
    assert json.loads(r.stdout)["entries"][-1]["text"] == esc

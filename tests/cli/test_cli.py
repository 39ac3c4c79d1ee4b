"""The command skeleton: version, help, global options, error -> exit code mapping."""

from __future__ import annotations

import time

import click
import pytest
from click.testing import CliRunner

from mailslot import __version__
from mailslot.cli import cli
from mailslot.cli.helpers import Env, pass_env
from mailslot.core.errors import Gone, InvalidName, WaitTimeout


@click.command("probe")
@click.option("--fail", type=click.Choice(["none", "name", "timeout", "gone", "os"]))
@pass_env
def probe(env: Env, fail: str | None) -> None:
    """Test-only command that reports the Env and raises on demand."""
    if fail == "name":
        raise InvalidName("agent name", "Bad", "lowercase")
    if fail == "timeout":
        raise WaitTimeout("nothing new within 1s")
    if fail == "gone":
        raise Gone("chat file removed")
    if fail == "os":
        open("/nonexistent/dir/file")  # noqa: SIM115
    click.echo(f"root={env.root} agent={env.agent}")


@pytest.fixture(autouse=True)
def _probe():
    cli.add_command(probe)
    yield
    cli.commands.pop("probe", None)


def test_version() -> None:
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and __version__ in r.output


def test_global_options_before_and_after(tmp_path) -> None:
    r = CliRunner().invoke(cli, ["--as", "olu", "--root", str(tmp_path), "probe"])
    assert r.output.strip() == f"root={tmp_path} agent=olu"
    r = CliRunner().invoke(cli, ["probe", "--as", "olu", "--root", str(tmp_path)])
    assert r.output.strip() == f"root={tmp_path} agent=olu"
    r = CliRunner().invoke(cli, ["--as", "a", "probe", "--as", "b"])
    assert "agent=b" in r.output


def test_env_vars(tmp_path) -> None:
    r = CliRunner().invoke(
        cli, ["probe"], env={"MAILSLOT_AGENT": "claude", "MAILSLOT_ROOT": str(tmp_path)}
    )
    assert r.output.strip() == f"root={tmp_path} agent=claude"


@pytest.mark.parametrize(
    ("fail", "code", "prefix"),
    [
        ("name", 1, "mailslot: error: invalid agent name"),
        ("timeout", 3, "mailslot: timeout:"),
        ("gone", 4, "mailslot: gone:"),
        ("os", 1, "mailslot: error: /nonexistent/dir/file"),
    ],
)
def test_errors_map_to_exit_codes(fail: str, code: int, prefix: str) -> None:
    r = CliRunner().invoke(cli, ["probe", "--fail", fail])
    assert r.exit_code == code
    assert r.stderr.startswith(prefix) and r.stderr.count("\n") == 1
    assert "Traceback" not in r.output


def test_usage_error_is_2() -> None:
    r = CliRunner().invoke(cli, ["probe", "--fail", "bogus"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["no-such-command"])
    assert r.exit_code == 2


def test_help_imports_no_channel(run_cli) -> None:
    code = (
        "import sys; from mailslot.cli import main\n"
        "PLUMBING = {'mailslot.cli.command', 'mailslot.cli.helpers', 'mailslot.cli.common',"
        " 'mailslot.cli.spec'}\n"
        "try:\n    main(['--help'])\nexcept SystemExit: pass\n"
        "bad = [m for m in sys.modules if m.startswith(('mailslot.cli.', 'mailslot.exchange',"
        " 'fastapi', 'uvicorn', 'mcp', 'httpx', 'apprise', 'yaml'))"
        " and m not in PLUMBING]\n"
        "print(bad)"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("[]"), out.stdout


def test_console_command_runs(run_cli) -> None:
    start = time.monotonic()
    r = run_cli("--help")
    assert r.returncode == 0 and "Exit codes" in r.stdout
    assert time.monotonic() - start < 30  # sanity only; speed is measured in bench/


def _leaves(cmd: click.Command, path: list[str]):
    ctx = click.Context(cmd)
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            yield from _leaves(cmd.get_command(ctx, name), [*path, name])
    else:
        yield path, cmd


def test_every_command_accepts_root_and_as_after_the_subcommand() -> None:
    missing = []
    for path, cmd in _leaves(cli, []):
        if path == ["probe"]:
            continue
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        for opt in ("--root", "--as"):
            if opt not in opts:
                missing.append(f"{' '.join(path)} {opt}")
    assert missing == []


def test_as_after_a_subcommand_that_lacked_it(tmp_path) -> None:
    # --as after a chat status path is the global option, not "No such option"
    r = CliRunner().invoke(cli, ["chat", "status", str(tmp_path / "nope.txt"), "--as", "alice"])
    assert "No such option" not in r.output + (r.stderr or "")
    assert r.exit_code == 1


def test_non_utf8_text_is_refused_not_a_traceback(tmp_path) -> None:
    import subprocess
    import sys

    log = tmp_path / "bus"
    subprocess.run(
        [sys.executable, "-m", "mailslot", "bus", "init", str(log)], check=True, capture_output=True
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mailslot",
            "--root",
            str(log),
            "log",
            "append",
            "--as",
            "kiran",
            b"caf\xe9".decode("utf-8", "surrogateescape"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert r.stderr.startswith("mailslot: error:") and "Traceback" not in r.stderr
    assert "caf" not in (log / "LOG.md").read_text()


def test_text_starting_with_a_dash_is_text_not_an_option(tmp_path) -> None:
    chat = tmp_path / "c"
    chat.mkdir()
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "new", "--dir", str(chat), "t"])
    path = r.output.splitlines()[0]
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "say", path, "- a bullet point"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["chat", "read", path, "--json"])
    assert "- a bullet point" in r.output
    # a real unknown option is still a usage error, and --opt=two words is still an option
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "say", path, "--jsno"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "say", "--root=/tmp/a b", path, "x"])
    assert "No such option" not in r.output


def test_relay_post_help_example_works(tmp_path) -> None:
    mb = tmp_path / "mb"
    r = CliRunner().invoke(cli, ["relay", "init", str(mb), "--worker", "w1", "--manager", "mgr"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        cli, ["--root", str(mb), "--as", "w1", "relay", "post", "- [14:02] (w1) id=C01 T0=1 say=Hi"]
    )
    assert "No such option" not in r.output + (r.stderr or "")
    assert r.exit_code == 0, r.output + (r.stderr or "")


def test_a_json_wait_that_times_out_still_answers_in_json(tmp_path) -> None:
    import json

    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "new", "--dir", str(tmp_path), "t"])
    path = r.output.splitlines()[0]
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "wait", path, "--timeout", "0", "--json"])
    assert r.exit_code == 3
    data = json.loads(r.stdout)
    assert data["messages"] == [] and data["timed_out"] is True and data["cursor"] > 0
    r = CliRunner().invoke(cli, ["--as", "kiran", "chat", "wait", path, "--timeout", "0"])
    assert r.exit_code == 3 and r.stdout == ""  # text mode: only the one stderr line


def _missing_as_cases(tmp_path):
    ex = tmp_path / "ex"
    r = CliRunner().invoke(
        cli, ["exchange", "init", str(ex), "--side", "claude", "--side", "olu", "--no-git"]
    )
    assert r.exit_code == 0, r.output
    bus = tmp_path / "shared"
    assert CliRunner().invoke(cli, ["bus", "init", str(bus)]).exit_code == 0
    chat = CliRunner().invoke(  # started by another caller: no name is remembered for us
        cli,
        ["--as", "ana", "chat", "new", "--dir", str(tmp_path), "t"],
        env={"XDG_STATE_HOME": str(tmp_path / "other-caller")},
    )
    chat_file = chat.output.splitlines()[0]
    return [
        ["--root", str(ex), "exchange", "send", "--topic", "t", "--action", "fyi", "hi"],
        ["--root", str(ex), "exchange", "watch", "--timeout", "0"],
        ["exchange", "dispatch", "--root", str(ex), "--topic", "t", "--action", "fyi", "hi"],
        ["--root", str(bus), "outbox", "take"],
        ["--root", str(bus), "log", "append", "did a thing"],
        ["chat", "say", chat_file, "hello"],
        ["mcp", "--root", str(ex)],
        ["onboard", "codex", "--root", str(ex)],
    ]


def test_a_missing_as_is_one_line_and_exit_2_everywhere(tmp_path) -> None:
    for args in _missing_as_cases(tmp_path):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.startswith("mailslot: error: ") and r.stderr.count("\n") == 1, (args, r)
        assert "--as" in r.stderr and "Usage:" not in r.output, args


_WAITS = ("--timeout", "--wait", "--lock-wait")


def test_every_wait_refuses_nan_infinity_negative_and_huge_as_usage(tmp_path) -> None:
    """A wait given `nan`, `inf`, `-1` or `1e300` seconds is a usage error naming the option
    (exit 2), never a traceback from the kernel's poll or a silent zero-second wait."""
    waits = [
        (path, opt)
        for path, cmd in _leaves(cli, [])
        for p in cmd.params
        for opt in getattr(p, "opts", [])
        if opt in _WAITS and getattr(p, "type", None) is not click.BOOL
    ]
    assert ["exchange", "watch"] in [w[0] for w in waits]  # the walk found the waits
    for path, opt in waits:
        for bad in ("nan", "inf", "-1", "1e300"):
            args = ["--root", str(tmp_path), "--as", "x", *path, f"{opt}={bad}"]
            r = CliRunner().invoke(cli, args)
            assert r.exit_code == 2, (args, r.output)
            assert f"Invalid value for '{opt}'" in r.stderr and "Traceback" not in r.output, args
        ok = CliRunner().invoke(cli, ["--root", str(tmp_path), *path, f"{opt}=0.5", "--help"])
        assert ok.exit_code == 0, (path, opt, ok.output)

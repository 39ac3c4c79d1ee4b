"""docs/cli.md is generated from --help; a stale copy fails here (regenerate, never hand-edit)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_current() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_ref.py"), "--check"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"},
    )
    assert r.returncode == 0, r.stderr


def test_every_command_has_help_text() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_cli_ref

    text = gen_cli_ref.render()
    for block in text.split("## `")[1:]:
        name, _, body = block.partition("`")
        # a usage line, then a description line: a command without a docstring has none
        lines = [ln for ln in body.strip("\n`").splitlines() if ln.strip()]
        assert len(lines) >= 2 and not lines[1].lstrip().startswith("Options:"), name


def test_every_command_help_has_an_example() -> None:
    """--help teaches: each command shows one way to call it (agents copy these)."""
    import click

    from mailslot.cli import cli

    def leaves(cmd: click.Command, path: list[str]):
        ctx = click.Context(cmd)
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from leaves(cmd.get_command(ctx, name), [*path, name])
        elif not cmd.hidden:
            yield " ".join(path), cmd.help or ""

    missing = [name for name, text in leaves(cli, ["mailslot"]) if "Example" not in text]
    assert missing == []


def test_each_usage_line_names_the_command_as_typed() -> None:
    """`Usage: mailslot peer send ...`, never the program name twice (`mailslot mailslot ...`)."""
    text = (ROOT / "docs" / "cli.md").read_text()
    blocks = text.split("## `")[1:]
    assert blocks
    for block in blocks:
        name, _, body = block.partition("`")
        usage = next(ln for ln in body.splitlines() if ln.startswith("Usage: "))
        assert usage.startswith(f"Usage: {name} "), usage
    assert "mailslot mailslot" not in text


def test_top_help_is_clicks_own_text_printed_without_loading_click() -> None:
    """`mailslot --help` comes precomputed (src/mailslot/tophelp.py, from `make docs`): it must
    be exactly what click prints, and reach the agent without click or any command loaded."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_cli_ref

    for flag in ("--help", "-h"):
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "mailslot", flag],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"},
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout == gen_cli_ref.top_help()
        loaded = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if "|" in line}
        assert not {m for m in loaded if m.split(".")[0] == "click" or m == "mailslot.cli"}
    narrow = subprocess.run(  # too narrow for the stored text: click itself answers
        [sys.executable, "-m", "mailslot", "--help"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "60"},
    )
    assert narrow.returncode == 0 and "Usage: mailslot" in narrow.stdout
    assert narrow.stdout != gen_cli_ref.top_help()  # wrapped to 60 columns, not to 80

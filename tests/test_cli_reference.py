"""docs/cli.md is generated from --help; a stale copy fails here (regenerate, never hand-edit)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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

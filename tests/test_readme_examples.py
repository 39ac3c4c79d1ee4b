"""The README's console examples (and the worked examples in docs/) work when pasted: run in order
in a fresh directory, each command exits as its comment says (0 unless `# exit N`) and prints what
the text shows below it.

Shown output is matched line by line in order, with `...` standing for anything and a date
(YYYY-MM-DD) for any date, since the examples were written on one day and are read on others.
Absolute example paths (/srv/..., /home/kiran/proj) are moved under the test's directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parent.parent / "README.md"
DOCS = README.parent / "docs"


@dataclass
class Step:
    """One `$ command` line of a console block and the output lines shown under it."""

    command: str
    shown: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        said = re.search(r"#\s*exit (\d+)", self.command)
        return int(said.group(1)) if said else 0


def _blocks(page: Path = README) -> dict[str, list[Step]]:
    """The page's console blocks, keyed by their first command."""
    out: dict[str, list[Step]] = {}
    for body in re.findall(r"```console\n(.*?)```", page.read_text(), re.S):
        steps: list[Step] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                steps.append(Step(line[2:]))
            elif line.strip() and not line.startswith("# ") and steps:  # "# ..." narrates
                steps[-1].shown.append(line)
        out[steps[0].command] = steps
    return out


def _pattern(shown: str, here: Path) -> re.Pattern[str]:
    text = re.escape(_moved(shown, here))
    text = text.replace(re.escape("..."), ".*")
    text = re.sub(r"\d\d\d\d\\-\d\d\\-\d\d", r"\\d{4}-\\d{2}-\\d{2}", text)
    return re.compile(text)


def _moved(text: str, here: Path) -> str:
    return text.replace("/home/kiran/proj", str(here)).replace("/srv/", f"{here}/srv/")


def _run_block(steps: list[Step], here: Path) -> None:
    out = here / ".steps"
    out.mkdir()
    script = ["set +e", f"cd {here}"]
    for i, step in enumerate(steps):
        # braces keep `export` in this shell; the newline ends the command's own # comment
        script += [f"{{ {_moved(step.command, here)}", f"}} >{out}/{i}.out 2>{out}/{i}.err"]
        script.append(f"echo $? >{out}/{i}.rc")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": str(here),
    }
    subprocess.run(["bash", "-c", "\n".join(script)], env=env, check=True, timeout=300)
    for i, step in enumerate(steps):
        rc = int((out / f"{i}.rc").read_text())
        printed = (out / f"{i}.out").read_text().splitlines()
        err = (out / f"{i}.err").read_text()
        assert rc == step.exit_code, f"$ {step.command}\nexit {rc}\n{err}"
        lines = iter(printed)
        for shown in step.shown:
            pattern = _pattern(shown, here)
            assert any(pattern.fullmatch(line) for line in lines), (
                f"$ {step.command}\nshows {shown!r}\nprinted:\n" + "\n".join(printed)
            )


def _here(tmp_path: Path) -> Path:
    """A fresh project directory, a git checkout as a project usually is, with the file the
    bus example delivers."""
    here = tmp_path / "proj"
    here.mkdir()
    subprocess.run(["git", "init", "-q", str(here)], check=True)
    (here / "og-card.png").write_bytes(b"\x89PNG\r\n")
    return here


def test_the_exchange_example_runs_as_shown(tmp_path: Path) -> None:
    block = next(s for c, s in _blocks().items() if c.startswith("mailslot exchange init"))
    _run_block(block, _here(tmp_path))


def test_the_bus_example_runs_as_shown(tmp_path: Path) -> None:
    block = next(s for c, s in _blocks().items() if c.startswith("mailslot bus init"))
    _run_block(block, _here(tmp_path))


def test_the_exchange_guides_worked_example_runs_as_shown(tmp_path: Path) -> None:
    block = next(
        s
        for c, s in _blocks(DOCS / "exchange.md").items()
        if c.startswith("mailslot exchange init")
    )
    _run_block(block, _here(tmp_path))


def test_the_readme_names_every_system_package_make_test_installs() -> None:
    sysdeps = (README.parent / "scripts" / "sysdeps.sh").read_text()
    packages = re.findall(r"\|\| need\+=\((\w+)\)", sysdeps)
    assert packages
    setup = README.read_text().split("## Why")[0]
    for package in packages:
        assert f"`{package}`" in setup, package

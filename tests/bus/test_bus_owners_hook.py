"""The owners git hook, in a real repository: a commit touching another agent's paths is refused.

The agent's identity comes from the checkout, deletions and renames count, file names are data
(never run), a bus below the repository's top level checks only its own paths, and a pre-commit
hook that is not mailslot's is never replaced unless asked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bus_helpers import CHARTER, git

from mailslot.bus import owners
from mailslot.core.errors import Conflict, MailslotError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repo whose top level is the bus root, charter committed, hook installed."""
    top = tmp_path / "site"
    from mailslot.bus import layout

    layout.init(top, consumer="beacon")
    (top / "DIVISION-OF-WORK.md").write_text(CHARTER)
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "charter")
    return top


def commit(repo: Path, *files: str, message: str = "work") -> tuple[int, str]:
    for name in files:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {name}\n")
    git(repo, "add", "--", *files)
    r = git(repo, "commit", "-q", "-m", message, check=False)
    return r.returncode, r.stderr


@pytest.mark.slow
def test_hook_refuses_other_agents_paths(repo: Path) -> None:
    hook = owners.install_hook(repo, repo, agent="lantern")
    assert os.access(hook, os.X_OK) and owners.HOOK_MARK in hook.read_text()
    code, err = commit(repo, "src/docs/guide.md", "notes.txt")
    assert code == 0, err
    code, err = commit(repo, "src/docs/more.md", "src/app.py", message="[Beacon] as beacon")
    assert code != 0
    assert "src/app.py is owned by beacon" in err and "mailslot: error:" in err
    git(repo, "reset", "-q")
    assert git(repo, "log", "--format=%s").stdout.split("\n")[0] == "work"


@pytest.mark.slow
def test_hook_identity_comes_from_the_checkout(repo: Path) -> None:
    owners.install_hook(repo, repo)
    code, err = commit(repo, "free.txt")
    assert code != 0 and "git config mailslot.agent" in err  # no identity: refused
    git(repo, "config", "mailslot.agent", "beacon")
    code, err = commit(repo, "src/app.py")
    assert code == 0, err
    code, err = commit(repo, "src/docs/x.md")
    assert code != 0 and "owned by lantern" in err


@pytest.mark.slow
def test_hook_deletions_and_renames_count(repo: Path) -> None:
    owners.install_hook(repo, repo, agent="beacon")
    assert commit(repo, "src/app.py")[0] == 0
    git(repo, "config", "mailslot.agent", "lantern")
    git(repo, "mv", "src/app.py", "moved.py")
    r = git(repo, "commit", "-q", "-m", "steal", check=False)
    assert r.returncode != 0 and "src/app.py is owned by beacon" in r.stderr


@pytest.mark.slow
def test_hook_treats_file_names_as_data(repo: Path) -> None:
    owners.install_hook(repo, repo, agent="lantern")
    evil = ["$(touch PWNED)", "`touch PWNED2`; rm -rf x", "a\nb", "-n", "src/ quote'\"x"]
    code, err = commit(repo, *evil)
    assert "src/ quote'\"x is owned by beacon" in err and code != 0
    assert not (repo / "PWNED").exists() and not (repo / "PWNED2").exists()
    git(repo, "reset", "-q")
    code, err = commit(repo, *evil[:4])
    assert code == 0, err
    assert not (repo / "PWNED").exists() and not (repo / "PWNED2").exists()


@pytest.mark.slow
def test_hook_in_a_repo_above_the_bus(tmp_path: Path) -> None:
    """The bus is a subdirectory: paths outside it are not the charter's business."""
    from mailslot.bus import layout

    top = tmp_path / "project"
    layout.init(top / "shared", consumer="beacon")
    (top / "shared/DIVISION-OF-WORK.md").write_text(CHARTER)
    git(top, "init", "-q", "-b", "main")
    owners.install_hook(top / "shared", top, agent="lantern")
    assert commit(top, "src/app.py")[0] == 0  # outside the bus: free
    code, err = commit(top, "shared/src/app.py")
    assert code != 0 and "src/app.py is owned by beacon" in err


def test_hook_does_not_clobber_a_foreign_hook(repo: Path) -> None:
    hooks = repo / ".git/hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\necho mine\n")
    with pytest.raises(Conflict, match="not mailslot's"):
        owners.install_hook(repo, repo)
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\necho mine\n"
    owners.install_hook(repo, repo, force=True)
    owners.install_hook(repo, repo)  # its own hook is replaced freely
    assert owners.HOOK_MARK in (hooks / "pre-commit").read_text()


def test_hook_outside_git(root: Path, tmp_path: Path) -> None:
    with pytest.raises(MailslotError, match="git"):
        owners.install_hook(root, tmp_path / "nowhere")


def test_hook_outside_git_says_where_to_run_it(root: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mailslot.cli import cli

    plain = tmp_path / "not-a-checkout"
    plain.mkdir()
    r = CliRunner().invoke(cli, ["--root", str(root), "owners", "hook", "--repo", str(plain)])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert "not in a git checkout" in r.stderr and "--repo" in r.stderr, r.stderr

"""The charter: nested paths, globs, most specific row wins; the git hook, in a real repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bus_helpers import git

from mailslot.bus import owners
from mailslot.core.errors import Conflict, FormatError, MailslotError, Unresolved

CHARTER = """\
# Division of work

Prose before the table | with a pipe that is not a table.

| Path | Writer | Why |
|:-----|:------:|-----|
| `src/` | **Beacon** | the build |
| src/docs/ | lantern | docs inside src |
| src/*.md | lantern | top-level markdown in src |
| ./site/**/*.css | tidal | styles at any depth |
| /config.yaml | beacon | anchored with a slash |
| assets/img?.png | tidal | |
| outbox/taken/ | beacon | consumer |

| other | table |
|---|---|
| ignored | entirely |
"""


@pytest.fixture
def charter_root(root: Path) -> Path:
    (root / "DIVISION-OF-WORK.md").write_text(CHARTER)
    return root


def owner_of(root: Path, path: str) -> str | None:
    [v] = owners.check(root, "nobody", [path])
    return v.owner


@pytest.mark.parametrize(
    ("path", "owner"),
    [
        ("src/app.py", "beacon"),
        ("src/", "beacon"),
        ("src", "beacon"),
        ("src/deep/nested/x.py", "beacon"),
        ("src/docs/guide.md", "lantern"),  # longer dir row beats src/
        ("src/docs/a/b/c.txt", "lantern"),
        ("src/README.md", "lantern"),  # glob with more literal chars beats src/
        ("src/sub/README.md", "beacon"),  # * does not cross /
        ("site/a.css", "tidal"),  # **/ matches zero directories
        ("site/x/y/z.css", "tidal"),
        ("site/x/y/z.js", None),
        ("config.yaml", "beacon"),
        ("./config.yaml", "beacon"),
        ("config.yaml.bak", None),
        ("assets/img1.png", "tidal"),
        ("assets/img10.png", None),
        ("srcx/file", None),  # a prefix of a name is not the directory
        ("README.md", None),
        ("outbox/taken/0001-a", "beacon"),
        ("src//docs/./x", "lantern"),
    ],
)
def test_most_specific_row_wins(charter_root: Path, path: str, owner: str | None) -> None:
    assert owner_of(charter_root, path) == owner


def test_verdicts_for_an_agent(charter_root: Path) -> None:
    verdicts = owners.check(charter_root, "lantern", ["src/docs/x.md", "src/app.py", "free.txt"])
    assert [v.allowed for v in verdicts] == [True, False, True]
    error = owners.denied_error(verdicts)
    assert isinstance(error, Conflict)
    assert "src/app.py is owned by beacon" in str(error) and "free.txt" not in str(error)
    assert owners.denied_error(verdicts[:1]) is None


def test_paths_are_relative_to_the_root(charter_root: Path) -> None:
    for bad in ("../outside", "src/../../x", ""):
        with pytest.raises(MailslotError):
            owners.check(charter_root, "lantern", [bad])
    [v] = owners.check(charter_root, "lantern", [str(charter_root / "src/app.py")])
    assert v.path == "src/app.py" and v.owner == "beacon"
    with pytest.raises(MailslotError, match="outside the bus root"):
        owners.check(charter_root, "lantern", ["/etc/passwd"])


def test_equal_rows_with_different_writers_do_not_resolve(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(
        "| path | writer |\n|---|---|\n| a/*.md | x |\n| a/?.md | y |\n| a/b.md | z |\n"
    )
    with pytest.raises(Unresolved, match="owned equally"):
        owners.check(root, "x", ["a/c.md"])
    assert owner_of(root, "a/b.md") == "z"  # an exact path is more specific


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ("| path | writer |\n|---|---|\n| src/ | beacon, lantern |\n", "one writer"),
        ("| path | writer |\n|---|---|\n| ../up/ | beacon |\n", r"line 3.*'\.\.'"),
        ("| path | writer |\n|---|---|\n| src/ | Not Valid! |\n", "line 3"),
        ("| path | who |\n|---|---|\n| src/ | beacon |\n", "needs a writer"),
        ("just prose\n", "no table"),
    ],
)
def test_unreadable_charter_is_an_error(root: Path, table: str, error: str) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(table)
    with pytest.raises(FormatError, match=error):
        owners.check(root, "beacon", ["src/x"])


def test_no_charter_means_free(tmp_path: Path) -> None:
    (tmp_path / "LOG.md").write_text("")
    [v] = owners.check(tmp_path, "anyone", ["any/path"])
    assert v.allowed and v.owner is None


# -- the git hook, for real ------------------------------------------------------------------


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


def test_show_warns_about_likely_mistakes(root: Path) -> None:
    (root / "src").mkdir()
    (root / "DIVISION-OF-WORK.md").write_text(
        "| path | writer |\n|---|---|\n| src | beacon |\n| docs/ | lantern |\n"
    )
    shown = owners.show(root)
    assert [r["path"] for r in shown["rules"]] == ["src", "docs/"]
    assert any("'src' is a directory here" in w for w in shown["warnings"])
    assert any("nobody may take" in w for w in shown["warnings"])


def test_show_warns_about_a_path_on_two_rows(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(
        "| path | writer |\n|---|---|\n| docs/ | lantern |\n| outbox/taken/ | beacon |\n"
        "| docs/ | beacon |\n| outbox/taken/ | beacon |\n"
    )
    warnings = owners.show(root)["warnings"]
    assert "lines 3 and 5 both own 'docs/', for lantern and beacon" in warnings[0]
    assert warnings[1] == "line 6 repeats line 4 ('outbox/taken/')"
    with pytest.raises(MailslotError, match="owned equally"):  # what the warning foretells
        owners.check(root, "lantern", ["docs/guide.md"])


def test_a_symlink_does_not_launder_a_write_into_an_owned_path(root: Path) -> None:
    (root / "docs").mkdir()
    (root / "other").mkdir()
    os.symlink("../docs", root / "other" / "link")
    [v] = owners.check(root, "beacon", ["other/link/guide.md"])
    assert not v.allowed and v.owner == "lantern"
    [v] = owners.check(root, "lantern", ["other/link/guide.md"])
    assert v.allowed
    os.symlink("/etc", root / "escape")
    with pytest.raises(MailslotError, match="outside the bus"):
        owners.check(root, "beacon", ["escape/passwd"])

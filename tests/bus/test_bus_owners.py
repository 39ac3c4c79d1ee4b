"""The charter: nested paths, globs, most specific row wins; what ``owners show`` warns about."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bus_helpers import CHARTER

from mailslot.bus import owners
from mailslot.core.errors import Conflict, FormatError, MailslotError, Unresolved


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

"""The charter in the words people write it: `| Path | Sole writer |`, `owner`, `path → writer`
lines, tables without edge pipes (`Path | Writer`), rows that start with the bus folder's own
name; whatever cannot be read fails closed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mailslot.bus import owners
from mailslot.core.errors import FormatError

# The bus of the fixture is a folder called "shared", as in the description of the bus: its
# charter names paths the way that description does, with "shared/" in front.
SOLE_WRITER_TABLE = """\
# Division of work

shared/DIVISION-OF-WORK.md holds the file-tree ownership table: path → sole writer.

| Path | Sole writer |
|------|-------------|
| shared/TASKS.md | beacon |
| shared/tasks-lantern.md | beacon |
| shared/outbox/taken/ | beacon |
| shared/docs/ | lantern |
"""

ARROW_LINES = """\
# Division of work

path → sole writer

- shared/TASKS.md → beacon
- `shared/tasks-lantern.md` -> beacon (the coordinator writes assignments in)
* shared/outbox/taken/ → **beacon** — the build agent consumes the outbox
1. shared/docs/ -> lantern

<!-- an HTML comment --> is not an arrow

```
example/ -> nobody   (inside a fence: an example, not a row)
```
"""

OWNER_TABLE = """\
| File | Owner | why |
|---|---|---|
| shared/TASKS.md | Beacon | coordinator |
| outbox/taken/ | beacon | consumer |
| docs/ | lantern | |
"""


# GitHub-flavoured markdown: the pipes at a table's edges are optional.
PIPELESS_TABLE = """\
Path | Writer
--- | ---
shared/TASKS.md | beacon
shared/tasks-lantern.md | beacon
shared/outbox/taken/ | beacon
shared/docs/ | lantern
"""


# A readable table: what follows it must not be dropped in silence for its sake.
TAKEN_TABLE = "| path | writer |\n|---|---|\n| outbox/taken/ | beacon |\n"


def check(run_cli, root: Path, agent: str, *paths: str):
    return run_cli("owners", "check", "--as", agent, *paths, env={"MAILSLOT_ROOT": str(root)})


@pytest.mark.parametrize("charter", [SOLE_WRITER_TABLE, ARROW_LINES, OWNER_TABLE, PIPELESS_TABLE])
def test_the_charter_in_its_own_words_is_enforced(root: Path, run_cli, charter: str) -> None:
    assert root.name == "shared"
    (root / "DIVISION-OF-WORK.md").write_text(charter)
    r = check(run_cli, root, "beacon", "TASKS.md", "outbox/taken/0001-card.png", "free.txt")
    assert r.returncode == 0, r.stderr
    r = check(run_cli, root, "lantern", "TASKS.md")
    assert r.returncode == 1 and "TASKS.md is owned by beacon" in r.stderr
    r = check(run_cli, root, "lantern", "docs/guide.md")
    assert r.returncode == 0, r.stderr
    r = check(run_cli, root, "beacon", "docs/guide.md")
    assert r.returncode == 1 and "owned by lantern" in r.stderr


def test_a_row_with_the_bus_folders_name_owns_the_path_inside(root: Path, run_cli) -> None:
    """`shared/LOG.md` in the bus `shared` owns shared/LOG.md, never shared/shared/LOG.md."""
    (root / "DIVISION-OF-WORK.md").write_text(
        "| path | writer |\n|---|---|\n| shared/LOG.md | beacon |\n| outbox/taken/ | beacon |\n"
    )
    r = check(run_cli, root, "lantern", "LOG.md")
    assert r.returncode == 1 and "LOG.md is owned by beacon" in r.stderr
    assert [r.pattern for r in owners.load(root).rules] == ["LOG.md", "outbox/taken/"]


def test_a_row_naming_the_bus_folder_is_refused_when_ambiguous(root: Path, run_cli) -> None:
    (root / "shared").mkdir()  # a folder inside the bus with the bus's own name
    (root / "DIVISION-OF-WORK.md").write_text("| path | writer |\n|---|---|\n| shared/x | b |\n")
    r = check(run_cli, root, "lantern", "x")
    assert r.returncode == 1 and "line 3" in r.stderr and "which one is meant" in r.stderr


@pytest.mark.parametrize(
    ("charter", "error"),
    [
        ("- shared/LOG.md → beacon and lantern\n", "line 1.*one writer"),
        ("shared/LOG.md → beacon, lantern\n", "line 1.*one writer"),
        ("Handoffs go lantern -> beacon -> tidal\n", "line 1.*one arrow"),
        ("| Path | Who writes |\n|---|---|\n| shared/LOG.md | beacon |\n", "line 1.*writer"),
        ("| Agent | Sole writer |\n|---|---|\n| lantern | beacon |\n", "line 1.*path"),
        ("| path | writer |\n|---|---|\n| shared/ | beacon |\n", "line 3.*bus folder itself"),
        # Beside a readable table, each of these fails closed instead of owning nothing in silence.
        (TAKEN_TABLE + "- shared/TASKS.md \u27f6 beacon\n", "line 4.*not an arrow"),
        (TAKEN_TABLE + "- shared/TASKS.md \u21d2 beacon\n", "line 4.*not an arrow"),
        (TAKEN_TABLE + "- shared/TASKS.md => beacon\n", "line 4.*not an arrow"),
        (TAKEN_TABLE + "- shared/TASKS.md --> beacon\n", "line 4.*not an arrow"),
        (TAKEN_TABLE + "- shared/TASKS.md \u2014> beacon\n", "line 4.*not an arrow"),
        (TAKEN_TABLE + "\n| shared/TASKS.md | beacon |\n", "line 5.*no header"),
        (TAKEN_TABLE + "```\nexample/ -> nobody\n", "line 4.*never closed"),
        (TAKEN_TABLE + "```\nexample\n~~~\nshared/TASKS.md -> beacon\n", "line 4.*never closed"),
    ],
)
def test_a_row_that_cannot_be_understood_fails_closed(
    root: Path, run_cli, charter: str, error: str
) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(charter)
    with pytest.raises(FormatError, match=error):
        owners.load(root)
    r = check(run_cli, root, "beacon", "free.txt")
    assert r.returncode == 1 and "DIVISION-OF-WORK.md" in r.stderr


def test_show_flags_rows_that_match_no_file(root: Path, run_cli) -> None:
    (root / "docs").mkdir()
    (root / "DIVISION-OF-WORK.md").write_text(
        "| path | writer |\n|---|---|\n| shared/TASKS.md | beacon |\n| TAKS.md | beacon |\n"
        "| docs/*.md | lantern |\n| outbox/taken/ | beacon |\n"
    )
    warnings = owners.show(root)["warnings"]
    assert warnings == [
        f"line 4: 'TAKS.md' matches no file or folder in the bus ({root}); it protects "
        "nothing until one exists",
        f"line 5: 'docs/*.md' matches no file or folder in the bus ({root}); it protects "
        "nothing until one exists",
    ]
    (root / "docs" / "guide.md").write_text("x")
    r = run_cli("owners", "show", env={"MAILSLOT_ROOT": str(root)})
    assert r.returncode == 0 and "warning: line 4: 'TAKS.md' matches no file" in r.stdout
    assert "docs/*.md' matches" not in r.stdout


def test_an_html_comment_beside_the_table_is_not_a_row(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(
        TAKEN_TABLE + "<!-- TASKS.md --> beacon, once -->\n<!--\nmulti-line\n-->\n"
    )
    assert [r.pattern for r in owners.load(root).rules] == ["outbox/taken/"]


def test_a_checked_path_with_the_bus_folders_name_is_the_path_inside(root: Path, run_cli) -> None:
    """As the charter's rows read `shared/site/`, so a check of `shared/site/x` means site/x."""
    (root / "DIVISION-OF-WORK.md").write_text(TAKEN_TABLE + "| shared/site/ | tidal |\n")
    r = check(run_cli, root, "lantern", "shared/site/x", "shared/free.txt")
    assert r.returncode == 1 and "site/x is owned by tidal" in r.stderr
    assert "free.txt" not in r.stderr
    assert [v.path for v in owners.check(root, "tidal", ["shared/site/x"])] == ["site/x"]


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_charter_that_is_not_a_bounded_file_fails_closed_at_once(
    root: Path, run_cli, kind: str
) -> None:
    charter = root / "DIVISION-OF-WORK.md"
    charter.unlink()
    if kind == "fifo":
        os.mkfifo(charter)  # nobody writes it: an unbounded read would wait for ever
    elif kind == "device":
        charter.symlink_to("/dev/zero")  # would feed an unbounded read without end
    else:
        charter.write_text(TAKEN_TABLE + "<!-- padding -->\n" * 70_000)
    r = run_cli(
        "owners",
        "check",
        "--as",
        "beacon",
        "free.txt",
        env={"MAILSLOT_ROOT": str(root)},
        timeout=30,
    )
    assert r.returncode == 1 and "DIVISION-OF-WORK.md" in r.stderr


def test_a_table_without_edge_pipes_beside_a_readable_table_is_read(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(
        TAKEN_TABLE + "\nPath | Writer\n--- | ---\nLOG.md | tidal\n`TASKS.md` | **beacon**\n"
    )
    rules = {r.pattern: (r.writer, r.lineno) for r in owners.load(root).rules}
    assert rules == {
        "outbox/taken/": ("beacon", 3),
        "LOG.md": ("tidal", 7),
        "TASKS.md": ("beacon", 8),
    }
    [verdict] = owners.check(root, "beacon", ["LOG.md"])
    assert verdict.owner == "tidal" and not verdict.allowed


def test_a_row_without_edge_pipes_under_a_table_is_one_of_its_rows(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(TAKEN_TABLE + "LOG.md | tidal\n")
    assert [(r.pattern, r.writer) for r in owners.load(root).rules] == [
        ("outbox/taken/", "beacon"),
        ("LOG.md", "tidal"),
    ]
    (root / "DIVISION-OF-WORK.md").write_text(TAKEN_TABLE + "LOG.md | tidal, beacon\n")
    with pytest.raises(FormatError, match=r"line 4.*one writer"):
        owners.load(root)


def test_a_lone_dashed_rule_under_a_piped_line_is_not_a_table(root: Path) -> None:
    (root / "DIVISION-OF-WORK.md").write_text(TAKEN_TABLE + "\nnot | a table\n---\n")
    assert [r.pattern for r in owners.load(root).rules] == ["outbox/taken/"]

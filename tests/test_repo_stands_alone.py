"""The repository stands alone: no tracked file points at documents a clone does not have.

A contributor who clones mailslot gets the code, the tests and ``docs/`` (the design is
``docs/design.md``, the rules ``docs/contributing.md``). A docstring, comment, page or test that
explains itself by a design file or a specification kept elsewhere (a path outside the
repository, ``DESIGN.md``, a numbered source document) explains nothing to that reader, so each
names the behaviour instead: "the ``mkdir`` lock that hand-run bash agents take", not a number.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# What a reference to something outside the repository looks like.
OUTSIDE = re.compile(
    r"/work/"  # an absolute path on the machine the code was written on
    r"|\.\./shared\b"  # a sibling folder of the checkout
    r"|\b(?:DESIGN|STYLE)\.md\b"  # a design file that is not in the repository (docs/ is lowercase)
    r"|\bDESIGN\b"  # "DESIGN principle 5", "DESIGN's fields"
    r"|(?i:\bseeds?\b)"  # "the seed's bug", "seed 002", "seeds/"
    r"|(?i:\bseed-?\d{3})"  # "seed-002 agents", "seed002"
    r"|(?i:\bissues? \d+\b)"  # "(issue 8)": a tracker a clone does not come with
)
# A random number generator's seed is the repository's own word, not a reference.
RNG_SEED = re.compile(r"(?i)random|\brng\b|\bseed(?:: int\b|=\w|\))")


def _points_outside(line: str) -> bool:
    hit = OUTSIDE.search(line)
    if hit is None:
        return False
    if hit[0].lower() in ("seed", "seeds") and RNG_SEED.search(line):
        return any(m[0].lower() not in ("seed", "seeds") for m in OUTSIDE.finditer(line))
    return True


THIS_FILE = "tests/test_repo_stands_alone.py"  # holds the patterns themselves


def _tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [p for p in out.decode().split("\0") if p and p != THIS_FILE]


def _references(paths: list[str]) -> list[str]:
    found = []
    for rel in paths:
        try:
            text = (ROOT / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary, or deleted in the working tree
        for lineno, line in enumerate(text.splitlines(), 1):
            if _points_outside(line):
                found.append(f"{rel}:{lineno}: {line.strip()[:120]}")
    return found


def test_no_tracked_file_points_outside_the_repository() -> None:
    found = _references(_tracked())
    assert not found, "references to files outside the repository:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "see /work/shared/DESIGN.md",
        "the seed's live bug",
        "Seed 002 spins every 0.1 s",
        "hand-run seed-002 bash agents",
        "(DESIGN principle 5)",
        "read ../shared/STYLE.md",
        "Strict addressing (issue 8): tasks add",
    ],
)
def test_the_pattern_finds_an_outside_reference(line: str) -> None:
    assert _points_outside(line)


@pytest.mark.parametrize(
    "line",
    [
        "see docs/design.md, principle 5",
        "the mkdir lock that hand-run bash agents take",
        "mailslot bus init shared/ --consumer beacon",
        "def seed_write(chat_file: Path) -> None:",
        "The board is public by design",
        "an issue nobody filed",
        "    def __init__(self, seed: int) -> None:",
        "        self.rng = random.Random(seed)",
    ],
)
def test_the_pattern_leaves_the_repository_s_own_words(line: str) -> None:
    assert not _points_outside(line)


def test_the_design_and_the_rules_are_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("docs/design.md", "docs/contributing.md"):
        assert (ROOT / page).is_file()
        assert f"]({page})" in readme


def test_every_relative_link_in_the_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "links to files the repository does not have:\n" + "\n".join(broken)

"""The ownership charter ``DIVISION-OF-WORK.md``: which agent is the sole writer of which path.

The charter is a markdown table with a path column (``path``, ``file``) and a writer column
(``writer``, ``sole writer``, ``owner``), header names case-insensitive, other columns allowed,
several tables allowed; or lines ``path → writer`` (``->`` too, a list bullet allowed, a comment
after the writer in parentheses or after a dash)::

    | Path          | Sole writer | why                      |
    |---------------|-------------|--------------------------|
    | src/          | beacon      | the build agent          |
    | docs/*.md     | lantern     |                          |
    | outbox/taken/ | beacon      | the outbox consumer      |

    - shared/LOG.md → beacon
    - shared/tasks-lantern.md -> lantern (the coordinator writes it)

Rules, each enforced here and nowhere else:

* A path ending in ``/`` owns that directory and everything below it. ``*`` and ``?`` match
  within one path segment, ``**`` across segments, ``[...]`` a character class. Anything else is
  an exact path.
* The most specific matching row wins: most literal (non-wildcard) characters, then an exact
  path over a pattern. Two equally specific rows naming different writers do not resolve, and an
  unresolved check refuses (fail safe).
* A path no row matches is free to all.
* Paths are relative to the bus root: ``./`` and ``//`` are normalised; ``..`` and paths outside
  the root are refused, in the charter and on the command line alike. A row that starts with the
  bus folder's own name (``shared/LOG.md`` in a bus called ``shared``, as people write the
  charter) means the path inside it; if the bus also holds a folder of that name, the row is
  ambiguous and refused.
* A charter that cannot be read exactly (no table with both columns, a table with only one of
  them, an arrow line that is not ``path → one writer``, two writers in one cell, a bad name) is
  a ``FormatError``: a misread charter must stop a commit, not wave it through. Lines inside
  code fences are examples, not rows.
* ``show`` warns about rows that match nothing on disk: a typo there owns nothing, silently.

The git pre-commit hook runs ``mailslot owners pre-commit``: the committer's identity comes from
``git config mailslot.agent`` in that checkout, never from the commit message, and file names
travel NUL-separated from ``git diff -z`` straight into Python, never through a shell.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from mailslot.bus.layout import CHARTER, TAKEN, Layout
from mailslot.core.errors import (
    Conflict,
    FormatError,
    InvalidPath,
    MailslotError,
    NotFound,
    Unresolved,
)
from mailslot.core.fsio import atomic_write, read_from
from mailslot.core.names import validate_agent
from mailslot.core.record import FrozenRecord

__all__ = [
    "HOOK_MARK",
    "Charter",
    "Rule",
    "Verdict",
    "check",
    "check_staged",
    "consumer",
    "denied_error",
    "install_hook",
    "load",
    "normalise",
    "parse",
    "show",
]

HOOK_MARK = "# mailslot owners hook"
GIT_TIMEOUT = 60  # seconds; a git plumbing call on a local repo takes milliseconds
# Header words people use for the two columns (and for the two sides of an arrow line).
PATH_WORDS = frozenset({"path", "paths", "file", "files", "file or folder", "folder"})
WRITER_WORDS = frozenset({"writer", "sole writer", "owner", "sole owner", "owned by", "written by"})
# A charter is a page of rows; it is read whole before every check, so a bounded read (a FIFO
# or a device in its place is refused, never waited on or read without end).
CHARTER_MAX_BYTES = 1 << 20
# ``show`` looks for a match of each row among at most this many names (a bus is small).
SHOW_SCAN_MAX = 20_000


def normalise(path: str, *, where: str = "path") -> str:
    """``path`` relative to the root with ``./`` and ``//`` removed, a trailing ``/`` kept.

    Raises ``InvalidPath`` for an empty path, an absolute path, NUL or a ``..`` segment. Any
    other character is data (a file name may hold a newline or a ``$``).
    """
    if not path or "\x00" in path:
        raise InvalidPath(f"invalid {where} {path!r}: empty or NUL")
    if path.startswith("/"):
        raise InvalidPath(f"invalid {where} {path!r}: paths are relative to the bus root")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidPath(f"invalid {where} {path!r}: '..' would leave the bus root")
    if not parts:
        raise InvalidPath(f"invalid {where} {path!r}: names the root itself")
    return "/".join(parts) + ("/" if path.endswith("/") else "")


def _translate(body: str) -> tuple[str, int, bool]:
    """Regex for a glob, its count of literal characters, and whether it had any wildcard."""
    out: list[str] = []
    literal = 0
    wild = False
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i, wild = i + 3, True
        elif body.startswith("**", i):
            out.append(".*")
            i, wild = i + 2, True
        elif body[i] == "*":
            out.append("[^/]*")
            i, wild = i + 1, True
        elif body[i] == "?":
            out.append("[^/]")
            i, wild = i + 1, True
        elif body[i] == "[" and (end := body.find("]", i + 2)) != -1:
            inner = body[i + 1 : end]
            neg = inner.startswith("!")
            inner = inner[1:] if neg else inner
            out.append("[" + ("^/" if neg else "") + inner.replace("\\", "\\\\") + "]")
            i, wild = end + 1, True
        else:
            out.append(re.escape(body[i]))
            literal += 1
            i += 1
    return "".join(out), literal, wild


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> tuple[re.Pattern[str], int, bool]:
    regex, literal, wild = _translate(pattern.rstrip("/"))
    tail = "(?:/.*)?" if pattern.endswith("/") else ""
    return re.compile(f"^{regex}{tail}$", re.DOTALL), literal, wild


class Rule(FrozenRecord):
    """One charter row: ``pattern`` (normalised) is written only by ``writer``."""

    __match_args__ = ("pattern", "writer", "lineno")
    __slots__ = ("lineno", "pattern", "writer")
    pattern: str
    writer: str
    lineno: int

    def __init__(self, pattern: str, writer: str, lineno: int) -> None:
        init = object.__setattr__
        init(self, "pattern", pattern)
        init(self, "writer", writer)
        init(self, "lineno", lineno)

    @property
    def is_dir(self) -> bool:
        return self.pattern.endswith("/")

    def _compiled(self) -> tuple[re.Pattern[str], int, bool]:
        return _compile(self.pattern)

    def matches(self, path: str) -> bool:
        """Whether this row owns the normalised ``path``."""
        return bool(self._compiled()[0].match(path.rstrip("/")))

    def specificity(self) -> tuple[int, int]:
        """Sort key: literal characters, then exact path (1) over pattern or directory (0)."""
        _, literal, wild = self._compiled()
        return literal, 0 if (wild or self.is_dir) else 1

    def to_json(self) -> dict[str, Any]:
        return {"path": self.pattern, "writer": self.writer, "line": self.lineno}


class Verdict(FrozenRecord):
    """Whether ``agent`` may write ``path``; ``rule`` is the row that decided (None: free)."""

    __match_args__ = ("path", "agent", "rule")
    __slots__ = ("agent", "path", "rule")
    path: str
    agent: str
    rule: Rule | None

    def __init__(self, path: str, agent: str, rule: Rule | None) -> None:
        init = object.__setattr__
        init(self, "path", path)
        init(self, "agent", agent)
        init(self, "rule", rule)

    @property
    def owner(self) -> str | None:
        return self.rule.writer if self.rule else None

    @property
    def allowed(self) -> bool:
        return self.rule is None or self.rule.writer == self.agent

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "owner": self.owner,
            "rule": self.rule.pattern if self.rule else None,
            "allowed": self.allowed,
        }


class Charter(FrozenRecord):
    """The parsed rows of a charter (``path`` is ``None`` for a bus without one).

    ``Rule``, ``Verdict`` and this are ``core.record`` records, not dataclasses: ``outbox put``
    and ``take`` load this module on every start."""

    __match_args__ = ("rules", "path")
    __slots__ = ("path", "rules")
    rules: list[Rule]
    path: Path | None

    def __init__(self, rules: list[Rule], path: Path | None = None) -> None:
        init = object.__setattr__
        init(self, "rules", rules)
        init(self, "path", path)

    def owner(self, path: str) -> Rule | None:
        """The deciding row for a normalised ``path``; ``Unresolved`` for a tie of writers."""
        hits = [r for r in self.rules if r.matches(path)]
        if not hits:
            return None
        best = max(r.specificity() for r in hits)
        top = [r for r in hits if r.specificity() == best]
        writers = {r.writer for r in top}
        if len(writers) > 1:
            rows = ", ".join(f"{r.pattern!r} ({r.writer}, line {r.lineno})" for r in top)
            raise Unresolved(
                f"{path!r} is owned equally by rows {rows}; make one more specific",
                path=self.path,
            )
        return top[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "charter": str(self.path) if self.path else None,
            "rules": [r.to_json() for r in self.rules],
        }


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", body)]


def _clean(cell: str) -> str:
    cell = cell.strip()
    for mark in ("**", "__", "`"):
        if len(cell) > 2 * len(mark) - 1 and cell.startswith(mark) and cell.endswith(mark):
            cell = cell[len(mark) : -len(mark)].strip()
    return cell


_SEPARATOR_RE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
# A cell boundary: a pipe not escaped as ``\|``.
_PIPE_RE = re.compile(r"(?<!\\)\|")


def _is_separator(line: str) -> bool:
    """Whether ``line`` is a table's delimiter row (``|---|---|`` or ``--- | ---``; a lone
    ``---`` is a rule or a heading's underline, not a table's)."""
    return _SEPARATOR_RE.match(line) is not None and "|" in line


# ``→`` or ``->`` (not the ``-->`` that closes an HTML comment).
_ARROW_RE = re.compile(r"\s*(?:\u2192|(?<!-)->(?!>))\s*")
# Arrows a person types for "→" that are not ``→``/``->``: a row written with one must not be
# read as prose beside a table (it would own nothing, silently). ``-->`` counts when something
# follows it on a line without ``<!--`` (else it closes an HTML comment).
_LOOKALIKE_RE = re.compile(
    "[\u21d2\u21e2\u2794\u2799\u279c\u279d\u279e\u27a1\u27f6\u27f9\u2b62\u2b95]"
    r"|=>|[\u2014\u2013]\s*>|--+>(?=\s*\S)"
)
# A code fence: three or more backticks or tildes (CommonMark); it closes with the same mark.
_FENCE_RE = re.compile(r"^(`{3,}|~{3,})")
_BULLET_RE = re.compile(r"^(?:#+|[-*+]|[0-9]+[.)])\s+")
# The writer of an arrow line, then nothing or a comment: ``(why)``, ``— why``, ``# why``.
_ARROW_WRITER_RE = re.compile(
    r"^[`*_]*(?P<writer>[^\s`*_()]+)[`*_]*\s*(?:\(.*\)|[\u2014\u2013]\s.*|-\s.*|#.*|:\s.*)?$"
)


def _pattern(raw: str, lineno: int, path: Path | None, root: Path | None) -> str:
    """A charter path as a normalised pattern relative to the root; ``FormatError``."""
    raw = raw.strip()
    try:
        if root is not None and raw.startswith("/"):
            for base in {str(root), os.path.realpath(root)}:
                if raw == base or raw.startswith(base.rstrip("/") + "/"):
                    raw = raw[len(base.rstrip("/")) :].lstrip("/") or "/"
        pattern = normalise(raw.removeprefix("/"), where="charter path")
        names = {root.name, Path(os.path.realpath(root)).name} if root is not None else set()
        head, _, rest = pattern.partition("/")
        name = head if head in names and not any(c in head for c in "*?[") else ""
        if name and root is not None:
            if os.path.lexists(root / name):
                raise InvalidPath(
                    f"{raw!r} starts with {name}/, the bus folder's own name, and the bus also "
                    f"holds a {name!r} of its own: which one is meant? rename one of them"
                )
            if not rest:
                raise InvalidPath(f"{raw!r} names the bus folder itself; name the paths inside it")
            pattern = normalise(rest, where="charter path")
    except InvalidPath as e:
        raise FormatError(f"line {lineno}: {e.message}", path=path) from None
    return pattern


def _writer(raw: str, lineno: int, path: Path | None) -> str:
    writer = raw.strip().lower()
    if re.search(r"[,;&\s]", writer):
        raise FormatError(
            f"line {lineno}: {raw!r}: one writer per path (the charter names a sole writer)",
            path=path,
        )
    try:
        return validate_agent(writer, "writer")
    except MailslotError as e:
        raise FormatError(f"line {lineno}: {e.message}", path=path) from None


def _column(header: list[str], words: frozenset[str]) -> int | None:
    return next((i for i, cell in enumerate(header) if cell in words), None)


def _arrow_row(line: str, lineno: int, path: Path | None, root: Path | None) -> Rule | None:
    """The rule of a ``path → writer`` line; ``None`` for the header ``path → sole writer`` (alone
    or ending a sentence); ``FormatError`` for an arrow line that is not one path, one writer."""
    body = _BULLET_RE.sub("", line.strip(), count=1)
    parts = _ARROW_RE.split(body)
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        raise FormatError(
            f"line {lineno}: {line.strip()!r} is not 'path → writer' (one arrow, one path, "
            "one writer); an arrow line is a charter row",
            path=path,
        )
    left, right = _clean(parts[0]), parts[1].strip()
    last = left.split()[-1].strip("`*_:").lower() if left.split() else ""
    if last in PATH_WORDS and _clean(right.rstrip(".;:")).lower() in WRITER_WORDS:
        return None  # the header "path → sole writer", alone or ending a sentence
    m = _ARROW_WRITER_RE.match(right)
    if m is None:
        raise FormatError(
            f"line {lineno}: {right!r}: one writer per path (the charter names a sole writer); "
            "a comment goes in parentheses or after a dash",
            path=path,
        )
    return Rule(_pattern(left, lineno, path, root), _writer(m["writer"], lineno, path), lineno)


def parse(text: str, path: Path | None = None, *, root: Path | None = None) -> Charter:
    """Parse charter markdown; ``FormatError`` naming the line for anything it cannot read.

    ``root`` is the bus directory: a row starting with its name means the path inside it.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    rules: list[Rule] = []
    tables = 0
    usable = 0
    fence: tuple[str, int] | None = None  # the open fence's mark and line
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        mark = _FENCE_RE.match(stripped)
        if fence is not None:  # closed only by the same mark, at least as long, alone
            if mark and mark[1][0] == fence[0][0] and len(mark[1]) >= len(fence[0]):
                fence = None if stripped == mark[1] else fence
            i += 1
            continue
        if mark:
            fence = (mark[1], i + 1)
            i += 1
            continue
        # GitHub-flavoured markdown: a table's pipes at the edges are optional; a header with a
        # pipe inside and a delimiter row under it (``Path | Writer`` / ``--- | ---``) is one.
        table = i + 1 < len(lines) and _is_separator(lines[i + 1])
        if not stripped.startswith("|") and not (table and _PIPE_RE.search(stripped)):
            if _ARROW_RE.search(stripped) and not stripped.startswith(">"):
                rule = _arrow_row(stripped, i + 1, path, root)
                usable += 1
                if rule is not None:
                    rules.append(rule)
            elif (odd := _LOOKALIKE_RE.search(stripped)) and "<!--" not in stripped:
                raise FormatError(
                    f"line {i + 1}: {stripped!r}: {odd[0]!r} is not an arrow mailslot reads; "
                    "write 'path → writer' or 'path -> writer'",
                    path=path,
                )
            i += 1
            continue
        start = i
        i += 1
        # Under a delimiter row, a row is any non-blank line with a cell boundary in it.
        while i < len(lines) and (
            lines[i].strip().startswith("|")
            or (table and lines[i].strip() and _PIPE_RE.search(lines[i]))
        ):
            i += 1
        block = lines[start:i]
        tables += 1
        if len(block) < 2 or not _SEPARATOR_RE.match(block[1]):
            if any(len([c for c in _cells(row) if c]) >= 2 for row in block):
                raise FormatError(
                    f"line {start + 1}: a table row with no header and '|---|' line above it "
                    "(a blank line ends a table); as it stands it owns nothing",
                    path=path,
                )
            continue  # not a table, just a line starting with a pipe
        header = [_clean(c).lower() for c in _cells(block[0])]
        pcol, wcol = _column(header, PATH_WORDS), _column(header, WRITER_WORDS)
        if pcol is None and wcol is None:
            continue  # another table (who is who, a schedule): not the charter's
        if pcol is None or wcol is None:
            have, missing = (
                (header[pcol], "writer (writer, sole writer, owner)")
                if pcol is not None
                else (header[wcol or 0], "path")
            )
            raise FormatError(
                f"line {start + 1}: a table with a {have!r} column needs a {missing} column "
                "too; its rows would own nothing",
                path=path,
            )
        usable += 1
        for offset, row in enumerate(block[2:], start=start + 3):
            cells = _cells(row)
            if len(cells) <= max(pcol, wcol):
                raise FormatError(f"line {offset}: row has too few cells", path=path)
            raw_path, raw_writer = _clean(cells[pcol]), _clean(cells[wcol])
            if not raw_path and not raw_writer:
                continue
            pattern = _pattern(raw_path, offset, path, root)
            rules.append(Rule(pattern, _writer(raw_writer, offset, path), offset))
    if fence is not None:
        raise FormatError(
            f"line {fence[1]}: a code fence ({fence[0]}) that is never closed: every line after "
            "it would be an example, not a row",
            path=path,
        )
    if usable == 0:
        raise FormatError(
            f"no table with a 'path' and a 'writer' column ({tables} table(s) seen) and no "
            "'path → writer' line; an unreadable charter protects nothing",
            path=path,
        )
    return Charter(rules, path)


def load(root: Path) -> Charter:
    """The charter of the bus at ``root``; an empty one if it has none; ``FormatError``."""
    layout = Layout.at(root)
    try:
        text = read_from(layout.charter, limit=CHARTER_MAX_BYTES).decode("utf-8")
    except NotFound:
        return Charter([], None)
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 ({e.reason})", path=layout.charter) from None
    return parse(text, layout.charter, root=layout.root)


def _names(layout: Layout) -> list[str] | None:
    """Every file and folder under the root (relative), ``None`` when there are too many."""
    names: list[str] = []
    for top, dirs, files in os.walk(layout.root):
        dirs[:] = [d for d in dirs if d not in (".git", ".mailslot")]
        rel = Path(top).relative_to(layout.root).as_posix()
        for name in (*dirs, *files):
            names.append(name if rel == "." else f"{rel}/{name}")
        if len(names) > SHOW_SCAN_MAX:
            return None
    return names


def show(root: Path) -> dict[str, Any]:
    """The charter's rows plus warnings about likely mistakes; ``FormatError``, ``NotFound``.

    Warned: an exact row naming an existing directory (``src`` owns only that name; ``src/``
    would own everything below it), a path on two rows (for two writers, nobody may write it),
    the outbox without a consumer, and a row that matches no file or folder (a typo owns
    nothing).
    """
    layout = Layout.at(root)
    charter = load(root)
    warnings = [
        f"line {r.lineno}: {r.pattern!r} is a directory here but owns only that name; "
        f"write {r.pattern + '/'!r} to own everything below it"
        for r in charter.rules
        if not r.is_dir and r.specificity()[1] == 1 and (layout.root / r.pattern).is_dir()
    ]
    first: dict[str, Rule] = {}
    for r in charter.rules:
        was = first.setdefault(r.pattern, r)
        if was is r:
            continue
        if was.writer != r.writer:
            warnings.append(
                f"lines {was.lineno} and {r.lineno} both own {r.pattern!r}, for {was.writer} and "
                f"{r.writer}: every write there is refused until one row goes"
            )
        else:
            warnings.append(f"line {r.lineno} repeats line {was.lineno} ({r.pattern!r})")
    if consumer(charter) is None:
        warnings.append(f"no writer of {TAKEN}/: nobody may take from the outbox")
    names = _names(layout)
    if names is not None:
        warnings += [
            f"line {r.lineno}: {r.pattern!r} matches no file or folder in the bus "
            f"({layout.root}); it protects nothing until one exists"
            for r in charter.rules
            if not any(r.matches(n) for n in names)
        ]
    return {**charter.to_json(), "warnings": warnings}


def consumer(charter: Charter) -> str | None:
    """The outbox consumer: the writer of ``outbox/taken/``, or ``None`` if none is named."""
    rule = charter.owner(TAKEN + "/")
    return rule.writer if rule else None


def _relative(layout: Layout, path: str) -> str:
    if os.path.isabs(path):
        real = Path(os.path.realpath(path))
        root = Path(os.path.realpath(layout.root))
        if real != root and root not in real.parents:
            raise InvalidPath(f"{path!r} is outside the bus root {layout.root}")
        rel = real.relative_to(root).as_posix() + ("/" if path.endswith("/") else "")
        return normalise(rel)
    rel = normalise(path)
    # As in the charter's rows: `shared/TASKS.md` in a bus called shared (with no folder of that
    # name inside) is TASKS.md; read literally it would be a free path nobody's row matches.
    head, _, rest = rel.partition("/")
    names = {layout.root.name, Path(os.path.realpath(layout.root)).name}
    if rest and head in names and not os.path.lexists(layout.root / head):
        return normalise(rest)
    return rel


def _resolved(layout: Layout, rel: str) -> str | None:
    """Where ``rel`` really lands once symlinks in it are followed, relative to the root (``None``
    for the root itself); ``InvalidPath`` if a symlink leads out of the bus."""
    root = Path(os.path.realpath(layout.root))
    real = Path(os.path.realpath(layout.root / rel))
    if real != root and root not in real.parents:
        raise InvalidPath(f"{rel!r} leads outside the bus root {layout.root} through a symlink")
    if real == root:
        return None
    return normalise(real.relative_to(root).as_posix() + ("/" if rel.endswith("/") else ""))


def _verdict(layout: Layout, charter: Charter, agent: str, rel: str) -> Verdict:
    verdict = Verdict(rel, agent, charter.owner(rel))
    real = _resolved(layout, rel)
    if verdict.allowed and real is not None and real != rel:
        # A symlink (other/link -> ../site) must not launder a write into someone's path.
        landed = Verdict(real, agent, charter.owner(real))
        if not landed.allowed:
            return Verdict(rel, agent, landed.rule)
    return verdict


def check(
    root: Path, agent: str, paths: list[str], charter: Charter | None = None
) -> list[Verdict]:
    """One verdict per path (relative to the root, or absolute inside it) for ``agent``.

    A path through a symlink is judged where it really lands too. Raises ``InvalidName``,
    ``InvalidPath`` for a path outside the root, ``FormatError`` for an unreadable charter and
    ``Unresolved`` for a tie.
    """
    validate_agent(agent)
    layout = Layout.at(root)
    charter = charter if charter is not None else load(root)
    return [_verdict(layout, charter, agent, _relative(layout, p)) for p in paths]


def _show(path: str) -> str:
    """``path`` as typed if printable, else quoted: an error stays one line."""
    return path if path.isprintable() else repr(path)


def denied_error(verdicts: list[Verdict], verb: str = "write") -> Conflict | None:
    """A ``Conflict`` naming every denied path and its owner, or ``None`` if all are allowed."""
    denied = [v for v in verdicts if not v.allowed]
    if not denied:
        return None
    agent = denied[0].agent
    listed = "; ".join(
        f"{_show(v.path)} is owned by {v.owner} (row {v.rule.pattern!r})" for v in denied if v.rule
    )
    return Conflict(f"{agent} may not {verb}: {listed} ({CHARTER})")


# -- git hook -------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    # The user's checkout, run inside its commit: the user's config and git's GIT_INDEX_FILE hold.
    from mailslot.core.git import run_git  # here: `outbox take` checks the charter, never git

    return run_git(repo, *args, timeout=GIT_TIMEOUT, isolated=False)


def _hook_text(root: Path) -> str:
    import shlex

    command = shlex.join(
        [sys.executable, "-m", "mailslot", "owners", "pre-commit", "--root", str(root)]
    )
    return (
        "#!/bin/sh\n"
        f"{HOOK_MARK}: refuse commits that touch paths another agent owns\n"
        f"# ({CHARTER} in the bus below). Identity: git config mailslot.agent NAME\n"
        "# Staged file names go from git to mailslot as data (git diff -z), never through sh.\n"
        f"exec {command}\n"
    )


def install_hook(root: Path, repo: Path, *, agent: str | None = None, force: bool = False) -> Path:
    """Install the pre-commit hook in the checkout at ``repo``; return the hook's path.

    With ``agent``, also set ``git config mailslot.agent`` for that checkout. Raises ``Conflict``
    when a foreign pre-commit hook exists (unless ``force``), ``NotFound`` outside git,
    ``CommandFailed`` if git fails.
    """
    layout = Layout.at(root)
    if agent is not None:
        validate_agent(agent)
    try:
        hook = Path(_git(repo, "rev-parse", "--git-path", "hooks/pre-commit").strip())
    except MailslotError as e:
        if "not a git repository" not in str(e):
            raise
        raise NotFound(
            f"{Path(repo).absolute()} is not in a git checkout: run this inside the checkout "
            "the hook guards, or pass --repo DIR"
        ) from None
    if not hook.is_absolute():
        hook = (Path(repo) / hook).absolute()
    if hook.exists() and not force:
        current = hook.read_text(encoding="utf-8", errors="replace")
        if HOOK_MARK not in current:
            raise Conflict(
                "a pre-commit hook exists and is not mailslot's; pass --force to replace it",
                path=hook,
            )
    hook.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(hook, _hook_text(layout.root), mode=0o755)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    if agent is not None:
        _git(repo, "config", "mailslot.agent", agent)
    return hook


def committer(repo: Path) -> str:
    """``git config mailslot.agent`` of the checkout; ``Unresolved`` if unset or invalid."""
    try:
        name = _git(repo, "config", "--get", "mailslot.agent").strip()
    except MailslotError:
        name = ""
    if not name:
        raise Unresolved(
            "who is committing? set this checkout's identity: git config mailslot.agent NAME"
        )
    return validate_agent(name)


def check_staged(root: Path, repo: Path) -> list[Verdict]:
    """Verdicts for every staged path under the bus root; ``Conflict`` if any is denied.

    Paths outside the bus root are not the charter's business and are left out. Raises
    ``Unresolved`` without an identity, ``FormatError`` for an unreadable charter.
    """
    layout = Layout.at(root)
    agent = committer(repo)
    top = Path(os.path.realpath(_git(repo, "rev-parse", "--show-toplevel").strip()))
    names = _git(repo, "diff", "--cached", "--name-only", "--no-renames", "-z").split("\x00")
    bus = Path(os.path.realpath(layout.root))
    charter = load(root)
    verdicts = []
    for name in filter(None, names):
        full = top / name
        if full != bus and bus not in full.parents:
            continue
        rel = normalise(full.relative_to(bus).as_posix())
        verdicts.append(Verdict(rel, agent, charter.owner(rel)))
    error = denied_error(verdicts, "commit")
    if error is not None:
        raise error
    return verdicts

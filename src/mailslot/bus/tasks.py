"""Task files: ``TASKS.md`` (shared) and ``tasks-<name>.md`` (addressed to one agent).

They stay plain markdown checklists that people and agents edit by hand::

    # Tasks for lantern

    - [ ] review the guide draft in outbox/
    - [x] write the OG card

A task's id is the first 8 hex digits of ``sha256(file, text, n)``, where ``n`` counts earlier
lines of the same text in that file. Nothing is written into the file to carry it, so a hand
edit that moves, adds or ticks other lines never changes an id, and ticking a task keeps its id;
editing a task's own text makes it a new task with a new id. ``done`` accepts any unique prefix.

Invariants (no line is ever lost):

* ``add`` appends under a lock with ``O_APPEND`` (``locked_append``), never rewriting, so a line
  appended by hand at the same moment survives. A file missing its final newline gets one first.
* ``done`` rewrites the file with ``core.rewrite`` under ``.mailslot/locks/<file>.lock``: an
  atomic compare-and-swap against hand editors that take no lock (lines appended meanwhile are
  carried over, any other change makes the edit start over on the new text, a write that lands
  in the replaced file during the swap is recovered).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailslot.bus.layout import Layout
from mailslot.bus.roster import require_known
from mailslot.core.errors import AlreadyWritten, Conflict, InvalidName, InvalidValue, NotFound
from mailslot.core.fsio import atomic_create, file_lock, locked_append, read_from
from mailslot.core.limits import check_chars, check_controls, check_one_line
from mailslot.core.names import AGENT_RE
from mailslot.core.rewrite import rewrite

__all__ = ["TASK_TEXT_MAX", "Task", "add", "done", "list_tasks"]

# An assignment is a sentence or two; details go in the outbox or a linked file.
TASK_TEXT_MAX = 500
ID_LEN = 8
MIN_PREFIX = 4

_TASK_RE = re.compile(r"^(?P<lead>[ \t]*[-*+] \[)(?P<mark>[ xX])(?P<rest>\] (?P<text>.*?))[ \t]*$")
_FILE_RE = re.compile(r"^tasks-(?P<name>.+)\.md$")


@dataclass(frozen=True)
class Task:
    """One checklist line: ``owner`` is ``None`` for ``TASKS.md``."""

    id: str
    file: str
    owner: str | None
    text: str
    done: bool
    line: int

    def to_json(self) -> dict[str, Any]:
        """The task as a JSON-ready dict."""
        return {
            "id": self.id,
            "file": self.file,
            "for": self.owner,
            "text": self.text,
            "done": self.done,
            "line": self.line,
        }


def _task_id(file: str, text: str, occurrence: int) -> str:
    return hashlib.sha256(f"{file}\n{text}\n{occurrence}".encode()).hexdigest()[:ID_LEN]


def _parse(file: str, owner: str | None, data: bytes) -> list[Task]:
    tasks = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(data.decode("utf-8", errors="replace").split("\n"), start=1):
        m = _TASK_RE.match(raw.rstrip("\r"))
        if not m:
            continue
        text = m["text"]
        seen[text] = seen.get(text, 0) + 1
        tasks.append(
            Task(_task_id(file, text, seen[text]), file, owner, text, m["mark"] != " ", lineno)
        )
    return tasks


def _files(layout: Layout) -> list[tuple[Path, str | None]]:
    found: list[tuple[Path, str | None]] = []
    if layout.tasks.exists():
        found.append((layout.tasks, None))
    for path in sorted(layout.root.glob("tasks-*.md")):
        m = _FILE_RE.match(path.name)
        if m and AGENT_RE.fullmatch(m["name"]):
            found.append((path, m["name"]))
    return found


def _read(path: Path) -> bytes:
    """The file's bytes, bounded and without an append a killed writer left torn."""
    try:
        return read_from(path)
    except NotFound:
        return b""


def list_tasks(root: Path, owner: str | None = None) -> list[Task]:
    """Tasks of ``tasks-<owner>.md``, or of every task file when ``owner`` is ``None``.

    Raises ``InvalidName`` for a bad name and ``NotFound`` outside a bus.
    """
    layout = Layout.at(root)
    if owner is not None:
        path = layout.tasks_for(owner)
        return _parse(path.name, owner, _read(path))
    return [t for path, who in _files(layout) for t in _parse(path.name, who, _read(path))]


def _check_text(text: str) -> None:
    check_one_line("task text", text)
    if not text.strip():
        raise InvalidValue("task text is empty")
    check_chars("task text", text, 1, TASK_TEXT_MAX)
    check_controls("task text", text, "\t")


def add(root: Path, text: str, owner: str | None = None) -> Task:
    """Append ``- [ ] TEXT`` to ``tasks-<owner>.md`` (or ``TASKS.md``); return the new task.

    Raises ``LimitExceeded`` for a multi-line or over-long text, ``InvalidValue`` for an empty
    one, ``InvalidName`` for a bad owner, ``NotFound`` outside a bus or for an owner the bus does
    not know (``roster``: no phantom task files). Nothing is written on error.
    """
    _check_text(text)
    text = text.strip()
    layout = Layout.at(root)
    path = layout.tasks_for(owner)
    if owner is not None:
        require_known(root, owner)
    line = f"- [ ] {text}\n"
    with file_lock(layout.lock(path.stem)):
        created = False
        if not path.exists():
            title = f"# Tasks for {owner}" if owner else "# Tasks"
            with contextlib.suppress(Conflict):
                atomic_create(path, f"{title}\n\n{line}")
                created = True
        if not created:
            data = _read(path)
            prefix = "\n" if data and not data.endswith(b"\n") else ""
            locked_append(path, prefix + line, fsync=True)
        tasks = _parse(path.name, owner, _read(path))
    mine = [t for t in tasks if t.text == text and not t.done]
    if not mine:
        raise AlreadyWritten("the task vanished right after it was written", path=path)
    return mine[-1]


def _find(layout: Layout, task_id: str) -> tuple[Path, str | None, Task]:
    task_id = task_id.strip().lower()
    if not re.fullmatch(f"[0-9a-f]{{{MIN_PREFIX},{ID_LEN}}}", task_id):
        raise InvalidName(
            "task id", task_id, f"{MIN_PREFIX}-{ID_LEN} hex digits (see `tasks list`)"
        )
    hits = [
        (path, who, t)
        for path, who in _files(layout)
        for t in _parse(path.name, who, _read(path))
        if t.id.startswith(task_id)
    ]
    if not hits:
        raise NotFound(f"no task with id {task_id} (ids change when a task's text is edited)")
    if len(hits) > 1:
        names = ", ".join(f"{t.id} in {p.name}" for p, _, t in hits)
        raise Conflict(f"task id {task_id} is ambiguous ({names}); give more digits")
    return hits[0]


def _tick(task_id: str, file: str) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        lines = data.decode("utf-8", errors="surrogateescape").split("\n")
        seen: dict[str, int] = {}
        for i, raw in enumerate(lines):
            m = _TASK_RE.match(raw.rstrip("\r"))
            if not m:
                continue
            seen[m["text"]] = seen.get(m["text"], 0) + 1
            if _task_id(file, m["text"], seen[m["text"]]) == task_id:
                if m["mark"] != " ":
                    return data
                lines[i] = raw[: m.start("mark")] + "x" + raw[m.end("mark") :]
                return "\n".join(lines).encode("utf-8", errors="surrogateescape")
        raise NotFound(f"task {task_id} changed or vanished while being ticked", path=file)

    return edit


def done(root: Path, task_id: str) -> Task:
    """Tick the task whose id starts with ``task_id``; ticking a done task changes nothing.

    Raises ``NotFound`` for no match, ``Conflict`` for an ambiguous prefix, ``InvalidName`` for
    a malformed id.
    """
    layout = Layout.at(root)
    path, owner, task = _find(layout, task_id)
    rewrite(path, _tick(task.id, path.name), lock=layout.lock(path.stem))
    for t in _parse(path.name, owner, _read(path)):
        if t.id == task.id:
            return t
    raise NotFound(f"task {task.id} vanished after it was ticked", path=path)

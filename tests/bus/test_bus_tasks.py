"""Task files: markdown checklists that stay hand-editable; ids survive edits; no lost lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from bus_helpers import finish, release, spawn

from mailslot.bus import tasks
from mailslot.core.errors import Conflict, InvalidValue, LimitExceeded, MailslotError, NotFound


def test_add_creates_a_readable_checklist(root: Path) -> None:
    task = tasks.add(root, "review the guide draft in outbox/", "lantern")
    text = (root / "tasks-lantern.md").read_text()
    assert text == "# Tasks for lantern\n\n- [ ] review the guide draft in outbox/\n"
    assert task.file == "tasks-lantern.md" and task.owner == "lantern" and not task.done
    shared = tasks.add(root, "anyone: rotate the token")
    assert shared.file == "TASKS.md" and shared.owner is None
    assert (root / "TASKS.md").read_text().endswith("- [ ] anyone: rotate the token\n")


def test_ids_survive_hand_edits_and_ticking(root: Path) -> None:
    a = tasks.add(root, "write the OG card", "lantern")
    b = tasks.add(root, "review the guide", "lantern")
    path = root / "tasks-lantern.md"
    # a person inserts a task at the top, ticks b by hand, adds prose and a nested item
    body = path.read_text().replace("- [ ] review the guide", "* [X] review the guide")
    body = body.replace("# Tasks for lantern\n", "# Tasks for lantern\n\nSome prose.\n- [ ] new\n")
    path.write_text(body + "  - [ ] nested detail\n")
    listed = {t.text: t for t in tasks.list_tasks(root, "lantern")}
    assert listed["write the OG card"].id == a.id and not listed["write the OG card"].done
    assert listed["review the guide"].id == b.id and listed["review the guide"].done
    assert "nested detail" in listed and "new" in listed
    done = tasks.done(root, a.id)
    assert done.id == a.id and done.done
    assert "- [x] write the OG card" in path.read_text()
    assert "Some prose." in path.read_text() and "* [X] review the guide" in path.read_text()


def test_duplicate_texts_get_distinct_ids(root: Path) -> None:
    first = tasks.add(root, "deploy", "beacon")
    second = tasks.add(root, "deploy", "beacon")
    assert first.id != second.id
    tasks.done(root, second.id)
    assert [t.done for t in tasks.list_tasks(root, "beacon")] == [False, True]


def test_done_by_prefix_idempotent_and_errors(root: Path) -> None:
    t = tasks.add(root, "one", "lantern")
    assert tasks.done(root, t.id[:4].upper()).done
    before = (root / "tasks-lantern.md").read_bytes()
    assert tasks.done(root, t.id).done  # ticking a done task changes nothing
    assert (root / "tasks-lantern.md").read_bytes() == before
    with pytest.raises(NotFound):
        tasks.done(root, "0000000")
    with pytest.raises(MailslotError, match="invalid task id"):
        tasks.done(root, "../x")


def test_ambiguous_prefix(root: Path, monkeypatch) -> None:
    monkeypatch.setattr(tasks, "_task_id", lambda file, text, n: "abcd" + f"{n:04d}")
    tasks.add(root, "a", "lantern")
    tasks.add(root, "b", "lantern")
    with pytest.raises(Conflict, match="ambiguous"):
        tasks.done(root, "abcd")


@pytest.mark.parametrize(
    ("text", "error"),
    [("a\nb", LimitExceeded), (" ", MailslotError), ("a NUL\x00", InvalidValue)],
)
def test_bad_text_refused(root: Path, text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        tasks.add(root, text, "lantern")
    assert not (root / "tasks-lantern.md").exists()


def test_bad_owner_refused(root: Path) -> None:
    with pytest.raises(MailslotError, match="invalid agent name"):
        tasks.add(root, "x", "../evil")


def test_list_every_file(root: Path) -> None:
    tasks.add(root, "shared")
    tasks.add(root, "for lantern", "lantern")
    tasks.add(root, "for beacon", "beacon")
    (root / "tasks-Not A Name.md").write_text("- [ ] ignored\n")
    got = [(t.file, t.text) for t in tasks.list_tasks(root)]
    assert got == [
        ("TASKS.md", "shared"),
        ("tasks-beacon.md", "for beacon"),
        ("tasks-lantern.md", "for lantern"),
    ]
    assert tasks.list_tasks(root, "nobody") == []


def test_missing_final_newline_gets_one(root: Path) -> None:
    (root / "tasks-lantern.md").write_text("- [ ] typed by hand")
    tasks.add(root, "mine", "lantern")
    assert (root / "tasks-lantern.md").read_text() == "- [ ] typed by hand\n- [ ] mine\n"


def test_rewrite_keeps_mode(root: Path) -> None:
    path = root / "tasks-lantern.md"
    path.write_text("- [ ] a\n")
    path.chmod(0o640)
    t = tasks.list_tasks(root, "lantern")[0]
    tasks.done(root, t.id)
    assert path.stat().st_mode & 0o777 == 0o640


EDITOR = r"""
import sys
from pathlib import Path
from mailslot.bus import tasks
root, me, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.stdin.readline()
for i in range(n):
    t = tasks.add(root, f"{me} task {i}", "lantern")
    if i % 2 == 0:
        tasks.done(root, t.id)
"""


@pytest.mark.slow
def test_concurrent_task_edits_lose_nothing(root: Path) -> None:
    writers, per = 6, 30
    procs = [spawn(EDITOR, str(root), f"w{w}", str(per)) for w in range(writers)]
    release(procs)
    finish(procs)
    got = {t.text: t.done for t in tasks.list_tasks(root, "lantern")}
    assert len(got) == writers * per
    for w in range(writers):
        for i in range(per):
            assert got[f"w{w} task {i}"] == (i % 2 == 0)


HAND_APPENDER = r"""
import sys, time
from pathlib import Path
path, n = Path(sys.argv[1]), int(sys.argv[2])
sys.stdin.readline()
for i in range(n):
    with open(path, "a", encoding="utf-8") as f:  # like `echo ... >> tasks-lantern.md`: no lock
        f.write(f"- [ ] by hand {i}\n")
    time.sleep(0.001)
"""

TICKER = r"""
import sys
from pathlib import Path
from mailslot.bus import tasks
root, n = Path(sys.argv[1]), int(sys.argv[2])
sys.stdin.readline()
for i in range(n):
    tasks.done(root, tasks.add(root, f"mailslot {i}", "lantern").id)
"""


@pytest.mark.slow
def test_hand_appends_survive_concurrent_ticks(root: Path) -> None:
    """Appends made without any lock land while mailslot rewrites the file; none is lost."""
    tasks.add(root, "first", "lantern")
    path = root / "tasks-lantern.md"
    procs = [spawn(HAND_APPENDER, str(path), "300"), spawn(TICKER, str(root), "60")]
    release(procs)
    finish(procs)
    got = {t.text: t.done for t in tasks.list_tasks(root, "lantern")}
    assert [i for i in range(300) if f"by hand {i}" not in got] == []
    assert all(got[f"mailslot {i}"] for i in range(60))

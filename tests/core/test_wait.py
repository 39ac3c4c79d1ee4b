"""Waiting on file events: armed before the check, across real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mailslot.core import wait as wait_mod
from mailslot.core.errors import WaitTimeout
from mailslot.core.fsio import atomic_create, locked_append
from mailslot.core.wait import (
    APPEARED,
    CLOSED,
    GONE,
    WRITING,
    Watch,
    being_written,
    settled,
    wait_for_change,
    wait_until,
)


@pytest.mark.parametrize("force_poll", [False, True])
def test_write_between_check_and_wait_is_not_missed(tmp_path: Path, force_poll: bool) -> None:
    with Watch([tmp_path], force_poll=force_poll) as w:
        assert not any(tmp_path.iterdir())  # the check: nothing yet
        atomic_create(tmp_path / "0001-x.md", "x")  # lands in the gap
        assert w.wait(5.0), "the event queued before wait() must wake it"


def test_kernel_backend_is_used_on_linux(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    with Watch([tmp_path]) as w:
        assert not w.polling


def test_timeout_returns_false(tmp_path: Path) -> None:
    assert wait_for_change([tmp_path], 0.05) is False


def test_missing_path_watches_parent_and_sees_it_appear(tmp_path: Path) -> None:
    target = tmp_path / "chat.txt"
    with Watch([target]) as w:
        target.write_text("x")
        assert w.wait(5.0)


def test_wait_until_follows_new_subdirectories(tmp_path: Path) -> None:
    inbox = tmp_path / "to-claude"
    inbox.mkdir()

    def paths() -> list[Path]:
        return [inbox, *[p for p in inbox.iterdir() if p.is_dir()]]

    def check() -> Path | None:
        found = sorted(inbox.glob("*/0*.md"))
        return found[0] if found else None

    def writer() -> None:
        time.sleep(0.05)
        (inbox / "2026-11-29-new").mkdir()
        time.sleep(0.05)
        atomic_create(inbox / "2026-11-29-new" / "0001-olu.md", "hi")

    t = threading.Thread(target=writer)
    t.start()
    got = wait_until(check, paths, 10.0)
    t.join()
    assert got.name == "0001-olu.md"


def test_wait_until_times_out(tmp_path: Path) -> None:
    with pytest.raises(WaitTimeout, match=r"within 0\.1s"):
        wait_until(lambda: None, [tmp_path], 0.1)


WAITER = """
import sys, time
from pathlib import Path
from mailslot.core.wait import wait_until
log = Path(sys.argv[1])
ready = Path(sys.argv[2])
def check():
    data = log.read_bytes() if log.exists() else b""
    return data if b"hello" in data else None
def paths():
    ready.touch()  # armed: the watch is added before this check runs
    return [log]
print(wait_until(check, paths, 30).decode().strip())
"""


@pytest.mark.parametrize("round_", range(5))
def test_cross_process_waiter_armed_before_write_always_wakes(tmp_path: Path, round_: int) -> None:
    log, ready = tmp_path / "log", tmp_path / "ready"
    log.touch()
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(log), str(ready)], stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < deadline
        time.sleep(0.005)
    locked_append(log, "hello\n")
    out, _ = waiter.communicate(timeout=30)
    assert waiter.returncode == 0 and out.strip() == "hello"


def test_readding_a_replaced_directory_arms_the_new_one(tmp_path: Path) -> None:
    topic = tmp_path / "2026-11-29-x"
    topic.mkdir()
    with Watch([topic]) as w:
        topic.rename(tmp_path / "moved")
        assert w.wait(5.0)  # the old directory moved away
        topic.mkdir()  # a new directory under the same name: a new inode
        w.add(topic)
        atomic_create(topic / "0001-olu.md", "hi")
        assert w.wait(5.0), "the new directory must be watched after add()"


def test_a_closed_watch_releases_its_inotify_descriptor(tmp_path: Path) -> None:
    """Watch.close hands the (slow) inotify close to a thread; the fd is still released."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    w = Watch([tmp_path])
    fd = w._kernel._ino.fileno()  # type: ignore[union-attr]
    w.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.fstat(fd)
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError("the inotify descriptor was never closed")


def test_a_reused_watch_hears_only_its_own_paths(tmp_path: Path, monkeypatch) -> None:
    """The instance a closed ``Watch(reuse=True)`` kept serves the next one, without the old
    watches and without the events queued on them meanwhile."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    monkeypatch.setattr(wait_mod, "_kept", [])
    old, new = tmp_path / "old", tmp_path / "new"
    old.touch()
    new.touch()
    first = Watch([old], reuse=True)
    kernel = first._kernel
    first.close()
    old.write_text("written while kept")
    second = Watch([new], reuse=True)
    try:
        assert second._kernel is kernel  # reused, not made afresh
        assert not second.wait(0.2)  # what was queued for the old path is gone
        old.write_text("written after")
        assert not second.wait(0.2)  # and so is its watch
        new.write_text("mine")
        assert second.wait(5.0)
    finally:
        second.close()


def test_watches_beyond_the_kept_few_and_handed_out_ones_are_closed(
    tmp_path: Path, monkeypatch
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    monkeypatch.setattr(wait_mod, "_kept", [])
    watches = [Watch([tmp_path], reuse=True) for _ in range(wait_mod.REUSE_MAX + 1)]
    handed = Watch([tmp_path], reuse=True)
    fds = [handed.fileno()] + [w._kernel._ino.fileno() for w in watches]  # type: ignore[union-attr]
    for w in [handed, *watches]:
        w.close()
    kept = [k._ino.fileno() for k in wait_mod._kept]
    assert len(kept) == wait_mod.REUSE_MAX and fds[0] not in kept
    released = [fd for fd in fds if fd not in kept]
    deadline = time.monotonic() + 30
    while released and time.monotonic() < deadline:
        released = [fd for fd in released if _is_open(fd)]
        time.sleep(0.01)
    assert not released, "a watch that was not kept still holds its inotify descriptor"


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_forked_child_never_reuses_its_parents_kept_watch(tmp_path: Path, monkeypatch) -> None:
    """Parent and child reading one inotify queue would each take the other's events."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    monkeypatch.setattr(wait_mod, "_kept", [])
    Watch([tmp_path], reuse=True).close()
    [parents] = wait_mod._kept
    pid = os.fork()
    if pid == 0:  # the child: a new watch is its own
        os._exit(0 if Watch([tmp_path], reuse=True)._kernel is not parents else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert wait_mod._kept == [parents]  # still there for the parent


# A process that ends promptly (the CLI's waits): the holder shares the inotify descriptor, and
# ends with the watch. Printed: the holder's pid, its descriptors, then whether it was gone.
_PROMPT = """
import os, sys, time
from mailslot.core import ending
from mailslot.core.wait import Watch
ending.begin()
ending.end_promptly()
w = Watch([sys.argv[1]])
[pid] = ending._holders
deadline = time.monotonic() + 30
while open(f"/proc/{pid}/cmdline", "rb").read() != b"cat\\0" and time.monotonic() < deadline:
    time.sleep(0.01)  # until its exec is done (and the descriptors it does not keep are shut)
fds = sorted(os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd"))
print(pid, fds, flush=True)
mine = w._kernel._ino.fileno()
w.close()
try:
    os.fstat(mine)
    print("still open here")
except OSError:
    pass
deadline = time.monotonic() + 30
while time.monotonic() < deadline and ending._holders:
    time.sleep(0.01)
    ending._reap()
print("holder gone" if not ending._holders else "holder left", flush=True)
ending.end(0)
"""


def test_a_promptly_ending_process_hands_the_close_to_a_holder_that_ends_with_it(
    tmp_path: Path,
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    leak_r, leak_w = os.pipe()  # an inheritable descriptor the holder must not keep
    os.set_inheritable(leak_w, True)
    try:
        p = subprocess.run(
            [sys.executable, "-c", _PROMPT, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            pass_fds=(leak_w,),
        )
    finally:
        os.close(leak_w)
        os.close(leak_r)
    assert p.returncode == 0, p.stderr
    first, last = p.stdout.splitlines()
    held = first.split(" ", 1)[1]
    # standard streams on /dev/null (its stdin the pipe it waits on), the inotify descriptor
    assert "anon_inode:inotify" in held and held.count("/dev/null") == 2
    assert "pipe:" in held and held.count("pipe:") == 1  # not the leak_w pipe: only its own
    assert last == "holder gone"


def test_take_changed_names_the_directories_that_had_events(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    with Watch([a, b]) as w:
        assert w.take_changed() == set()
        atomic_create(b / "0001-olu.md", "hi")
        assert w.wait(5.0)
        assert w.take_changed() == {b}
        atomic_create(a / "0001-olu.md", "hi")  # queued, not yet waited for: counted too
        assert w.take_changed() == {a}
        assert w.armed_as(a) is not None and w.armed_as(tmp_path / "c") is None


def test_a_directory_removed_and_made_again_is_heard_after_the_next_add(tmp_path: Path) -> None:
    """Even when the new directory reuses the old one's inode, so it looks the same."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    d = tmp_path / "topic"
    d.mkdir()
    with Watch([tmp_path, d]) as w:
        d.rmdir()
        assert w.wait(5.0)
        while w.wait(0.2):  # everything the removal queued, the dropped watch included
            pass
        w.take_changed()
        assert w.armed_as(d) is None  # its watch is gone: nothing may be trusted from it
        d.mkdir()
        w.add(tmp_path)
        w.add(d)
        while w.wait(0.2):
            pass
        w.take_changed()
        atomic_create(d / "0001-olu.md", "hi")
        assert w.wait(5.0)
        assert d in (w.take_changed() or set())


def test_take_changed_names_carries_the_names_in_each_directory(tmp_path: Path) -> None:
    """Names for changes inside a directory; ``None`` when the directory itself changed."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    with Watch([a, b]) as w:
        atomic_create(a / "0001-olu.md", "hi")
        (a / "0001-olu.md").unlink()
        (a / "sub").mkdir()
        assert w.wait(5.0)
        changed = w.take_changed_names()
        assert changed is not None and set(changed) == {a}
        names = changed[a]
        assert names is not None and {"0001-olu.md", "sub"} <= names
        os.chmod(b, 0o700)  # the directory's own attributes: anything in it may differ
        atomic_create(b / "0002-olu.md", "hi")
        assert w.wait(5.0)
        assert w.take_changed_names() == {b: None}
        assert w.take_changed_names() == {}
    with Watch([a], force_poll=True) as w:
        assert w.take_changed_names() is None  # polling: not known which


# -- which names changed, and whether a file is still being written ---------------------------

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux")


def _states(w: Watch, d: Path) -> dict[str, str]:
    assert w.wait(5.0)
    changed = w.take_changes()
    assert changed is not None
    return {name: c.state for name, c in (changed.get(d) or {}).items()}


@linux_only
def test_changes_name_the_file_and_a_new_folder(tmp_path: Path) -> None:
    with Watch([tmp_path]) as w:
        assert w.watching(tmp_path) and w.fileno() is not None
        atomic_create(tmp_path / "0001-a.md", "hello\n")
        (tmp_path / "topic").mkdir()
        assert w.wait(5.0)
        changed = w.take_changes()
        assert changed is not None
        got = {(c.name, c.is_dir, c.gone) for c in (changed[tmp_path] or {}).values()}
        assert {("0001-a.md", False, False), ("topic", True, False)} <= got
        os.unlink(tmp_path / "0001-a.md")
        assert _states(w, tmp_path) == {"0001-a.md": GONE}
    assert not Watch(force_poll=True).watching(tmp_path)


@linux_only
def test_the_last_event_says_whether_a_file_is_written_closed_or_only_there(
    tmp_path: Path,
) -> None:
    with Watch([tmp_path]) as w:
        f = open(tmp_path / "0001-a.md", "w")  # noqa: SIM115 -- kept open across the steps
        f.write("half")
        f.flush()
        assert _states(w, tmp_path) == {"0001-a.md": WRITING}  # created, written, open
        f.close()
        assert _states(w, tmp_path) == {"0001-a.md": CLOSED}
        os.chmod(tmp_path / "0001-a.md", 0o600)  # attributes only: nothing said of content
        assert w.wait(5.0)
        w.take_changes()
        (tmp_path / ".tmp").write_text("whole")
        os.link(tmp_path / ".tmp", tmp_path / "0002-a.md")  # linked in: whole, or not known
        assert _states(w, tmp_path)["0002-a.md"] == APPEARED
        os.rename(tmp_path / ".tmp", tmp_path / "0003-a.md")
        assert _states(w, tmp_path) == {".tmp": GONE, "0003-a.md": CLOSED}


def _hold_open(path: Path) -> subprocess.Popen[bytes]:
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"f = open({str(path)!r}, 'w'); f.write('half'); f.flush(); input()",
        ],
        stdin=subprocess.PIPE,
    )
    while not path.exists() or not path.stat().st_size:
        time.sleep(0.01)
    return writer


def test_a_file_held_open_by_its_writer_is_being_written(tmp_path: Path) -> None:
    path = tmp_path / "0001-a.md"
    writer = _hold_open(path)
    try:
        assert being_written(path) is True
    finally:
        writer.communicate(b"\n", timeout=10)
    assert being_written(path) is False
    atomic_create(tmp_path / "0002-a.md", "whole\n")
    assert being_written(tmp_path / "0002-a.md") is False
    assert being_written(tmp_path / "missing") is None


def test_asking_never_dies_of_a_writer_opening_the_file_meanwhile(tmp_path: Path) -> None:
    # a writer that opens the file while the lease is held breaks it, and the kernel signals
    # the asker: by default SIGIO, which would end the process
    path = tmp_path / "0001-a.md"
    path.write_text("x")
    opener = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time\nend = time.monotonic() + 2\n"
            "while time.monotonic() < end: os.close(os.open(sys.argv[1], os.O_WRONLY))",
            str(path),
        ]
    )
    asker = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom mailslot.core.wait import being_written\n"
            "end = time.monotonic() + 2\n"
            "while time.monotonic() < end: being_written(sys.argv[1])\nprint('alive')",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    opener.wait(60)
    assert asker.returncode == 0 and asker.stdout == "alive\n", asker


def test_a_file_open_past_the_bound_is_whole_with_a_note(tmp_path: Path, monkeypatch) -> None:
    from mailslot.core import wait

    path = tmp_path / "0001-a.md"
    writer = _hold_open(path)
    try:
        st = path.stat()
        now = time.time()
        held = settled(path, st, None, now)
        assert not held.whole and held.again == pytest.approx(st.st_ctime + wait.OPEN_SETTLE)
        assert not settled(path, st, WRITING, now).whole  # the events say so without asking
        late = settled(path, st, None, st.st_ctime + wait.OPEN_SETTLE)
        assert late.whole and late.note is not None and "still open" in late.note
    finally:
        writer.communicate(b"\n", timeout=10)
    st = path.stat()
    assert settled(path, st, None, time.time()) == (True, None, None)
    monkeypatch.setattr(wait, "being_written", lambda p: None)  # another user's file
    quiet = settled(path, st, None, st.st_ctime + 0.1)
    assert not quiet.whole and quiet.again == pytest.approx(st.st_ctime + wait.QUIET_SETTLE)
    assert settled(path, st, None, st.st_ctime + wait.QUIET_SETTLE).whole
    assert settled(path, st, CLOSED, st.st_ctime).whole  # closed by its writer: whole at once
    assert settled(path, st, APPEARED, st.st_ctime).whole  # linked in with content
    # a clock set back never pushes the look-again past the bound from now
    assert settled(path, st, None, st.st_ctime - 3600).again == pytest.approx(
        st.st_ctime - 3600 + wait.QUIET_SETTLE
    )


def _script(d: Path, what: str) -> None:
    """File work in ``d`` whose events a ``Watch`` then takes."""
    if what in ("one rename", "two renames"):
        for name in ("0001-olu.md", "0002-olu.md")[: 1 if what == "one rename" else 2]:
            (d / f".{name}.tmp").write_text("hi\n")  # a writer's temp: its events pass over
            os.rename(d / f".{name}.tmp", d / name)
    elif what == "written in place":
        (d / "0001-olu.md").write_text("hi\n")
    elif what == "a directory made":
        (d / "sub").mkdir()
    elif what == "linked in":
        (d / ".x").write_text("hi\n")
        os.link(d / ".x", d / "0001-olu.md")
    elif what == "renamed then removed":
        (d / ".t").write_text("hi\n")
        os.rename(d / ".t", d / "0001-olu.md")
        (d / "0001-olu.md").unlink()


@pytest.mark.parametrize(
    "what",
    [
        "one rename",
        "two renames",
        "written in place",
        "a directory made",
        "linked in",
        "renamed then removed",
    ],
)
def test_take_one_is_the_single_rename_and_leaves_every_other_wake_to_take_changes(
    tmp_path: Path, what: str
) -> None:
    """``take_one`` gives the ``Change`` of one name renamed in (dot names aside) and nothing
    else; otherwise it leaves the events exactly as ``take_changes`` alone would give them."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    with Watch([a], dot_names=False) as wa, Watch([b], dot_names=False) as wb:
        _script(a, what)
        _script(b, what)
        assert wa.wait(5.0) and wb.wait(5.0)
        time.sleep(0.05)  # every event of the script queued
        one = wa.take_one()
        changes = wa.take_changes()
        plain = wb.take_changes()  # the same work, never asked for one
        assert plain is not None and changes is not None
        if what == "one rename":
            assert one == wait_mod.Change(a, "0001-olu.md", False, CLOSED) and changes == {}
            assert set(plain[b]) == {"0001-olu.md"}  # type: ignore[index]
        else:
            assert one is None
            as_b = {
                p.name: None if n is None else {k: (c.is_dir, c.state) for k, c in n.items()}
                for p, n in changes.items()
            }
            as_plain = {
                p.name.replace("b", "a"): None
                if n is None
                else {k: (c.is_dir, c.state) for k, c in n.items()}
                for p, n in plain.items()
            }
            assert as_b == as_plain and as_b
        assert wa.take_one() is None and wa.take_changes() == {}


def test_a_rename_kept_as_one_change_is_overtaken_by_later_events(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux")
    with Watch([tmp_path], dot_names=False) as w:
        _script(tmp_path, "one rename")
        assert w.wait(5.0)  # read: kept as one change
        (tmp_path / "0001-olu.md").unlink()
        assert w.wait(5.0)  # the removal read after it: the two are one name's changes
        assert w.take_one() is None
        changed = w.take_changes()
        assert changed is not None
        assert {k: c.state for k, c in (changed[tmp_path] or {}).items()} == {"0001-olu.md": GONE}

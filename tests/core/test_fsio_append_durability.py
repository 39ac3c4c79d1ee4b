"""Appends against damage: a writer SIGKILLed mid-append, a full disk, failed fsync, planted files.

A killed writer never leaves bytes a reader takes as a record, and the next append moves its
fragment into ``<name>.torn`` (keeping lines appended by hand after it, and whole records); a
repairer killed mid-repair loses and doubles nothing; a failed append (full disk, failed fsync,
a write that fails) leaves nothing; a planted sidecar or repair plan cuts nothing and follows
nothing.
"""

from __future__ import annotations

import grp
import os
import pwd
import signal
import subprocess
import zlib
from pathlib import Path

import pytest

from mailslot.core.errors import NoSpace, SymlinkRefused
from mailslot.core.fsio import (
    INTENT_RECORD_MAX,
    file_lock,
    locked_append,
    read_from,
    settle_appends,
    torn_of,
)
from shared_helpers import holds_intent, names_left

APPEND = """
from pathlib import Path
from mailslot.core.fsio import locked_append
locked_append(Path(sys.argv[1]), sys.argv[2], fsync=True)
"""


RECORD = "r" * 5000 + "\n"


def _torn_log(tmp_path: Path, killed_in_write) -> Path:
    """``LOG.md`` holding ``first``, then half a record left by an appender killed mid-write."""
    log = tmp_path / "LOG.md"
    locked_append(log, "first\n")
    killed_in_write(str(log), RECORD, at_bytes=4096, code=APPEND)
    return log


def _sidecars(directory: Path) -> list[str]:
    """The intent sidecars in ``directory`` holding an intent."""
    return [
        n for n in os.listdir(directory) if n.endswith(".intent") and holds_intent(directory / n)
    ]


def test_a_record_torn_by_a_kill_is_hidden_then_cut_out(tmp_path: Path, killed_in_write) -> None:
    log = _torn_log(tmp_path, killed_in_write)
    assert log.stat().st_size == len("first\n") + len(RECORD) // 2
    with file_lock(log, shared=True):  # another reader is in: nobody may repair meanwhile
        assert read_from(log) == b"first\n"
        assert read_from(log, 3) == b"st\n"
        with log.open("a") as f:  # a shell's `>>`, no lock, no intent: glued to the fragment
            f.write("by hand\n")
        assert read_from(log) == b"first\n"  # still nothing past the torn record's start

    assert locked_append(log, "second\n") == len("first\nby hand\n")
    assert log.read_text() == "first\nby hand\nsecond\n"  # the hand line, whole again
    torn = torn_of(log)
    assert torn is not None and torn.path == tmp_path / "LOG.md.torn"
    kept = torn.path.read_text()
    assert RECORD[:2500] + "\n" in kept and torn.size == len(kept.encode())
    assert "by hand" not in kept and kept.count(RECORD[:2500]) == 1
    assert _sidecars(tmp_path) == []


# Hand-working agents append to LOG.md with a bare `>>` or under `flock`, as their procedure says.
HAND_LINES = """
set -e
echo "2026-12-01T06:00:00Z — [Hand] w01: plain append" >> "$1"
flock "$1" bash -c 'echo "2026-12-01T06:00:01Z — [Hand] w02: flock append" >> "$1"' _ "$1"
printf '%s\n' "2026-12-01T06:00:02Z — [Hand] w03: third" >> "$1"
"""


HAND = [
    "2026-12-01T06:00:00Z — [Hand] w01: plain append\n",
    "2026-12-01T06:00:01Z — [Hand] w02: flock append\n",
    "2026-12-01T06:00:02Z — [Hand] w03: third\n",
]


def _hand_append(log: Path) -> None:
    subprocess.run(["bash", "-c", HAND_LINES, "_", str(log)], check=True, timeout=60)


@pytest.mark.parametrize("next_one", ["reader", "appender", "settle"])
def test_lines_appended_by_hand_after_a_torn_record_are_kept_whole(
    tmp_path: Path, killed_in_write, next_one: str
) -> None:
    log = _torn_log(tmp_path, killed_in_write)
    _hand_append(log)
    if next_one == "reader":  # a reader that may write the file repairs it
        assert read_from(log) == ("first\n" + "".join(HAND)).encode()
    elif next_one == "appender":
        locked_append(log, "next\n")
    else:
        settle_appends(log)
    expected = "first\n" + "".join(HAND) + ("next\n" if next_one == "appender" else "")
    assert log.read_text() == expected
    torn = torn_of(log)
    assert torn is not None
    kept = torn.path.read_text()
    assert kept.endswith(RECORD[:2500] + "\n") and kept.count(RECORD[:2500]) == 1
    assert "[Hand]" not in kept
    assert names_left(tmp_path) == ["LOG.md", "LOG.md.torn"]  # no sidecar, no plan


def test_a_kill_before_the_records_first_byte_keeps_what_follows(
    tmp_path: Path, killed_in_write
) -> None:
    log = tmp_path / "LOG.md"
    locked_append(log, "first\n")
    die_before_record = """
import signal
_real_write = os.write
def _die(fd, data):
    if not os.readlink(f"/proc/self/fd/{fd}").endswith(".intent"):
        os.kill(os.getpid(), signal.SIGKILL)
    return _real_write(fd, data)
os.write = _die
"""
    killed_in_write(str(log), RECORD, at_bytes=1 << 30, code=die_before_record + APPEND)
    assert _sidecars(tmp_path) == [".LOG.md.intent"]
    _hand_append(log)
    locked_append(log, "next\n")
    assert log.read_text() == "first\n" + "".join(HAND) + "next\n"
    assert torn_of(log) is None and _sidecars(tmp_path) == []


# A repairer killed at each step of its repair; the next one finishes it.
REPAIR = """
import signal
from pathlib import Path
from mailslot.core import fsio
point, log = sys.argv[2], sys.argv[1]
def _die():
    os.kill(os.getpid(), signal.SIGKILL)
def wrap(name, before):
    real = getattr(os, name)
    def hooked(*a, **k):
        arg = str(a[0])
        if before(arg):
            _die()
        out = real(*a, **k)
        if point == "after-" + name and ("intent" in arg or name != "unlink"):
            _die()
        return out
    setattr(os, name, hooked)
wrap("pwrite", lambda arg: point == "before-pwrite")
wrap("ftruncate", lambda arg: False)
wrap("unlink", lambda arg: False)
wrap("replace", lambda arg: False)
wrap("fsync", lambda arg: point == "before-fsync" and os.readlink(f"/proc/self/fd/{arg}") == log)
fsio.settle_appends(Path(log))
"""


@pytest.mark.parametrize(
    "point",
    [
        "after-replace",  # the plan is in place, nothing else done
        "before-pwrite",  # the fragment is in .torn
        "after-pwrite",  # the tail moved over the fragment, the file not yet cut back
        "after-ftruncate",
        "before-fsync",
        "after-unlink",  # the intent is gone, the plan is not
    ],
)
def test_a_repairer_killed_mid_repair_loses_and_doubles_nothing(
    tmp_path: Path, killed_in_write, point: str
) -> None:
    log = _torn_log(tmp_path, killed_in_write)
    _hand_append(log)
    killed_in_write(str(log), point, at_bytes=1 << 30, code=REPAIR)
    with log.open("a") as f:  # and one more by hand before anyone repairs again
        f.write("after the repairer died\n")
    assert read_from(log).startswith(b"first\n")
    locked_append(log, "next\n")
    assert log.read_text() == ("first\n" + "".join(HAND) + "after the repairer died\n" + "next\n")
    kept = Path(f"{log}.torn").read_text()
    assert kept.count(RECORD[:2500]) == 1 and "[Hand]" not in kept
    assert names_left(tmp_path) == ["LOG.md", "LOG.md.torn"]


def test_a_line_appended_by_hand_while_the_repair_runs_is_kept(
    tmp_path: Path, killed_in_write
) -> None:
    log = _torn_log(tmp_path, killed_in_write)
    _hand_append(log)
    hand_mid_repair = f"""
from mailslot.core import fsio
_pwrite = os.pwrite
def _meanwhile(fd, data, offset):
    os.pwrite = _pwrite
    with open({str(log)!r}, "a") as f:  # a shell's `>>` landing while the tail moves
        f.write("landed mid-repair\\n")
    return _pwrite(fd, data, offset)
os.pwrite = _meanwhile
fsio.settle_appends(Path(sys.argv[1]))
os.kill(os.getpid(), 9)
"""
    killed_in_write(str(log), at_bytes=1 << 30, code="from pathlib import Path\n" + hand_mid_repair)
    assert log.read_text() == "first\n" + "".join(HAND) + "landed mid-repair\n"
    assert Path(f"{log}.torn").read_text().count(RECORD[:2500]) == 1
    assert names_left(tmp_path) == ["LOG.md", "LOG.md.torn"]


def test_a_kill_inside_the_intent_write_cuts_nothing(tmp_path: Path, killed_in_write) -> None:
    log = tmp_path / "LOG.md"
    locked_append(log, "first\n")
    killed_in_write(str(log), "x" * 200 + "\n", at_bytes=60, code=APPEND, in_sidecar=True)
    assert log.read_text() == "first\n"  # the kill came before any byte of the record
    assert locked_append(log, "second\n") == len("first\n")
    assert read_from(log) == b"first\nsecond\n"
    assert torn_of(log) is None and _sidecars(tmp_path) == []


def test_a_kill_inside_an_intent_written_over_a_longer_one_cuts_nothing(
    tmp_path: Path, killed_in_write
) -> None:
    log = tmp_path / "LOG.md"
    locked_append(log, RECORD)  # the kept sidecar now holds a cleared intent longer than the next
    before = log.read_bytes()
    killed_in_write(str(log), "y" * 300 + "\n", at_bytes=60, code=APPEND, in_sidecar=True)
    sidecar = (tmp_path / ".LOG.md.intent").read_bytes()
    assert sidecar.startswith(b"mailslot-intent2 ") and RECORD[:4000].encode() in sidecar
    _hand_append(log)
    assert read_from(log) == before + "".join(HAND).encode()
    locked_append(log, "next\n")
    assert log.read_bytes() == before + ("".join(HAND) + "next\n").encode()
    assert torn_of(log) is None and _sidecars(tmp_path) == []


def test_an_intent_whose_copy_reads_whole_over_an_older_one_cuts_nothing(
    tmp_path: Path, killed_in_write
) -> None:
    """The same record again, killed halfway through its copy: the older copy's bytes complete
    it, so the intent reads whole -- and none of its record went out, so nothing is cut."""
    log = tmp_path / "LOG.md"
    locked_append(log, RECORD)
    killed_in_write(str(log), RECORD, at_bytes=4096, code=APPEND, in_sidecar=True)
    assert _sidecars(tmp_path) == [".LOG.md.intent"]
    _hand_append(log)
    assert read_from(log) == (RECORD + "".join(HAND)).encode()
    locked_append(log, "next\n")
    assert log.read_text() == RECORD + "".join(HAND) + "next\n"
    assert torn_of(log) is None and _sidecars(tmp_path) == []


def _old_intent(log: Path, start: int, record: bytes, *, copy: bool) -> bytes:
    """A sidecar as an older mailslot wrote it: created for one append, exactly its intent."""
    st = log.stat()
    tag = b"mailslot-intent2" if copy else b"mailslot-intent"
    body = tag + b" %016x %016x %016x %016x %08x" % (
        st.st_dev,
        st.st_ino,
        start,
        len(record),
        zlib.crc32(record),
    )
    return body + b" %08x\n" % zlib.crc32(body) + (record if copy else b"")


@pytest.mark.parametrize("copy", [True, False], ids=["with its copy", "without"])
def test_a_sidecar_an_older_mailslot_left_is_honoured(tmp_path: Path, copy: bool) -> None:
    log = tmp_path / "LOG.md"
    log.write_text("first\n" + RECORD[:2500])  # its writer was killed halfway through RECORD
    sidecar = tmp_path / ".LOG.md.intent"
    sidecar.write_bytes(_old_intent(log, len("first\n"), RECORD.encode(), copy=copy))
    _hand_append(log)
    with file_lock(log, shared=True):  # another reader is in: nobody may repair meanwhile
        assert read_from(log) == b"first\n"
    locked_append(log, "next\n")
    kept = Path(f"{log}.torn").read_text()
    if copy:  # the fragment alone goes, the hand lines stay
        assert log.read_text() == "first\n" + "".join(HAND) + "next\n"
        assert kept.endswith(RECORD[:2500] + "\n") and "[Hand]" not in kept
    else:  # no copy: the fragment and what followed it go aside together
        assert log.read_text() == "first\nnext\n"
        assert RECORD[:2500] + "".join(HAND) in kept
    assert _sidecars(tmp_path) == [] and names_left(tmp_path) == ["LOG.md", "LOG.md.torn"]


def _as_user(uid: int, gid: int, cwd: Path, work: object, *, groups: tuple[int, ...] = ()) -> int:
    """Run ``work()`` in a forked child as ``uid``/``gid`` (in group ``gid`` and ``groups``
    alone), in ``cwd``; its exit code (0 when ``work`` returned, -9 when it was SIGKILLed)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(cwd)  # the test's parent directories are root's alone
            os.setgroups([gid, *groups])
            os.setgid(gid)
            os.setuid(uid)
            work()  # type: ignore[operator]
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _killed_in_record(path: Path, record: str) -> None:
    """``locked_append`` that SIGKILLs itself halfway through its record's bytes."""
    write = os.write

    def half_then_die(fd: int, data: bytes) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith(".intent"):
            write(fd, bytes(data[: len(data) // 2]))
            os.kill(os.getpid(), signal.SIGKILL)
        return write(fd, data)

    os.write = half_then_die  # type: ignore[assignment]
    locked_append(path, record)


def test_a_writer_who_may_not_write_the_kept_sidecar_appends_with_its_own(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("appending as another user needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    log = shared / "LOG.md"
    locked_append(log, "owner\n")
    os.chown(log, 0, 65534)
    log.chmod(0o664)  # its group may write it
    locked_append(log, "owner again\n")  # the kept sidecar follows: root's, group 65534, 0o664
    sidecar = shared / ".LOG.md.intent"
    st = sidecar.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, 65534, 0o664)
    os.chown(sidecar, 0, 0)  # as when LOG.md changed group since: the group may not write it
    assert _as_user(65534, 65534, shared, lambda: locked_append(Path("LOG.md"), "member\n")) == 0
    assert log.read_text() == "owner\nowner again\nmember\n"
    assert not sidecar.exists()  # the member's own, removed after its append
    # A member killed mid-append: its sidecar is believed (it may write LOG.md), and repaired.
    assert _as_user(65534, 65534, shared, lambda: _killed_in_record(Path("LOG.md"), RECORD)) == -9
    assert sidecar.stat().st_uid == 65534
    assert read_from(log) == b"owner\nowner again\nmember\n"
    locked_append(log, "owner last\n")
    assert log.read_text() == "owner\nowner again\nmember\nowner last\n"
    torn = torn_of(log)
    assert torn is not None and RECORD[:2500] in torn.path.read_text()
    st = sidecar.stat()  # the owner's kept sidecar again
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, 65534, 0o664)
    assert _sidecars(shared) == []


@pytest.mark.parametrize("moved", [False, True], ids=["in place", "moved away meanwhile"])
def test_the_intent_is_at_the_sidecars_name_while_the_record_goes_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moved: bool
) -> None:
    log = tmp_path / "LOG.md"
    sidecar = tmp_path / ".LOG.md.intent"
    locked_append(log, "first\n")  # this process keeps the sidecar open for the next append
    if moved:  # someone moves it away and puts an empty one of the same owner and mode there
        sidecar.rename(tmp_path / "moved")
        sidecar.touch(0o644)
        sidecar.chmod((tmp_path / "moved").stat().st_mode)
    seen = []
    write = os.write

    def look(fd: int, data: bytes) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith(".intent"):
            seen.append(sidecar.read_bytes())  # what a reader finds there now
        return write(fd, data)

    monkeypatch.setattr(os, "write", look)
    locked_append(log, "second\n")
    monkeypatch.undo()
    assert len(seen) == 1 and seen[0].startswith(b"mailslot-intent2 ")
    assert seen[0].split(b"\n", 1)[1].startswith(b"second\n")
    if moved:
        assert (tmp_path / "moved").read_bytes()[:1] == b"-"  # untouched since its clearing
    assert not holds_intent(sidecar) and log.read_text() == "first\nsecond\n"


# A writer that dies once its record went out: at the step that drops its intent (overwriting
# the kept sidecar's first byte, or removing a sidecar that does not stay), or right after it.
DIE_AT_DROP = """
import signal
_wrote_record = []
_w, _pw, _ul = os.write, os.pwrite, os.unlink
def _sidecar(fd):
    return os.readlink(f"/proc/self/fd/{fd}").endswith(".intent")
def _drop(real, after):
    def hooked(*a, **k):
        dropping = _wrote_record and (
            _sidecar(a[0]) if isinstance(a[0], int) else str(a[0]).endswith(".intent")
        )
        if dropping and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        out = real(*a, **k)
        if dropping:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    return hooked
def _note(fd, data):
    if not _sidecar(fd):
        _wrote_record.append(fd)
    return _w(fd, data)
os.write = _note
os.pwrite, os.unlink = _drop(_pw, AFTER), _drop(_ul, AFTER)
"""


@pytest.mark.parametrize("after", [False, True], ids=["before the drop", "after the drop"])
def test_a_kill_after_the_whole_record_keeps_it(
    tmp_path: Path, killed_in_write, after: bool
) -> None:
    log = tmp_path / "LOG.md"
    code = f"AFTER = {after}\n" + DIE_AT_DROP + APPEND
    killed_in_write(str(log), RECORD, at_bytes=1 << 30, code=code)
    assert _sidecars(tmp_path) == ([] if after else [".LOG.md.intent"])
    assert read_from(log) == RECORD.encode()  # whole, so delivered
    locked_append(log, "next\n")
    assert log.read_text() == RECORD + "next\n"
    assert torn_of(log) is None and _sidecars(tmp_path) == []


def test_a_failed_fsync_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "LOG.md"
    locked_append(log, "first\n")

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(OSError, match="Input/output"):
        locked_append(log, "second\n", fsync=True)
    monkeypatch.undo()
    assert log.read_text() == "first\n" and _sidecars(tmp_path) == []


@pytest.mark.parametrize(
    ("free_pages", "sidecar"),
    [
        (0, "new"),  # no room for the intent
        (1, "new"),  # room for the intent, none for the record
        (0, "kept"),  # the intent goes into the kept sidecar's page, no room for the record
    ],
)
def test_a_full_disk_appends_nothing(
    small_disk: Path, fill_disk, free_pages: int, sidecar: str
) -> None:
    log = small_disk / "LOG.md"
    if sidecar == "kept":
        locked_append(log, "x" * 4095 + "\n")  # a whole page: the next record needs a new one
    else:
        log.write_text("x" * 4095 + "\n")  # by hand: no sidecar yet
    fill_disk(small_disk, free_pages)
    with pytest.raises(NoSpace, match=r"no space left to write LOG\.md"):
        locked_append(log, "second\n", fsync=True)
    assert log.read_bytes() == b"x" * 4095 + b"\n"
    assert _sidecars(small_disk) == [] and torn_of(log) is None


@pytest.mark.parametrize("kind", ["symlink", "fifo", "garbage"])
def test_a_planted_sidecar_cuts_nothing_and_follows_nothing(tmp_path: Path, kind: str) -> None:
    log = tmp_path / "LOG.md"
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    locked_append(log, "first\n")
    sidecar = tmp_path / ".LOG.md.intent"
    sidecar.unlink()  # the one kept between appends, replaced by another user
    if kind == "symlink":
        sidecar.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(sidecar)
    else:
        sidecar.write_bytes(b"mailslot-intent 0000000000000000 00000000000000ff 00000000 0\n")
    assert read_from(log) == b"first\n"
    assert locked_append(log, "second\n") == len("first\n")
    assert log.read_text() == "first\nsecond\n" and victim.read_text() == "keep me\n"
    assert torn_of(log) is None and _sidecars(tmp_path) == []


def test_a_sidecar_planted_by_a_user_who_cannot_write_the_file_cuts_nothing(
    tmp_path: Path, killed_in_write
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # sticky and open to all, like /tmp: anyone may create a dot-file
    log = shared / "LOG.md"
    locked_append(log, "one\n")
    killed_in_write(str(log), RECORD, at_bytes=4096, code=APPEND)
    sidecar = shared / ".LOG.md.intent"
    well_formed = sidecar.read_bytes()  # an intent for the bytes after "one\n"
    locked_append(log, "committed two\n")  # repairs, then commits a record at that offset
    torn = torn_of(log)
    assert torn is not None
    log.chmod(0o644)  # only its owner may write it
    sidecar.write_bytes(well_formed)
    os.chown(sidecar, 65534, 65534)  # planted by a user who could not cut the file by hand
    assert read_from(log) == b"one\ncommitted two\n"
    locked_append(log, "three\n")
    assert log.read_text() == "one\ncommitted two\nthree\n"
    assert torn_of(log) == torn and _sidecars(shared) == []


def test_a_sidecar_left_for_a_replaced_file_cuts_nothing(tmp_path: Path, killed_in_write) -> None:
    log = _torn_log(tmp_path, killed_in_write)
    assert _sidecars(tmp_path) == [".LOG.md.intent"]
    fresh = tmp_path / "LOG.md.new"  # an editor or a checkout puts a new file in its place
    fresh.write_text("".join(f"line {i}\n" for i in range(1000)))
    fresh.replace(log)
    kept = log.read_bytes()
    assert read_from(log) == kept  # the intent was for the old file's bytes, not these
    locked_append(log, "next\n")
    assert log.read_bytes() == kept + b"next\n" and torn_of(log) is None


def test_a_reader_through_a_symlink_finds_the_files_own_sidecar(
    tmp_path: Path, killed_in_write
) -> None:
    log = tmp_path / "LOG.md"
    link = tmp_path / "mine.md"
    link.symlink_to("LOG.md")
    locked_append(log, "first\n")
    killed_in_write(str(log), RECORD, at_bytes=4096, code=APPEND)
    with file_lock(log, shared=True):  # another reader is in: nobody may repair meanwhile
        assert read_from(link) == b"first\n"
    assert read_from(link) == b"first\n"  # a reader that may write the file repairs it
    assert log.read_text() == "first\n"
    torn = torn_of(link)
    assert torn is not None and torn == torn_of(log) and torn.path == tmp_path / "LOG.md.torn"
    assert RECORD[:2500] in torn.path.read_text() and _sidecars(tmp_path) == []


@pytest.mark.parametrize("target", ["outside", "outside, not there yet", "beside it"])
def test_an_append_through_a_symlink_is_refused_and_writes_nothing(
    tmp_path: Path, target: str
) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    victim = {"beside it": tree / "real.md", "outside": outside / ".bashrc"}.get(target)
    if victim is not None:
        victim.write_text("keep me\n")
    inbox = tree / "inbox.md"  # planted in a shared tree, or committed to one and checked out
    inbox.symlink_to(victim or outside / "made-by-the-append")
    with pytest.raises(SymlinkRefused, match=r"inbox\.md is a symlink; nothing is appended") as e:
        locked_append(inbox, "C01 hello\n")
    assert e.value.path == inbox
    assert os.listdir(outside) == ([victim.name] if target == "outside" else [])
    if victim is not None:
        assert victim.read_text() == "keep me\n"
    in_tree = ["inbox.md", "real.md"] if target == "beside it" else ["inbox.md"]
    assert sorted(os.listdir(tree)) == in_tree  # no sidecar, no .torn: nothing done there
    settle_appends(inbox)  # nothing was appended through it: nothing to settle, nothing done
    assert inbox.is_symlink() and sorted(os.listdir(tree)) == in_tree


def test_a_whole_record_whose_intent_cannot_be_dropped_is_appended_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "LOG.md"
    locked_append(log, "first\n")
    unlink, pwrite, write = os.unlink, os.pwrite, os.write
    wrote_record = []

    def sidecar(fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}").endswith(".intent")

    def note_record(fd: int, data: bytes) -> int:
        if not sidecar(fd):
            wrote_record.append(fd)
        return write(fd, data)

    def refuse_pwrite(fd: int, data: bytes, offset: int) -> int:
        if wrote_record and sidecar(fd):
            raise OSError(5, "Input/output error")
        return pwrite(fd, data, offset)

    def refuse_unlink(path: object, *a: object, **k: object) -> None:
        if wrote_record and str(path).endswith(".intent"):
            raise OSError(5, "Input/output error")
        unlink(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "write", note_record)
    monkeypatch.setattr(os, "pwrite", refuse_pwrite)
    monkeypatch.setattr(os, "unlink", refuse_unlink)
    assert locked_append(log, "second\n", fsync=True) == len("first\n")  # done, not an error
    monkeypatch.undo()
    assert _sidecars(tmp_path) == [".LOG.md.intent"]
    assert read_from(log) == b"first\nsecond\n"
    locked_append(log, "third\n")  # the leftover intent's record is whole: nothing is cut
    assert log.read_text() == "first\nsecond\nthird\n"
    assert torn_of(log) is None and _sidecars(tmp_path) == []


@pytest.mark.parametrize("was_private", [False, True])
def test_whoever_may_read_the_file_may_read_its_sidecar(
    tmp_path: Path, killed_in_write, was_private: bool
) -> None:
    if os.geteuid() != 0:
        pytest.skip("reading as another user needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    log = shared / "LOG.md"
    log.touch(0o600 if was_private else 0o644)
    locked_append(log, "first\n")  # the kept sidecar takes the file's mode of the moment
    log.chmod(0o644)  # anyone may read it
    strict = "os.umask(0o077)\n"  # the writer keeps its own new files private
    killed_in_write(str(log), RECORD, at_bytes=4096, code=strict + APPEND)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a reader running as another user
        try:
            os.close(r)
            os.chdir(shared)  # the test's parent directories are root's alone
            os.setgid(65534)
            os.setuid(65534)
            os.write(w, read_from(Path("LOG.md")))
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as got:
        assert got.read() == b"first\n"  # not the torn record's half


def _member_of_a_group_not_its_own() -> tuple[int, int, int] | None:
    """``(uid, its primary gid, gid)`` of a user listed as a member of group ``gid`` (so a
    sidecar it writes is believed) whose primary group is another; ``None`` if there is none."""
    for group in grp.getgrall():
        for name in group.gr_mem:
            try:
                user = pwd.getpwnam(name)
            except KeyError:
                continue
            if user.pw_uid != 0 and user.pw_gid != group.gr_gid:
                return user.pw_uid, user.pw_gid, group.gr_gid
    return None


def test_a_group_member_who_appends_leaves_a_sidecar_the_group_may_read(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("appending and reading as other users needs root")
    member = _member_of_a_group_not_its_own()
    if member is None:
        pytest.skip("no user here is a listed member of a group other than its own")
    uid, own_gid, gid = member
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    log = shared / "LOG.md"
    log.write_text("first\n")
    os.chown(log, 0, gid)
    log.chmod(0o660)  # its group may write and read it; nobody else may do either

    def killed() -> None:  # its new files take its own group
        _killed_in_record(Path("LOG.md"), RECORD)

    assert _as_user(uid, own_gid, shared, killed, groups=(gid,)) == -9
    r, w = os.pipe()

    def read() -> None:  # another member of the group, in no group of the writer's own
        os.write(w, read_from(Path("LOG.md")))

    assert _as_user(65534, gid, shared, read) == 0
    os.close(w)
    with os.fdopen(r, "rb") as got:
        assert got.read() == b"first\n"  # not the torn record's half


def test_a_record_too_big_to_copy_is_cut_out_with_what_followed(
    tmp_path: Path, killed_in_write
) -> None:
    log = tmp_path / "LOG.md"
    locked_append(log, "first\n")
    big = "b" * INTENT_RECORD_MAX + "\n"  # its sidecar carries no copy of it
    code = APPEND.replace("sys.argv[2]", f"'b' * {INTENT_RECORD_MAX} + '\\n'")  # argv: too long
    killed_in_write(str(log), at_bytes=4096, code=code)
    _hand_append(log)
    assert read_from(log) == b"first\n"  # nobody can tell the fragment from what followed it
    locked_append(log, "next\n")
    assert log.read_text() == "first\nnext\n"
    kept = Path(f"{log}.torn").read_text()
    assert big[: len(big) // 2] + "".join(HAND) in kept  # moved aside whole, never dropped


@pytest.mark.parametrize("kind", ["garbage", "other file", "symlink"])
def test_a_planted_repair_plan_changes_nothing(tmp_path: Path, killed_in_write, kind: str) -> None:
    log = tmp_path / "LOG.md"
    locked_append(log, "first\n")
    locked_append(log, "second\n")
    plan = tmp_path / ".LOG.md.repair"
    if kind == "garbage":
        plan.write_bytes(b"mailslot-repair 0 0 0\n" + b"x" * 100)
    elif kind == "symlink":
        plan.symlink_to(log)
    else:  # a well-formed plan for another file (a copy carried along, a replaced file)
        other = tmp_path / "other.md"
        other.write_text("zzzz\n")
        st = other.stat()
        body = b"mailslot-repair %016x %016x %016x %016x %016x 1.000" % (
            st.st_dev,
            st.st_ino,
            0,
            1,
            3,
        )
        crc = zlib.crc32(b"abcd", zlib.crc32(body))
        plan.write_bytes(body + b" %08x\n" % crc + b"abcd")
    locked_append(log, "third\n")
    assert log.read_text() == "first\nsecond\nthird\n" and torn_of(log) is None
    # A plan is read where an intent was left (only a repair makes one, and an appender clears
    # its intent after any repair ended): a writer killed now, and the repair after it.
    killed_in_write(str(log), RECORD, at_bytes=4096, code=APPEND)
    locked_append(log, "fourth\n")
    assert log.read_text() == "first\nsecond\nthird\nfourth\n"
    torn = torn_of(log)
    assert torn is not None and torn.path.read_text().count(RECORD[:2500]) == 1
    assert names_left(tmp_path) == sorted(
        ["LOG.md", "LOG.md.torn", *(["other.md"] * (kind == "other file"))]
    )


@pytest.mark.parametrize(("errno_", "raised"), [(28, NoSpace), (5, OSError)], ids=["ENOSPC", "EIO"])
def test_failed_append_is_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errno_: int, raised: type[Exception]
) -> None:
    log = tmp_path / "log"
    locked_append(log, "first\n")
    real_write = os.write
    calls = {"n": 0}

    def half_then_fail(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno_, os.strerror(errno_))

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(raised):
        locked_append(log, "second record\n")
    monkeypatch.undo()
    assert log.read_text() == "first\n"

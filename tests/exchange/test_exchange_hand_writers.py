"""Agents that follow CONVENTION.md by hand, with bash: they are read and judged like mailslot.

The other side is often an agent with a shell and the convention, not mailslot. These tests drive
bash that follows the convention (``exhelp.HAND_SEND`` / ``HAND_STATE``, or the lock line printed
in CONVENTION.md itself) against the real CLI and check that every reader agrees with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from exhelp import (
    GENEROUS,
    HAND_HEAD,
    bash_send,
    bash_state,
    hand_entry,
    hand_state,
    now_stamp,
    open_writer,
    run,
    tick,
)

from mailslot.core.errors import WaitTimeout
from mailslot.exchange.create import create_exchange
from mailslot.exchange.entries import send
from mailslot.exchange.layout import Exchange
from mailslot.exchange.state import set_state
from shared_helpers import in_thread

TOPIC = "2026-11-29-hand"


def _debts(root: Path, agent: str) -> set[tuple[str, str, str | None]]:
    d = json.loads(run(root, "exchange", "sweep", "--json", agent=agent).stdout)
    return {(x["topic"], x["reason"], x["entry"]) for x in d["debts"]}


# -- a debt is decided by arrival order, never by number alone --------------------------------


def test_a_reused_number_written_before_a_required_entry_does_not_answer_it(ex) -> None:
    root = ex.root
    assert bash_send(root, "claude", "olu", TOPIC, "fyi") == "0001"
    # both hand writers pick the next number before either renames: both take 0002
    olu_n = bash_send(root, "olu", "claude", TOPIC, "pick")
    claude_n = bash_send(root, "claude", "olu", TOPIC, "pick")
    assert olu_n == claude_n == "0002"
    bash_send(root, "olu", "claude", TOPIC, "fyi", "0002")  # olu's fyi lands first
    bash_send(root, "claude", "olu", TOPIC, "required", "0002")  # then claude's question
    owed = (TOPIC, "reply", "0002-claude.md")
    assert owed in _debts(root, "olu")  # sweep
    assert "0002-claude.md" in run(root, "exchange", "monitor", agent="olu").stdout
    out = tick(root)
    assert {"topic": TOPIC, "side": "olu", "reason": "reply", "entry": "0002-claude.md"} in out[
        "debts"
    ]
    assert f"- `{TOPIC}`: a reply to `0002-claude.md`" in (root / "INDEX.md").read_text()
    r = run(root, "exchange", "state", TOPIC, "done", agent="claude", ok=False)
    assert r.exit_code == 1 and "0002-claude.md" in r.output  # claude's question stands
    # olu answers (the convention's next number): every reader drops the debt at once
    assert bash_send(root, "olu", "claude", TOPIC, "fyi") == "0003"
    assert owed not in _debts(root, "olu")
    assert "0002-claude.md" not in run(root, "exchange", "monitor", agent="olu").stdout
    assert not [d for d in tick(root)["debts"] if d["reason"] == "reply"]
    run(root, "exchange", "state", TOPIC, "done", agent="claude")


def test_a_reply_that_arrives_later_answers_even_under_a_reused_number(ex) -> None:
    root = ex.root
    bash_send(root, "claude", "olu", TOPIC, "required")
    taken = bash_send(root, "olu", "claude", TOPIC, "pick")
    bash_send(root, "claude", "olu", TOPIC, "fyi", taken)  # claude's P.S. takes 0002 first
    time.sleep(0.05)  # past the filesystem clock's tick: the reply arrives after, visibly
    bash_send(root, "olu", "claude", TOPIC, "fyi", taken)  # olu's reply reuses 0002
    assert _debts(root, "olu") == set()
    assert [d for d in tick(root)["debts"] if d["reason"] == "reply"] == []
    run(root, "exchange", "state", TOPIC, "done", agent="claude")


def test_a_recursive_chmod_never_makes_an_old_entry_answer_a_newer_question(ex) -> None:
    # chmod bumps a file's ctime (its arrival) to now: claude's old 0001 "arrives" after olu's
    # question 0002, as after the `chmod -R` a permissions play or doctor's fix runs
    root = ex.root
    send(ex, "claude", TOPIC, "fyi", "an old note")
    send(ex, "olu", TOPIC, "required", "a question")
    owed = (TOPIC, "reply", "0002-olu.md")
    assert owed in _debts(root, "claude")
    tick(root)
    time.sleep(0.05)  # past the filesystem clock's tick
    subprocess.run(["chmod", "-R", "o-w", str(ex.inbox("olu"))], check=True)
    assert owed in _debts(root, "claude")
    assert "0002-olu.md" in run(root, "exchange", "monitor", agent="claude").stdout
    assert {"topic": TOPIC, "side": "claude", "reason": "reply", "entry": "0002-olu.md"} in tick(
        root
    )["debts"]
    assert f"- `{TOPIC}`: a reply to `0002-olu.md`" in (root / "INDEX.md").read_text()
    send(ex, "claude", TOPIC, "fyi", "the answer")  # a real answer still clears it everywhere
    assert owed not in _debts(root, "claude")
    assert not [d for d in tick(root)["debts"] if d["reason"] == "reply"]


# -- the send lock, as CONVENTION.md teaches it -------------------------------------------------


def _lock_line(root: Path, side: str) -> str:
    text = (root / "CONVENTION.md").read_text()
    block = text.split(f"As **{side}**:", 1)[1].split("```\n", 2)[1]
    (line,) = [x for x in block.splitlines() if x.strip()]
    return line


@contextlib.contextmanager
def _side_users() -> Iterator[tuple[str, dict[str, pwd.struct_passwd]]]:
    """An exchange group and one user per side, each with its own group, in the exchange group."""
    tag = uuid.uuid4().hex[:6]
    group = f"msx{tag}"
    subprocess.run(["groupadd", group], check=True)
    users: dict[str, pwd.struct_passwd] = {}
    try:
        for side in ("claude", "olu"):
            name = f"ms{side[:3]}{tag}"
            subprocess.run(["useradd", "-M", "-U", "-G", group, name], check=True)
            users[side] = pwd.getpwnam(name)
        yield group, users
    finally:
        for u in users.values():
            subprocess.run(["userdel", u.pw_name], capture_output=True)
            subprocess.run(["groupdel", u.pw_name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)


def _as(user: pwd.struct_passwd, group: str) -> list[str]:
    """``setpriv`` to run as ``user`` with its own group, plus the exchange group."""
    return [
        "setpriv",
        f"--reuid={user.pw_uid}",
        f"--regid={user.pw_gid}",
        f"--groups={grp.getgrnam(group).gr_gid}",
        "--",
    ]


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"),
    reason="needs root, useradd and setpriv to act as each side's own user",
)
def test_convention_teaches_a_lock_line_either_sides_user_can_take() -> None:
    base = Path(tempfile.mkdtemp(prefix="mailslot-lock-"))
    try:
        os.chmod(base, 0o755)
        with _side_users() as (group, users):
            ex = create_exchange(base / "x", ["claude", "olu"], group=group, git=False)
            lock = ex.send_lock
            assert lock.stat().st_gid == grp.getgrnam(group).gr_gid
            assert lock.stat().st_mode & 0o040  # the group may open it (flock needs no write)
            for n, side in enumerate(("claude", "olu"), start=1):
                other = ex.other(side)
                draft = ex.root / f"to-{other}" / TOPIC / ".draft.md"
                write = (
                    f"mkdir -p {draft.parent} && printf -- '---\\nfrom: {side}\\nat: %s\\n"
                    f'action: fyi\\n---\\nby hand\\n\' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)"'
                    f" > {draft}"
                )
                subprocess.run([*_as(users[side], group), "bash", "-c", write], check=True)
                env = {**os.environ, "T": TOPIC}
                fd = os.open(lock, os.O_RDONLY)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # mailslot is mid-send: the line must wait
                    p = subprocess.Popen(
                        [*_as(users[side], group), "bash", "-c", _lock_line(ex.root, side)],
                        env=env,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                    time.sleep(0.5)
                    assert p.poll() is None and draft.exists()  # blocked on the lock
                finally:
                    os.close(fd)
                _, err = p.communicate(timeout=60)
                assert p.returncode == 0, err
                final = draft.parent / f"{n:04d}-{side}.md"
                assert final.exists() and not draft.exists()
                assert final.stat().st_uid == users[side].pw_uid
            topic = json.loads(run(ex.root, "exchange", "read", TOPIC, "--json").stdout)
            assert [e["path"].rsplit("/", 1)[1] for e in topic["entries"]] == [
                "0001-claude.md",
                "0002-olu.md",
            ]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_draft_waiting_for_its_lock_line_is_never_archived_with_the_topic(ex) -> None:
    root = ex.root
    topic = send(ex, "claude", "closing", "fyi", "that settles it").topic
    send(ex, "olu", topic, "fyi", "agreed")
    set_state(ex, "olu", topic, "done")
    set_state(ex, "claude", topic, "done")
    # olu drafts a P.S. as CONVENTION.md teaches: .draft.md first, then its lock line
    draft = ex.inbox("claude") / topic / ".draft.md"
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    draft.write_text(f"---\nfrom: olu\nat: {stamp}\naction: required\n---\none more thing\n")
    out = tick(root)
    assert out["archived"] == [] and draft.exists()
    assert any(".draft.md" in w["reason"] for w in out["waiting"] if w["topic"] == topic)
    r = subprocess.run(
        ["bash", "-c", _lock_line(root, "olu")],
        env={**os.environ, "T": topic},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert (ex.inbox("claude") / topic / "0003-olu.md").exists() and not draft.exists()
    assert (topic, "reply", "0003-olu.md") in _debts(root, "claude")
    out = tick(root)
    assert out["archived"] == [] and topic in out["holding"]  # claude has not read it


def test_a_hand_writer_stuck_holding_the_send_lock_fails_a_send_loudly(ex, monkeypatch) -> None:
    from mailslot.core.errors import LockBusy
    from mailslot.exchange import entries

    monkeypatch.setattr(entries, "SEND_LOCK_WAIT_SECONDS", 0.5)
    holder = subprocess.Popen(
        ["flock", "-o", str(ex.send_lock), "sleep", "60"]
    )  # -o: flock holds it
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until flock(1) holds it
            fd = os.open(ex.send_lock, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                break
            finally:
                os.close(fd)
            time.sleep(0.02)
        with pytest.raises(LockBusy, match="is a writer stuck"):
            send(ex, "claude", "stuck", "fyi", "never hangs")
        assert list(ex.outbox("claude").glob("*-stuck")) == []  # nothing left behind
        r = run(
            ex.root,
            "exchange",
            "send",
            "--topic",
            "stuck",
            "--action",
            "fyi",
            "x",
            ok=False,
            agent="claude",
        )
        assert r.exit_code == 1 and "send.lock" in r.output
    finally:
        holder.kill()
        holder.wait()
    assert send(ex, "claude", "stuck", "fyi", "now it goes").number == 1


# -- an entry that lands after the archive, where nobody looks-------------------------------
def test_an_entry_landing_in_an_archived_topic_is_an_unseen_debt_until_reaffirmed(ex) -> None:
    root = ex.root
    r = run(root, "exchange", "send", "--topic", "filed", "--action", "fyi", "x", agent="claude")
    topic = Path(r.stdout.strip()).parent.name
    run(root, "exchange", "state", topic, "done", agent="claude")
    run(root, "exchange", "state", topic, "done", agent="olu")
    assert topic in tick(root)["archived"]
    # a hand writer that skipped the lock lands its entry after the move, in done/
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    hand_entry(root, "claude", f"done/{topic}", 2, "olu", now, "required")
    debt = {"topic": topic, "side": "claude", "reason": "unseen", "entry": "0002-olu.md"}
    sweep = json.loads(run(root, "exchange", "sweep", "--json", agent="claude").stdout)
    assert [{k: d[k] for k in debt} for d in sweep["debts"]] == [debt]
    assert json.loads(run(root, "exchange", "sweep", "--json", agent="olu").stdout)["debts"] == []
    assert (
        f"{topic}: 0002-olu.md arrived after"
        in run(root, "exchange", "monitor", agent="claude").stdout
    )
    out = tick(root)
    assert debt in out["debts"]
    assert out["unseen"] == [f"to-claude/done/{topic}/0002-olu.md"]  # notified once
    assert tick(root)["unseen"] == []
    assert f"`{topic}`: a read of (arrived after the archive" in (root / "INDEX.md").read_text()
    # claude re-reads and re-affirms done (its STATE.md, in done/, with a fresh updated_at)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    hand_state(root, "olu", f"done/{topic}", "done", now, "claude")
    assert (
        json.loads(run(root, "exchange", "sweep", "--json", agent="claude").stdout)["debts"] == []
    )
    assert "arrived after" not in run(root, "exchange", "monitor", agent="claude").stdout
    assert not [d for d in tick(root)["debts"] if d["reason"] == "unseen"]


# -- a hand `done` in the same second as the entry ----------------------------------------------


def _early_in_a_second() -> None:
    while time.time() % 1 > 0.2:
        time.sleep(0.01)


def _same_second(ex: Exchange, topic: str, entry: str) -> bool:
    arrived = (ex.inbox("olu") / topic / entry).stat().st_ctime
    stamp = re.search(r"updated_at: (\S+)", (ex.inbox("claude") / topic / "STATE.md").read_text())
    assert stamp is not None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(arrived)) == stamp.group(1)


def test_a_hand_done_written_after_the_entry_in_its_second_is_not_held(ex) -> None:
    for attempt in range(5):  # a loaded machine may cross a second boundary: try again
        topic = f"2026-11-29-after{attempt}"
        _early_in_a_second()
        r = send(ex, "claude", topic, "fyi", "the closing note")
        set_state(ex, "claude", topic, "done")
        bash_state(ex.root, "olu", "claude", topic, "done")  # date -u +%H:%M:%SZ, seconds
        if _same_second(ex, topic, Path(r.path).name):
            break
    else:
        pytest.skip("could not write the entry and STATE.md in one second")
    assert "awaits you" not in run(ex.root, "exchange", "monitor", agent="olu").stdout
    out = tick(ex.root)
    assert topic in out["archived"] and topic not in out["held"]


def test_a_hand_done_written_before_the_entry_in_its_second_is_still_held(ex) -> None:
    for attempt in range(5):
        topic = f"2026-11-29-before{attempt}"
        send(ex, "olu", topic, "fyi", "opening")  # so olu's STATE.md has a topic to sit in
        _early_in_a_second()
        bash_state(ex.root, "olu", "claude", topic, "done")
        time.sleep(0.02)
        r = send(ex, "claude", topic, "fyi", "written after olu's done")
        set_state(ex, "claude", topic, "done")
        if _same_second(ex, topic, Path(r.path).name):
            break
    else:
        pytest.skip("could not write STATE.md and the entry in one second")
    out = tick(ex.root)
    assert topic in out["held"] and topic not in out["archived"]
    assert (ex.inbox("olu") / topic / "HELD.md").exists()


def test_a_hand_done_written_before_the_entry_and_chmodded_after_it_is_still_held(ex) -> None:
    # a chmod moves STATE.md's ctime past the entry without writing it: no evidence of a read
    for attempt in range(5):
        topic = f"2026-11-29-chmod{attempt}"
        send(ex, "olu", topic, "fyi", "opening")
        _early_in_a_second()
        bash_state(ex.root, "olu", "claude", topic, "done")
        time.sleep(0.02)
        r = send(ex, "claude", topic, "fyi", "written after olu's done")
        set_state(ex, "claude", topic, "done")
        time.sleep(0.02)
        os.chmod(ex.inbox("claude") / topic / "STATE.md", 0o644)
        if _same_second(ex, topic, Path(r.path).name):
            break
    else:
        pytest.skip("could not write STATE.md, the entry and the chmod in one second")
    assert "awaits you" in run(ex.root, "exchange", "monitor", agent="olu").stdout
    out = tick(ex.root)
    assert topic in out["held"] and topic not in out["archived"]


# -- what mailslot writes matches what the convention shows -------------------------------------

_BARE_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"


def test_a_done_dated_ahead_of_its_writing_never_acknowledges_a_later_entry(ex) -> None:
    # claude's hand `done` carries a time 50 s ahead (a skewed clock, a typo): inside the skew
    # allowance, yet olu's question, sent after the file was written, must not be filed unread
    root = ex.root
    topic = send(ex, "claude", "ahead", "fyi", "that settles it").topic
    set_state(ex, "olu", topic, "done")
    ahead = datetime.fromtimestamp(time.time() + 50, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    hand_state(root, "olu", topic, "done", ahead, "claude")
    time.sleep(0.05)  # past the filesystem clock's tick
    send(ex, "olu", topic, "required", "wait, one more question")
    out = tick(root)
    assert out["archived"] == [] and topic in out["holding"]
    assert (topic, "reply", "0002-olu.md") in _debts(root, "claude")
    assert "0002-olu.md" in run(root, "exchange", "monitor", agent="claude").stdout


def test_times_are_written_bare_as_the_convention_shows(ex) -> None:
    r = send(ex, "claude", "bare", "fyi", "hello")
    assert re.search(rf"^at: {_BARE_TIME}$", r.path.read_text(), re.M)
    st = set_state(ex, "claude", r.topic, "in-progress")
    assert re.search(rf"^updated_at: {_BARE_TIME}$", st.path.read_text(), re.M)
    convention = (ex.root / "CONVENTION.md").read_text()
    assert re.search(rf"^at: {_BARE_TIME}$", convention, re.M)
    assert "date -u +%Y-%m-%dT%H:%M:%S.%3NZ" in convention
    # a bash reader gets the value with nothing to strip
    got = subprocess.run(
        ["bash", "-c", 'sed -n "s/^at: //p" "$1"', "r", str(r.path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert got == r.at


def test_a_status_in_the_wrong_case_is_reported_and_never_archives(ex) -> None:
    topic = send(ex, "claude", "cased", "fyi", "closing").topic
    set_state(ex, "claude", topic, "done")
    bash_state(ex.root, "olu", "claude", topic, "Done")
    where = f"to-claude/{topic}/STATE.md"
    d = json.loads(run(ex.root, "exchange", "sweep", "--json", agent="claude").stdout)
    assert any(where in w and "'Done'" in w for w in d["warnings"]), d
    text = run(ex.root, "exchange", "sweep", agent="olu").stdout
    assert "warning:" in text and where in text and "write 'done'" in text
    mon = run(ex.root, "exchange", "monitor", agent="claude").stdout
    assert f"{topic}: {where} does not read" in mon and "'Done'" in mon
    doc = json.loads(run(ex.root, "exchange", "doctor", "--json", ok=False).stdout)
    (check,) = [c for c in doc["checks"] if c["check"] == "states"]
    assert check["status"] == "warn" and where in check["detail"]
    out = tick(ex.root)
    assert topic not in out["archived"]  # unknown never archives


def test_an_entry_still_being_written_in_place_is_never_delivered_half(ex) -> None:
    """A hand writer's `cat > 0002-olu.md` that has written the frontmatter and half the body:
    the reader gets the whole entry once it is closed, never the half marked seen."""
    from mailslot.exchange.watch import watch

    topic = send(ex, "olu", "inplace", "fyi", "first").topic
    assert [d.entry.body for d in watch(ex, "claude", timeout=5).items if d.entry] == ["first\n"]
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    with open(ex.inbox("claude") / topic / "0002-olu.md", "w") as f:
        f.write(f"---\nfrom: olu\nat: {stamp}\naction: fyi\n---\nthe first half, ")
        f.flush()
        t, box = in_thread(watch, ex, "claude", timeout=30)
        t.join(5)  # a watcher that takes half an entry has returned by now
        f.write("then the second half\n")
    t.join(30)
    bodies = [d.entry.body for d in box["result"].items if d.entry]
    assert bodies == ["the first half, then the second half\n"], box


# -- entries written in place (no rename): shown once whole, never half marked seen ----------


@pytest.fixture
def no_lease(monkeypatch):
    """The reader may not ask the kernel (another user's file, no CAP_LEASE): events decide."""
    from mailslot.core import wait

    monkeypatch.setattr(wait, "being_written", lambda path: None)


def watch_once(ex: Exchange, timeout: float = GENEROUS) -> list:
    from mailslot.exchange.watch import watch

    return watch(ex, "claude", timeout=timeout).items


def _bodies(result) -> list[str]:
    return [d.entry.body for d in result.items if d.entry]


@pytest.mark.parametrize("lease", [True, False], ids=["lease", "events-only"])
def test_a_slow_writer_in_place_is_shown_only_once_it_closes(ex, request, lease) -> None:
    from mailslot.exchange.watch import Watcher

    if not lease:
        request.getfixturevalue("no_lease")
    topic = send(ex, "olu", "slow", "fyi", "first").topic
    with Watcher(ex, "claude") as w:
        assert _bodies(w.watch(5)) == ["first\n"]
        path = ex.inbox("claude") / topic / "0002-olu.md"
        p = open_writer(path, "")  # created, empty: `cat > 0002-olu.md` waiting for its input
        assert p.stdin is not None
        try:
            with pytest.raises(WaitTimeout):
                w.watch(0.5)
            p.stdin.write(HAND_HEAD.format(at=now_stamp()) + "the first half,\n")
            p.stdin.flush()
            with pytest.raises(WaitTimeout):  # frontmatter whole, body not: still held
                w.watch(1.0)
            p.stdin.write("then the rest\n")
        finally:
            p.stdin.close()
            p.wait(10)
        (item,) = w.watch(GENEROUS).items
        assert item.entry.body == "the first half,\nthen the rest\n" and item.partial is None
        with pytest.raises(WaitTimeout):
            w.watch(0.3)


def test_a_writer_still_writing_when_the_watcher_starts_is_not_taken_half(ex, no_lease) -> None:
    # no events about its start and no lease: the reader waits until it was left alone a while
    from mailslot.exchange.watch import watch

    topic = send(ex, "olu", "started", "fyi", "first").topic
    mark_seen = watch(ex, "claude", timeout=5)
    assert _bodies(mark_seen) == ["first\n"]
    p = open_writer(
        ex.inbox("claude") / topic / "0002-olu.md", HAND_HEAD.format(at=now_stamp()) + "half, "
    )
    assert p.stdin is not None
    t, box = in_thread(watch, ex, "claude", timeout=GENEROUS)
    time.sleep(0.5)
    p.stdin.write("and the rest\n")
    p.stdin.close()
    p.wait(10)
    t.join(GENEROUS)
    assert _bodies(box["result"]) == ["half, and the rest\n"], box


@pytest.mark.parametrize("lease", [True, False], ids=["lease", "events-only"])
def test_a_writer_killed_mid_line_is_shown_flagged_and_again_when_completed(
    ex, request, lease
) -> None:
    from mailslot.exchange.watch import CUT_SHORT, Watcher

    if not lease:
        request.getfixturevalue("no_lease")
    topic = send(ex, "olu", "killed", "fyi", "first").topic
    with Watcher(ex, "claude") as w:
        w.watch(5)
        path = ex.inbox("claude") / topic / "0002-olu.md"
        p = open_writer(path, HAND_HEAD.format(at=now_stamp()) + "the plan is to ")
        p.kill()  # SIGKILL: the kernel closes the file; the rest never comes
        p.wait(10)
        (item,) = w.watch(GENEROUS).items  # never held forever
        assert item.partial == CUT_SHORT and item.entry.body == "the plan is to "
        assert item.key.startswith(f"{topic}/0002-olu@") and CUT_SHORT in item.entry.warning
        with pytest.raises(WaitTimeout):  # shown once as it stands
            w.watch(0.3)
    with open(path, "a") as f:  # someone finishes it by hand: shown again, whole
        f.write("ship on Friday\n")
    (item,) = watch_once(ex)
    assert item.entry.body == "the plan is to ship on Friday\n" and item.partial is None
    with pytest.raises(WaitTimeout):
        watch_once(ex, 0.3)


def test_a_writer_killed_inside_its_frontmatter_is_shown_unreadable_once(ex, no_lease) -> None:
    topic = send(ex, "olu", "cut", "fyi", "first").topic
    watch_once(ex, 5)
    p = open_writer(ex.inbox("claude") / topic / "0002-olu.md", "---\nfrom: olu\nat: 20")
    p.kill()
    p.wait(10)
    (item,) = watch_once(ex)
    assert item.entry.error is not None and "@" in item.key
    r = run(ex.root, "exchange", "watch", "--timeout", "0.3", agent="claude", ok=False)
    assert r.exit_code == 3  # not again, and no hang


def test_a_writer_that_keeps_the_file_open_is_shown_after_the_bound_then_again(
    ex, monkeypatch
) -> None:
    from mailslot.core import wait
    from mailslot.exchange.watch import Watcher

    monkeypatch.setattr(wait, "OPEN_SETTLE", 1.0)
    topic = send(ex, "olu", "open", "fyi", "first").topic
    with Watcher(ex, "claude") as w:
        w.watch(5)
        p = open_writer(
            ex.inbox("claude") / topic / "0002-olu.md", HAND_HEAD.format(at=now_stamp()) + "a\n"
        )
        assert p.stdin is not None
        try:
            start = time.monotonic()
            (item,) = w.watch(GENEROUS).items
            assert time.monotonic() - start >= 0.9  # held until left alone for the bound
            assert item.partial is not None and "still open for writing" in item.partial
            assert item.entry.body == "a\n"
            p.stdin.write("b\n")
            p.stdin.flush()
            (item,) = w.watch(GENEROUS).items  # it changed: shown again, as it now stands
            assert item.entry.body == "a\nb\n" and "still open" in (item.partial or "")
        finally:
            p.stdin.close()
            p.wait(10)
        (item,) = w.watch(GENEROUS).items  # closed: whole at last
        assert item.entry.body == "a\nb\n" and item.partial is None


def test_ten_thousand_entries_written_at_once_are_each_shown_once(ex, no_lease) -> None:
    from mailslot.exchange.watch import Watcher

    send(ex, "olu", "flood", "fyi", "first")
    with Watcher(ex, "claude") as w:
        w.watch(5)
        at = now_stamp()
        # in place, in 100 new topics, faster than the kernel's queue of events keeps up with
        for t in range(100):
            d = ex.inbox("claude") / f"2026-11-29-flood-{t:02d}"
            d.mkdir()
            for n in range(1, 101):
                (d / f"{n:04d}-olu.md").write_text(HAND_HEAD.format(at=at) + f"{t}.{n}\n")
        got: list[str] = []
        while len(got) < 10_000:
            got += [i.entry.body for i in w.watch(GENEROUS).items]
    assert sorted(got) == sorted(f"{t}.{n}\n" for t in range(100) for n in range(1, 101))


# -- an entry changed after it was shown: an append, a rename over it ---------------------------


def _rename_in(path: Path, text: str) -> None:
    tmp = path.with_name(".draft.md")
    tmp.write_text(text)
    os.rename(tmp, path)


@pytest.mark.parametrize("how", ["append", "rename-over"])
@pytest.mark.parametrize("long_lived", [True, False], ids=["one-watcher", "a-watch-each"])
def test_an_entry_changed_after_it_was_shown_is_shown_again(ex, how, long_lived) -> None:
    from mailslot.exchange.watch import CHANGED, Watcher

    topic = send(ex, "olu", "changed", "fyi", "first").topic
    path = ex.inbox("claude") / topic / "0002-olu.md"
    with Watcher(ex, "claude") as w:
        w.watch(5)
        _rename_in(path, HAND_HEAD.format(at=now_stamp()) + "a long review\n")
        assert _bodies(w.watch(GENEROUS)) == ["a long review\n"]
        time.sleep(0.02)  # past the filesystem clock's tick
        if how == "append":
            with open(path, "a") as f:
                f.write("P.S. one more thing\n")
            now = "a long review\nP.S. one more thing\n"
        else:  # a number taken twice: a long review replaced by a short note
            _rename_in(path, HAND_HEAD.format(at=now_stamp()) + "a short note\n")
            now = "a short note\n"
        (item,) = w.watch(GENEROUS).items if long_lived else watch_once(ex)
    assert item.entry.body == now and item.partial == CHANGED and "@" in item.key
    with pytest.raises(WaitTimeout):  # shown once as it now stands
        watch_once(ex, 0.3)


def test_a_chmod_or_a_new_entry_is_no_change_to_what_was_shown(ex) -> None:
    topic = send(ex, "olu", "same", "fyi", "first").topic
    assert [i.entry.body for i in watch_once(ex, 5)] == ["first\n"]
    time.sleep(0.02)
    subprocess.run(["chmod", "-R", "o-w", str(ex.inbox("claude"))], check=True)
    with pytest.raises(WaitTimeout):
        watch_once(ex, 0.3)
    hand_entry(ex.root, "claude", topic, 2, "olu", now_stamp(), body="second\n")
    # marked with the round that found it: not taken as changed by the next
    assert [i.entry.body for i in watch_once(ex, 5)] == ["second\n"]
    with pytest.raises(WaitTimeout):
        watch_once(ex, 0.3)

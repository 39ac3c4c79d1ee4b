"""doctor: an inbox the agent can write, a stale heartbeat, a shrunk entry in git history,
half-archived topics, numbering anomalies, a sandbox covering the inbox -- each with a fix."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from exhelp import RENAMED_IN, hand_entry, run

from mailslot.core import clock
from mailslot.exchange import boundary, send
from mailslot.exchange.create import create_exchange
from mailslot.exchange.doctor import doctor
from mailslot.exchange.tick import tick


def _checks(report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def _fresh(ex) -> None:
    tick(ex).raise_for_errors()


def test_clean_exchange_passes(ex) -> None:
    send(ex, "claude", "t", "fyi", "hello")
    _fresh(ex)
    r = doctor(ex)
    assert r.ok, r.to_json()
    checks = _checks(r)
    assert checks["heartbeat"] == "ok" and checks["git"] == "ok" and checks["history"] == "ok"
    assert checks["boundary:olu"] == "skip"  # no such Unix user here: said, never passed


def test_group_writable_inbox_in_asymmetric_mode_is_reported(tmp_path) -> None:
    ex = create_exchange(tmp_path / "x", ["claude", "olu"], modes="asymmetric", git=False)
    _fresh(ex)
    assert _checks(doctor(ex))["modes:to-olu/"] == "ok"
    os.chmod(ex.inbox("olu"), 0o2770)  # now olu's agent (a group member) can write its inbox
    r = doctor(ex)
    bad = next(c for c in r.checks if c.name == "modes:to-olu/")
    assert bad.status == "fail" and "can write into its own inbox" in bad.detail
    assert bad.fix and "chmod g-w" in bad.fix
    assert not r.ok


def test_world_writable_topic_dir_is_reported(ex) -> None:
    t = send(ex, "claude", "t", "fyi", "x").topic
    os.chmod(ex.inbox("olu") / t, 0o2777)
    c = next(c for c in doctor(ex).checks if c.name == "modes:to-olu/")
    assert c.status == "fail" and "world-writable" in c.detail


def test_stale_heartbeat_is_an_error(ex) -> None:
    _fresh(ex)
    assert _checks(doctor(ex))["heartbeat"] == "ok"
    old = time.time() - 3 * 3600
    os.utime(ex.meta / "heartbeat", (old, old))
    r = doctor(ex)
    hb = next(c for c in r.checks if c.name == "heartbeat")
    assert hb.status == "fail" and "180 min ago" in hb.detail and hb.fix
    assert not r.ok


def test_missing_heartbeat_is_an_error(ex) -> None:
    assert _checks(doctor(ex))["heartbeat"] == "fail"


def test_shrunk_entry_in_git_history_is_reported(ex) -> None:
    """A 10,978-byte review overwritten by a 1,546-byte note under the same name is reported."""
    r = send(ex, "olu", "review", "required", "a long review\n" * 800)
    _fresh(ex)
    big = r.path.stat().st_size
    r.path.write_text("---\nfrom: olu\nat: 2026-11-29T10:00:00Z\naction: fyi\n---\nin progress\n")
    _fresh(ex)
    report = doctor(ex)
    (c,) = [c for c in report.checks if c.name.startswith("history:")]
    assert c.status == "fail" and f"shrank from {big} to" in c.detail
    assert c.fix and "git -C" in c.fix and "show" in c.fix
    # the fix line really recovers the original
    sha = c.fix.split(" show ")[1].split(":")[0]
    old = subprocess.run(
        ["git", "-C", str(ex.root), "show", f"{sha}:{r.relpath}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert old.count("a long review") == 800


def test_uncommitted_edit_of_an_entry_is_reported(ex) -> None:
    r = send(ex, "olu", "t", "fyi", "original")
    _fresh(ex)
    r.path.write_text(r.path.read_text() + "edited\n")
    assert _checks(doctor(ex))["git:entries"] == "fail"


def test_old_uncommitted_change_fails_git(ex) -> None:
    _fresh(ex)
    p = hand_entry(
        ex.root, "olu", "2026-11-29-x", 1, "claude", "2026-11-29T10:00:00Z", **RENAMED_IN
    )
    assert _checks(doctor(ex))["git"] == "ok"  # recent: the next tick commits it
    old = time.time() - 3600
    os.utime(p, (old, old))
    assert _checks(doctor(ex))["git"] == "fail"


def test_half_archived_topic_is_reported(ex) -> None:
    t = send(ex, "claude", "t", "fyi", "x").topic
    send(ex, "olu", t, "fyi", "y")
    os.rename(ex.inbox("olu") / t, ex.inbox("olu") / "done" / t)
    c = next(c for c in doctor(ex).checks if c.name == "archive:half")
    assert c.status == "fail" and t in c.detail and "tick" in (c.fix or "")


def test_numbering_duplicates_gaps_and_wrong_inbox(ex) -> None:
    t = "2026-11-29-nums"
    hand_entry(ex.root, "olu", t, 1, "claude", "2026-11-29T10:00:00Z", **RENAMED_IN)
    # the same number on two sides
    hand_entry(ex.root, "claude", t, 1, "olu", "2026-11-29T10:00:01Z", **RENAMED_IN)
    # 2 and 3 missing
    hand_entry(ex.root, "olu", t, 4, "claude", "2026-11-29T10:00:02Z", **RENAMED_IN)
    # olu wrote into its inbox
    hand_entry(ex.root, "olu", t, 5, "olu", "2026-11-29T10:00:03Z", **RENAMED_IN)
    checks = _checks(doctor(ex))
    assert checks["numbering:duplicates"] == "warn"
    assert checks["numbering:gaps"] == "warn"
    assert checks["numbering:inbox"] == "fail"


def test_sandbox_covering_the_inbox_is_reported(ex, tmp_path, monkeypatch) -> None:
    units = tmp_path / "units"
    units.mkdir()
    name = f"mailslot-test-{uuid.uuid4().hex[:8]}.service"
    (units / name).write_text(
        f"[Unit]\nDescription=t\n[Service]\nExecStart=/bin/true\nProtectSystem=strict\n"
        f"ReadWritePaths={ex.root}\n"
    )
    monkeypatch.setattr(boundary, "UNIT_DIRS", (units,))
    c = next(c for c in doctor(ex, services={"olu": name}).checks if c.name == "sandbox:olu")
    assert c.status == "fail" and "covers" in c.detail
    (units / name).write_text(
        f"[Service]\nExecStart=/bin/true\nProtectSystem=strict\nReadWritePaths={ex.outbox('olu')}\n"
    )
    c = next(c for c in doctor(ex, services={"olu": name}).checks if c.name == "sandbox:olu")
    assert c.status == "ok"
    (units / name).write_text("[Service]\nExecStart=/bin/true\n")
    c = next(c for c in doctor(ex, services={"olu": name}).checks if c.name == "sandbox:olu")
    assert c.status == "warn" and "Unix modes are the whole boundary" in c.detail


def test_parse_unit_reads_drop_in_resets() -> None:
    sb = boundary.parse_unit(
        "[Service]\nProtectSystem=strict\nReadWritePaths=/srv/x\n"
        "[Service]\nReadWritePaths=\nReadWritePaths=-/srv/x/to-claude /var/lib/olu\n"
    )
    assert sb.strict and sb.read_write == [Path("/srv/x/to-claude"), Path("/var/lib/olu")]
    assert not sb.allows(Path("/srv/x/to-olu")) and sb.allows(Path("/srv/x/to-claude/t"))


def test_cli_exit_code_and_json(ex) -> None:
    r = run(ex.root, "exchange", "doctor", "--json", ok=False)
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["ok"] is False and all(
        {"check", "status", "detail", "fix"} <= set(c) for c in d["checks"]
    )
    assert "heartbeat" in r.stderr
    _fresh(ex)
    r = run(ex.root, "exchange", "doctor")
    assert r.exit_code == 0 and "all checks passed" in r.stdout


@contextlib.contextmanager
def _throwaway_user():
    """A real Unix user and group for the live probe, removed afterwards (root only)."""
    name = f"msdoc{uuid.uuid4().hex[:8]}"
    subprocess.run(["groupadd", name], check=True, capture_output=True)
    try:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "-g", name, name],
            check=True,
            capture_output=True,
        )
        try:
            yield name
        finally:
            subprocess.run(["userdel", name], capture_output=True)
    finally:
        subprocess.run(["groupdel", name], capture_output=True)


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("useradd"), reason="needs root and useradd"
)
def test_live_boundary_both_ways_as_the_sides_user() -> None:
    base = Path(tempfile.mkdtemp(prefix="mailslot-doctor-"))
    try:
        os.chmod(base, 0o755)  # the probe user must be able to reach the exchange
        with _throwaway_user() as user:
            ex = create_exchange(
                base / "x", ["claude", "olu"], modes="asymmetric", group=user, git=False
            )
            # asymmetric: to-olu 2750 (olu reads, cannot write), to-claude 2770 (olu writes)
            r = doctor(ex, users={"olu": user})
            c = next(c for c in r.checks if c.name == "boundary:olu")
            assert c.status == "ok" and "tried live" in c.detail, c
            os.chmod(ex.inbox("olu"), 0o2770)  # the mistake: the agent can write its inbox
            c = next(c for c in doctor(ex, users={"olu": user}).checks if c.name == "boundary:olu")
            assert c.status == "fail" and "CAN write into its own inbox" in c.detail
            os.chmod(ex.inbox("olu"), 0o2750)
            os.chmod(ex.inbox("claude"), 0o2750)  # and the other way: it cannot reply
            c = next(c for c in doctor(ex, users={"olu": user}).checks if c.name == "boundary:olu")
            assert c.status == "fail" and "cannot write its outbox" in c.detail
            leftovers = [p for p in ex.root.rglob(".mailslot-doctor-*")]
            assert leftovers == []
            assert stat.S_IMODE(ex.inbox("olu").stat().st_mode) == 0o2750
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_long_unanswered_required_entry_is_a_warning(ex) -> None:
    hand_entry(
        ex.root,
        "olu",
        "2026-11-01-old",
        1,
        "claude",
        "2026-11-01T10:00:00Z",
        "required",
        **RENAMED_IN,
    )
    # a debt's age counts from its arrival (ctime), not its claimed 'at': a day passes
    clock.set_clock(lambda: datetime.now(UTC) + timedelta(days=1))
    send(ex, "claude", "fresh", "required", "just asked")
    checks = {c.name: c for c in doctor(ex).checks}
    assert checks["answers:olu"].status == "warn"
    assert "2026-11-01-old/0001-claude.md" in checks["answers:olu"].detail
    assert "poller" in (checks["answers:olu"].fix or "")
    assert checks["answers:claude"].status == "ok"


def test_a_tick_that_cannot_notify_is_reported(ex) -> None:
    send(ex, "claude", "t", "fyi", "hello")
    # a real Apprise target on a port nothing listens on: the tick runs, the notify fails
    port = __import__("socket").socket()
    port.bind(("127.0.0.1", 0))
    url = f"json://127.0.0.1:{port.getsockname()[1]}/hook"
    port.close()
    tick(ex, notify_urls=[url])
    r = doctor(ex)
    notify = next(c for c in r.checks if c.name == "notify")
    assert notify.status == "warn" and "could not notify" in notify.detail
    assert _checks(r)["heartbeat"] == "ok"


def test_init_refuses_a_notify_url_apprise_cannot_parse(tmp_path) -> None:
    from mailslot.core.errors import MailslotError

    with pytest.raises(MailslotError, match="not a valid Apprise URL"):
        create_exchange(tmp_path / "x", ["claude", "olu"], git=False, notify=["notaurl"])
    assert not (tmp_path / "x").exists()

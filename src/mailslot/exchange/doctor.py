"""``exchange doctor``: every way this exchange can fail silently, checked, each with its fix.

"Silence is not success": a poller that died while its service stayed
``active``, a boundary that was only ever tested in the direction that works, an entry overwritten
by a later one under the same number, a topic archived on one side only -- each presents as
"nothing to say". The doctor makes each one a named check with a status (``ok``, ``warn``,
``fail``, ``skip``) and a fix line; any ``fail`` makes the report fail (exit 1).

Per-side deployment facts (the Unix user each side's agent runs as, its systemd unit) are read from
optional ``users:`` and ``services:`` mappings in ``.mailslot/config`` (``{olu: olu}``) and can be
given on the command line; a side with no user is skipped with a note, never passed.

Git history is read with ``git log --raw``: an entry file is immutable, so any modification of one
is reported, and one that got *smaller* (a 10,978-byte review overwritten by a 1,546-byte note)
fails with the ``git show`` line that recovers it. Nothing is written except the live probes' own
dot-files.
"""

from __future__ import annotations

import json
import stat
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from mailslot.core.clock import FUTURE_SKEW, format_time, now
from mailslot.core.errors import MailslotError
from mailslot.core.formats import load_yaml
from mailslot.core.fsio import atomic_write
from mailslot.core.git import STALE_AFTER_S, index_lock, run_git
from mailslot.exchange import leftovers
from mailslot.exchange.boundary import (
    Writable,
    parse_unit,
    probe_as,
    static_writable,
    unit_text,
    user_of,
)
from mailslot.exchange.entries import ENTRY_RE, entry_names
from mailslot.exchange.inbox import peek_state
from mailslot.exchange.layout import CONFIG_NAME, DONE, STATE_NAME, Exchange
from mailslot.exchange.listing import side_dirs, topic_pairs
from mailslot.exchange.monitor import HEARTBEAT_NAME, HEARTBEAT_STALE, heartbeat_age
from mailslot.exchange.sweep import state_warnings, sweep
from mailslot.exchange.topics import list_topics
from mailslot.exchange.tree import audit_tree

__all__ = [
    "VERDICT_NAME",
    "Check",
    "DoctorFailed",
    "DoctorReport",
    "deploy_facts",
    "doctor",
    "record_verdict",
]

STATUSES = ("ok", "warn", "fail", "skip")
# Agents typically poll every two minutes and answer within the hour; a required entry waiting
# half a day means a deaf agent more often than a busy one.
ANSWER_PATIENCE = timedelta(hours=12)


class DoctorFailed(MailslotError):
    """At least one doctor check failed (the report says which and how to fix it)."""


@dataclass(frozen=True)
class Check:
    """One finding: which check, its status, what was found, and how to fix it."""

    name: str
    status: str
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"check", "status", "detail", "fix"}``."""
        return {"check": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass
class DoctorReport:
    """All findings, in the order checked."""

    root: Path
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no check failed."""
        return not any(c.status == "fail" for c in self.checks)

    def add(self, name: str, status: str, detail: str, fix: str | None = None) -> None:
        """Record one finding."""
        assert status in STATUSES
        self.checks.append(Check(name, status, detail, fix))

    def to_json(self) -> dict[str, Any]:
        """``{"root", "ok", "checks": [...]}``."""
        return {"root": str(self.root), "ok": self.ok, "checks": [c.to_json() for c in self.checks]}

    def raise_for_failures(self) -> None:
        """Raise ``DoctorFailed`` naming the failed checks, if any."""
        failed = [c.name for c in self.checks if c.status == "fail"]
        if failed:
            raise DoctorFailed(f"{len(failed)} check(s) failed: {', '.join(failed)}")


def deploy_facts(ex: Exchange) -> tuple[dict[str, str], dict[str, str]]:
    """``(users, services)`` per side from the optional config mappings (empty when absent)."""
    path = ex.meta / CONFIG_NAME
    try:
        data = load_yaml(path.read_bytes(), path=path)
    except (OSError, MailslotError):
        return {}, {}
    out: list[dict[str, str]] = []
    for key in ("users", "services"):
        raw = data.get(key) or {}
        out.append({str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {})
    return out[0], out[1]


# -- layout and modes --------------------------------------------------------------------------
def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


def _shown(ex: Exchange, dirs: list[Path]) -> str:
    names = ", ".join(str(d.relative_to(ex.root)) for d in dirs[:5])
    return names + (f" and {len(dirs) - 5} more" if len(dirs) > 5 else "")


def check_modes(ex: Exchange, report: DoctorReport) -> None:
    """Each inbox, its done/ and its topic dirs against the configured modes."""
    for side in ex.sides:
        inbox = ex.inbox(side)
        rel = f"to-{side}/"
        if not inbox.is_dir() or not (inbox / DONE).is_dir():
            report.add(
                f"layout:{rel}",
                "fail",
                f"{rel} or {rel}{DONE}/ is missing",
                f"mkdir -p {inbox / DONE} && chmod {ex.dir_mode(side):04o} {inbox} {inbox / DONE}",
            )
            continue
        want = ex.dir_mode(side)
        dirs = [inbox, inbox / DONE, *(d.path for d in side_dirs(ex, side).values())]
        too_open = []
        world = []
        no_setgid = []
        for d in dirs:
            m = _mode(d)
            if m is None:
                continue
            if m & 0o002:
                world.append(d)
            if m & 0o020 and not want & 0o020:
                too_open.append(d)
            if ex.group and not m & stat.S_ISGID:
                no_setgid.append(d)
        if world:
            report.add(
                f"modes:{rel}",
                "fail",
                f"world-writable: {_shown(ex, world)}; anyone on the host can write {side}'s inbox",
                f"find {inbox} -perm -o+w -exec chmod o-w {{}} +",
            )
        elif too_open:
            report.add(
                f"modes:{rel}",
                "fail",
                f"group-writable ({_mode(too_open[0]) or 0:04o}) but the exchange is "
                f"'{ex.modes}' and expects {want:04o}: {_shown(ex, too_open)}; {side}'s agent can "
                "write into its own inbox",
                f"find {inbox} -type d -exec chmod g-w {{}} +",
            )
        else:
            note = ""
            if ex.modes == "symmetric":
                note = (
                    "; symmetric: the group may write both inboxes, so each agent's sandbox "
                    "(ReadWritePaths) must be the boundary -- see boundary checks"
                )
            report.add(f"modes:{rel}", "ok", f"{rel} {_mode(inbox) or 0:04o} as configured{note}")
        if no_setgid:
            report.add(
                f"setgid:{rel}",
                "warn",
                f"no setgid bit on {_shown(ex, no_setgid)}: "
                f"new files will not get group {ex.group}",
                f"find {inbox} -type d -exec chmod g+s {{}} +",
            )


def check_boundary(
    ex: Exchange, report: DoctorReport, users: dict[str, str], services: dict[str, str]
) -> None:
    """Per side: its user writes its outbox and not its inbox (live as root), sandbox included."""
    for side in ex.sides:
        name = f"boundary:{side}"
        inbox, outbox = ex.inbox(side), ex.outbox(side)
        sandbox = None
        unit = services.get(side)
        if unit:
            text = unit_text(unit)
            if text is None:
                report.add(
                    f"sandbox:{side}",
                    "warn",
                    f"unit {unit} not found (systemctl cat and the unit directories)",
                    f"check services: {side}: in {ex.meta / CONFIG_NAME}",
                )
            else:
                sandbox = parse_unit(text)
                rw = " ".join(str(p) for p in sandbox.read_write) or "none"
                if sandbox.strict and sandbox.allows(inbox):
                    report.add(
                        f"sandbox:{side}",
                        "fail",
                        f"{unit}: ProtectSystem=strict but ReadWritePaths ({rw}) covers "
                        f"to-{side}/, {side}'s own inbox",
                        f"ReadWritePaths={outbox} (only the outbox) in {unit}",
                    )
                elif sandbox.strict:
                    status = "ok" if sandbox.allows(outbox) else "fail"
                    report.add(
                        f"sandbox:{side}",
                        status,
                        f"{unit}: ProtectSystem=strict, ReadWritePaths={rw}"
                        + ("" if status == "ok" else f"; it cannot write its outbox {outbox}"),
                        None if status == "ok" else f"add ReadWritePaths={outbox} to {unit}",
                    )
                else:
                    report.add(
                        f"sandbox:{side}",
                        "warn",
                        f"{unit} has no ProtectSystem=strict (got "
                        f"{sandbox.protect_system or 'none'}): Unix modes are the whole boundary",
                        f"systemctl edit {unit}: ProtectSystem=strict, ReadWritePaths={outbox}",
                    )
        uname = users.get(side) or (sandbox.user if sandbox and sandbox.user else None) or side
        user = user_of(uname)
        if user is None:
            report.add(
                name,
                "skip",
                f"no Unix user {uname!r} for side {side}; boundary not tested",
                f"set users: {{{side}: USER}} in {ex.meta / CONFIG_NAME} "
                f"or pass --user {side}=USER",
            )
            continue
        try:
            out_w, in_w = probe_as(user, [outbox, inbox])
        except PermissionError:
            out_w, in_w = static_writable(user, outbox), static_writable(user, inbox)
        _judge(report, name, side, uname, out_w, in_w, sandbox, ex)


def _judge(
    report: DoctorReport,
    name: str,
    side: str,
    uname: str,
    out_w: Writable,
    in_w: Writable,
    sandbox: Any,
    ex: Exchange,
) -> None:
    how = "tried live as" if in_w.how == "live" else "from the modes, for"
    sandboxed_in = sandbox is not None and sandbox.strict and not sandbox.allows(in_w.path)
    problems, fixes = [], []
    if not out_w.writable:
        problems.append(f"cannot write its outbox to-{ex.other(side)}/ ({out_w.detail})")
        fixes.append(f"usermod -aG {ex.group or 'GROUP'} {uname}; chmod g+w {out_w.path}")
    if in_w.writable and not sandboxed_in:
        problems.append(f"CAN write into its own inbox to-{side}/ ({in_w.detail})")
        fixes.append(
            f"chmod g-w {in_w.path} (asymmetric modes), or run {side}'s service with "
            f"ProtectSystem=strict and ReadWritePaths={out_w.path}"
        )
    if problems:
        report.add(name, "fail", f"{how} {uname}: " + "; ".join(problems), "; ".join(fixes))
        return
    why = "the sandbox blocks its inbox" if in_w.writable else "its inbox refuses it"
    report.add(name, "ok", f"{how} {uname}: writes to-{ex.other(side)}/, {why}")


# -- heartbeat, git, numbering, archive --------------------------------------------------------
def check_heartbeat(ex: Exchange, report: DoctorReport, max_age: timedelta) -> None:
    """The tick's heartbeat exists and is fresh (a dead timer is an error, not silence)."""
    from mailslot.exchange.arrivals import bridged

    mark = bridged(ex.meta)
    if mark is not None and not mark.is_home:  # bridged: only the home host ticks
        report.add("heartbeat", "ok", f"bridged; the tick runs on host {mark.home!r}, not here")
        return
    beat = heartbeat_age(ex)
    fix = "systemctl status 'mailslot-exchange-*'; or install: mailslot exchange install"
    if beat is None:
        report.add("heartbeat", "fail", "the tick has never completed a run here", fix)
        return
    at, age = beat
    mins = age.total_seconds() / 60
    if age > max_age:
        report.add(
            "heartbeat",
            "fail",
            f"last tick {format_time(at)}, {mins:.0f} min ago "
            f"(limit {max_age.total_seconds() / 60:g}); nothing is archived, indexed or committed",
            fix + "; run one by hand: mailslot exchange tick",
        )
    else:
        report.add("heartbeat", "ok", f"last tick {format_time(at)}, {mins:.1f} min ago")
    # A tick that runs but cannot notify is silence of another kind: nobody hears of new work.
    try:
        beat_doc = json.loads((ex.meta / HEARTBEAT_NAME).read_text())
    except (OSError, ValueError):
        return
    if isinstance(beat_doc, dict) and beat_doc.get("notify_error"):
        report.add(
            "notify",
            "warn",
            f"the last tick could not notify: {str(beat_doc['notify_error'])[:200]}",
            "check the notify URLs in .mailslot/config; 'mailslot exchange tick' shows the error",
        )


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    # doctor may run as another user than the repository's owner (root, or a side's agent)
    return run_git(root, *args, config=[f"safe.directory={root}"], input=stdin)


def _is_entry(path: str) -> bool:
    return path.startswith("to-") and ENTRY_RE.match(path.rsplit("/", 1)[-1]) is not None


def check_git(ex: Exchange, report: DoctorReport, max_age: timedelta) -> None:
    """Repository present and clean (nothing the tick should have committed long ago)."""
    if not ex.git:
        report.add("git", "skip", "git is disabled in the config")
        return
    if not (ex.root / ".git").exists():
        report.add("git", "fail", "git is enabled but there is no repository", "git init && tick")
        return
    lock = index_lock(ex.root)
    if lock is not None:
        held = not lock.stale and lock.age_s < STALE_AFTER_S
        report.add(
            "git:lock",
            "warn" if held else "fail",
            f"{lock.describe()}; no tick can commit while it is there",
            "the next tick removes a stale one"
            if lock.stale
            else f"wait for that git to finish; if none runs in the repository: rm {lock.path}",
        )
    try:
        porcelain = _git(ex.root, "status", "--porcelain", "--untracked-files=all")
    except (MailslotError, OSError) as e:
        report.add("git", "fail", f"git status failed: {e}", "check git and the repository")
        return
    dirty = [line[3:] for line in porcelain.splitlines() if line.strip()]
    modified = [
        line[3:]
        for line in porcelain.splitlines()
        if line[:2].strip() == "M" and _is_entry(line[3:])
    ]
    if modified:
        report.add(
            "git:entries",
            "fail",
            "entry file(s) changed since committed (entries are never edited): "
            + ", ".join(modified[:5]),
            f"git -C {ex.root} diff -- {modified[0]}  # then restore: git checkout -- FILE and "
            "write the new text as a new entry",
        )
    cutoff = time.time() - max_age.total_seconds()
    old = []
    for p in dirty:
        try:
            if (ex.root / p.strip('"')).stat().st_mtime < cutoff:
                old.append(p)
        except OSError:
            old.append(p)
    if old:
        report.add(
            "git",
            "fail",
            f"{len(old)} change(s) older than {max_age.total_seconds() / 60:g} min not committed: "
            + ", ".join(old[:5]),
            "the tick commits every run: check the heartbeat; or run mailslot exchange tick",
        )
    elif dirty and lock is not None:
        report.add(
            "git",
            "warn",
            f"{len(dirty)} recent change(s) cannot be committed while .git/index.lock is there",
            "see git:lock",
        )
    elif dirty:
        report.add("git", "ok", f"{len(dirty)} recent change(s) await the next tick's commit")
    else:
        report.add("git", "ok", "working tree clean")


def check_history(ex: Exchange, report: DoctorReport) -> None:
    """An entry modified in history is reported; one that got smaller fails (an overwrite)."""
    if not ex.git or not (ex.root / ".git").exists():
        return
    try:
        log = _git(
            ex.root,
            "log",
            "--raw",
            "--no-renames",
            "--no-abbrev",
            "--format=commit %H",
            "--",
            "to-*",
        )
    except (MailslotError, OSError) as e:
        if "does not have any commits" in str(e):
            return
        report.add("history", "warn", f"git log failed: {e}")
        return
    changes: list[tuple[str, str, str, str]] = []  # commit, path, old blob, new blob
    commit = ""
    for line in log.splitlines():
        if line.startswith("commit "):
            commit = line[7:]
        elif line.startswith(":"):
            meta, _, path = line.partition("\t")
            parts = meta.split()
            if len(parts) >= 5 and parts[4] == "M" and _is_entry(path):
                changes.append((commit, path, parts[2], parts[3]))
    if not changes:
        report.add("history", "ok", "no entry was ever modified after it was committed")
        return
    blobs = sorted({b for c in changes for b in c[2:]})
    sizes: dict[str, int] = {}
    batch = _git(ex.root, "cat-file", "--batch-check", stdin="\n".join(blobs) + "\n")
    for row in batch.splitlines():
        parts = row.split()
        if len(parts) == 3 and parts[2].isdigit():
            sizes[parts[0]] = int(parts[2])
    for commit, path, old, new in changes:
        before, after = sizes.get(old, -1), sizes.get(new, -1)
        if after < before:
            report.add(
                f"history:{path}",
                "fail",
                f"{path} shrank from {before} to {after} bytes in commit {commit[:12]}: "
                "overwritten by a later write under the same number",
                f"recover: git -C {ex.root} show {commit[:12]}^:{path} > RECOVERED.md, "
                "then send it again as a new entry",
            )
        else:
            report.add(
                f"history:{path}",
                "warn",
                f"{path} was rewritten in commit {commit[:12]} ({before} -> {after} bytes); "
                "entries are never edited",
                f"compare: git -C {ex.root} diff {commit[:12]}^ {commit[:12]} -- {path}",
            )


def check_numbering(ex: Exchange, report: DoctorReport) -> None:
    """Per topic: duplicate numbers, gaps, and entries sitting in their own writer's inbox."""
    members = {**{s: s for s in ex.sides}, **ex.humans}
    dups, gaps, wrong = [], [], []
    for ref in list_topics(ex, include_archived=True):
        numbers: dict[int, list[str]] = {}
        for inbox_side, d in ref.dirs.items():
            for n, sender, name in entry_names(d):
                numbers.setdefault(n, []).append(f"to-{inbox_side}/{name}")
                if members.get(sender) == inbox_side:
                    wrong.append(f"{d.relative_to(ex.root)}/{name}")
        for n, where in sorted(numbers.items()):
            if len(where) > 1:
                dups.append(f"{ref.name} #{n:04d} ({', '.join(where)})")
        if numbers:
            missing = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
            if missing:
                gaps.append(f"{ref.name} missing {', '.join(f'{n:04d}' for n in missing[:5])}")
    for found, check, status, what, sep, fix in (
        (
            dups,
            "numbering:duplicates",
            "warn",
            "number(s) used twice",
            "; ",
            "both entries are kept and read; writers must take max(both sides)+1 "
            "(see CONVENTION.md)",
        ),
        (
            gaps,
            "numbering:gaps",
            "warn",
            "topic(s) with gaps",
            "; ",
            "a gap is a lost or moved entry: check git log -- <topic>",
        ),
        (
            wrong,
            "numbering:inbox",
            "fail",
            "entry(ies) inside their own writer's inbox",
            ", ",
            "a side writes only into the other side's inbox; move it with git mv and a new number",
        ),
    ):
        if found:
            report.add(check, status, f"{len(found)} {what}: " + sep.join(found[:5]), fix)
    if not (dups or gaps or wrong):
        report.add("numbering", "ok", "no duplicate numbers, gaps or misplaced entries")


def check_archive(ex: Exchange, report: DoctorReport) -> None:
    """No topic archived on one side only, or both live and archived on one side."""
    half = [r.name for r in list_topics(ex) if r.half_archived]
    both = [r.name for r in list_topics(ex, include_archived=True) if r.duplicated]
    if half:
        report.add(
            "archive:half",
            "fail",
            f"archived on one side only: {', '.join(half[:5])}",
            "run mailslot exchange tick: it archives both sides or brings both back",
        )
    if both:
        report.add(
            "archive:duplicate",
            "fail",
            f"both live and in done/ on one side: {', '.join(both[:5])}",
            "settle by hand: compare the two copies, keep one (git keeps the other)",
        )
    if not half and not both:
        report.add("archive", "ok", "every topic is live on both sides or archived on both")


def check_states(ex: Exchange, report: DoctorReport) -> None:
    """Every live STATE.md reads: an unknown status (``Done``, ``closed``) never archives, so it
    is a warning that names the file and the value, never silence."""
    bad = state_warnings(ex)
    if not bad:
        report.add("states", "ok", "every STATE.md reads")
        return
    report.add(
        "states",
        "warn",
        f"{len(bad)} STATE.md file(s) do not read: " + "; ".join(_safe(b) for b in bad[:5]),
        "the side that wrote it rewrites it with status open, in-progress, blocked or done "
        "(lowercase) and a fresh updated_at",
    )


def check_clocks(ex: Exchange, report: DoctorReport) -> None:
    """No live STATE.md is dated ahead of this host's clock (past ``FUTURE_SKEW``).

    The guard never archives on a time in the future and says why only in INDEX.md and the
    tick's ``waiting``; the topic then waits, with nothing in either inbox and no debt in a
    sweep, until the clock catches up. A warning naming the file, its time and the side that
    wrote it (whose clock likely runs fast).
    """
    limit = now() + FUTURE_SKEW
    ahead = []
    for pair in topic_pairs(ex).values():
        for inbox_side, d in pair.items():
            if not d.has_state:
                continue
            st = peek_state(d.file(STATE_NAME))
            if st.updated_at is not None and st.updated_at > limit:
                where = f"to-{inbox_side}/{d.topic}/{STATE_NAME}"
                writer = ex.writer_of(inbox_side)
                ahead.append(f"{where} (by {writer}) says {format_time(st.updated_at)}")
    if not ahead:
        report.add("clocks", "ok", "no STATE.md is dated ahead of this host's clock")
        return
    report.add(
        "clocks",
        "warn",
        f"{len(ahead)} STATE.md file(s) dated ahead of this host's clock, so their topics wait "
        "and never archive: " + "; ".join(_safe(a) for a in ahead[:5]),
        "the side that wrote it checks its clock (timedatectl) and rewrites it with a true "
        "updated_at",
    )


def check_answers(ex: Exchange, report: DoctorReport, patience: timedelta) -> None:
    """Per side: ``action: required`` entries it has left unanswered longer than ``patience``.

    A poller can die and never reschedule while its service stayed ``active``; from the
    outside that looks exactly like an agent with nothing to say. A warning, not a failure: a
    slow answer is allowed, a silent one should be looked at.
    """
    cutoff = now() - patience
    for side in ex.sides:
        old = [
            d
            for d in sweep(ex, side).debts
            if d.debt.reason == "reply" and d.since is not None and d.since < cutoff
        ]
        if not old:
            report.add(f"answers:{side}", "ok", f"no required entry waits on {side} for long")
            continue
        oldest = old[0]
        hours = (now() - oldest.since).total_seconds() / 3600 if oldest.since else 0
        report.add(
            f"answers:{side}",
            "warn",
            f"{len(old)} required entry(ies) unanswered by {side} for over "
            f"{patience.total_seconds() / 3600:g} h; oldest {oldest.debt.topic}/"
            f"{oldest.debt.entry} ({hours:.0f} h)",
            f"is {side}'s poller alive? check its scheduler's logs (a dead poller looks like "
            f"silence); {side} can list them with: mailslot --as {side} exchange sweep",
        )


def check_leftovers(ex: Exchange, report: DoctorReport) -> None:
    """Temps of killed writers and empty topic folders older than the tick's bound (warn)."""
    found = leftovers.find(ex)
    if not found:
        report.add("tree:leftovers", "ok", "no leftovers of killed writers")
        return
    hours = leftovers.LEFTOVER_AGE_S / 3600
    report.add(
        "tree:leftovers",
        "warn",
        f"{len(found)} leftover(s) of killed writers older than {hours:g} h: "
        + ", ".join(f"{_safe(x.path)} ({x.kind})" for x in found[:5]),
        "the tick removes them (at most once an hour); nothing in them is a message",
    )


def check_tree(ex: Exchange, report: DoctorReport) -> None:
    """No symlink anywhere in the tree (fail); no stray or non-regular file in a topic (warn)."""
    audit = audit_tree(ex)
    if audit.symlinks:
        report.add(
            "tree:symlinks",
            "fail",
            f"{len(audit.symlinks)} symlink(s) in the exchange tree: "
            + ", ".join(_safe(p) for p in audit.symlinks[:5]),
            "remove each (rm PATH, not rm -r PATH/) and recreate a real directory if one belongs "
            "there; readers skip symlinks and the tick moves nothing while one is there",
        )
    else:
        report.add("tree:symlinks", "ok", "no symlinks in the exchange tree")
    if audit.strays:
        report.add(
            "tree:strays",
            "warn",
            f"{len(audit.strays)} stray file(s) in topics: "
            + "; ".join(f"{_safe(p)} ({why})" for p, why in audit.strays[:5]),
            "rename each to NNNN-<from>.md with the writer's name, or remove it (git keeps it); "
            "the tick does not archive a topic holding one",
        )
    else:
        report.add("tree:strays", "ok", "every file in a topic is an entry, STATE.md or HELD.md")


def _safe(text: str) -> str:
    """``text`` with control characters escaped (paths may be hostile)."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def doctor(
    ex: Exchange,
    *,
    users: dict[str, str] | None = None,
    services: dict[str, str] | None = None,
    max_age: timedelta = HEARTBEAT_STALE,
    patience: timedelta = ANSWER_PATIENCE,
) -> DoctorReport:
    """Run every check over ``ex``; never raises for a finding (``raise_for_failures`` does)."""
    cfg_users, cfg_services = deploy_facts(ex)
    users = {**cfg_users, **(users or {})}
    services = {**cfg_services, **(services or {})}
    report = DoctorReport(ex.root)
    check_modes(ex, report)
    check_boundary(ex, report, users, services)
    check_heartbeat(ex, report, max_age)
    check_git(ex, report, max_age)
    check_history(ex, report)
    check_numbering(ex, report)
    check_archive(ex, report)
    check_tree(ex, report)
    check_leftovers(ex, report)
    check_answers(ex, report, patience)
    check_states(ex, report)
    check_clocks(ex, report)
    record_verdict(ex, report)
    return report


# Where the last verdict is kept, beside the heartbeat, for the page's overview.
VERDICT_NAME = "doctor.json"


def record_verdict(ex: Exchange, report: DoctorReport) -> bool:
    """Keep ``report`` with its time in ``.mailslot/doctor.json``; False when this user may not
    write there (a side's agent often may not): the verdict was still printed."""
    doc = {"ran_at": format_time(now()), **report.to_json()}
    try:
        atomic_write(ex.meta / VERDICT_NAME, json.dumps(doc, indent=1) + "\n", mode=0o644)
    except (OSError, MailslotError):
        return False
    return True

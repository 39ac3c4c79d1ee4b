"""One tick: diff, guard, hold, archive, index, commit, notify -- under a lock, never silent.

Meant for a timer every two minutes. Each step guards against a failure a real build met:

1. Diff against the last run by presence/size/mtime. A brand-new topic is new activity, never
   silently absorbed into the baseline; a rewritten or shrunken entry is reported loudly.
2. Archive (plain move to ``done/`` on both sides) only on the guard's word (``guard.decide``);
   a half-archived topic is brought to one state: archived if the guard allows, live otherwise.
3. HELD.md in the inbox of the side that owes the re-read; written once and left alone while the
   hold stands (no churn), removed before an archive, recomputed for every live topic every run.
4. INDEX.md with both sides' status, counts, last activity, holds and debts.
5. ``git add -A`` + commit whenever anything is dirty, whatever else happened.
6. One batched notification; a failure is reported and retried next tick, never blocking 2-5.

``_Tick.run`` is these steps in order (leftovers of dead writers are cleaned first; the state
for the next run is saved last): ``scan`` the tree, ``settle`` each topic (decide, archive or
recover, diff, hold, view), report what is gone and what reached ``done/`` unread, then INDEX.md,
commit, notify. A topic none of whose copies changed since the last run (``scan``: stubs and
quiet copies), whose outcome did not hang on the clock, the guard or a hold, keeps that outcome
(``pass_over``): a tick with nothing new reads neither a file nor its megabytes of records.
Reading files is ``readings``, the holds ``holds``, the result ``tickresult``, what is kept
between runs ``tickstate``.

A tick that cannot do its job (lock held, git failing, a move refused) reports what it did and
then fails with a clear message: a crash must never look like a quiet no-op.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from mailslot.core.clock import FUTURE_SKEW, format_time, now
from mailslot.core.errors import Conflict, LockBusy, MailslotError
from mailslot.core.fsio import atomic_write, file_lock
from mailslot.core.gcpause import gc_paused
from mailslot.core.git import clear_stale_index_lock
from mailslot.core.move import safe_move
from mailslot.exchange import tickstate
from mailslot.exchange.arrivals import bridged
from mailslot.exchange.convention import held_text
from mailslot.exchange.entries import ENTRY_RE
from mailslot.exchange.gitlog import commit_all, ensure_exclude, is_repo
from mailslot.exchange.guard import Decision, decide
from mailslot.exchange.holds import lift, load_holds, place, save_holds, trusted_hold
from mailslot.exchange.index import (
    Debt,
    TopicView,
    build_view,
    index_row,
    render_index_rows,
)
from mailslot.exchange.late import late_debts
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.leftovers import clean as clean_leftovers
from mailslot.exchange.listing import linked, list_dir
from mailslot.exchange.monitor import kept_lines
from mailslot.exchange.readings import Readings
from mailslot.exchange.scan import (
    SIG,
    SideCopy,
    Stub,
    TopicScan,
    current_sig,
    keep_deferred,
    materialize,
    next_turn,
    parse_sig,
    scan_tree,
)
from mailslot.exchange.tickresult import TickFailed, TickResult
from mailslot.exchange.tickstate import (
    TICK_GIT,
    TICK_STATE,
    GitCheck,
    MonitorKept,
    Outcome,
    QuickRecord,
)
from mailslot.notify import AppriseNotifier, Notifier

__all__ = ["HEARTBEAT", "TICK_GIT", "TICK_STATE", "TickFailed", "TickResult", "tick"]


HEARTBEAT = "heartbeat"
# How long a tick waits for a previous one to finish before giving up loudly; a tick takes well
# under a second, so a lock held this long means a stuck run someone must look at.
LOCK_WAIT_SECONDS = 30.0
# How long an archive waits for the send lock (a send holds it for milliseconds): past this, a
# writer is stuck holding it, and the tick archives nothing this run rather than hang.
SEND_LOCK_WAIT_SECONDS = 10.0
# With nothing changed where the tick looks (topics, top-level files, config) and git clean last
# time, git is skipped -- except at least this often, so a change made somewhere the tick does not
# scan (inside an archived topic) is still committed within minutes.
GIT_FULL_CHECK_NS = 10 * 60 * 1_000_000_000
# CONVENTION.md's name for an entry a hand writer is about to number (``.draft.md``).
DRAFT_PREFIX = ".draft"


@contextlib.contextmanager
def _tick_lock(path: Path, wait: float, holder: str = "another tick") -> Iterator[None]:
    busy = f"{holder} has held the lock for over {wait:g}s; is one stuck?"
    with file_lock(path, timeout=wait, busy=busy):
        yield


def _drafts(directory: Path) -> list[str]:
    """Hand writers' drafts in ``directory`` (``.draft*``): CONVENTION.md has a hand writer write
    ``.draft.md`` and rename it to its number under the send lock, so under that lock a draft is
    an entry on its way in. Other dot-names (an editor's swap file, a dead writer's temp) are not
    taken as one."""
    try:
        with os.scandir(directory) as it:
            return sorted(e.name for e in it if e.name.startswith(DRAFT_PREFIX))
    except OSError:
        return []


class _Tick:
    def __init__(self, ex: Exchange, notifier: Notifier | None, result: TickResult) -> None:
        self.ex = ex
        self.notifier = notifier
        self.r = result
        self.now = now()
        # The last run's outcomes and quick records; without them (or with notifications
        # pending) the whole state is read now, else only once something changed.
        self.quiet_prev = tickstate.load_quiet(ex.meta)
        if self.quiet_prev is not None and self.quiet_prev.get("pending"):
            self.quiet_prev = None
        self.kept_known: dict[str, Outcome | None] = (
            self.quiet_prev["known"] if self.quiet_prev else {}
        )
        self.prev: dict[str, Any] = {}
        self.prev_copies: dict[str, list[Any]] = {}
        self.prev_status: dict[str, str] = {}
        self.prev_ns = 0
        self.loaded = False
        self.outcomes: dict[str, Outcome | None] = {}  # topic -> its outcome, for the next run
        self.monitor: dict[str, dict[str, list[Any]] | None] = {}  # topic -> its kept_lines
        self.live: dict[str, SideCopy] = {}  # copy key -> this run's copy of a live topic
        self.touched = False  # this tick changed something on disk (git must look)
        self.pending: list[str] | None = None  # unsent notification lines, None = unchanged
        if self.quiet_prev is None:
            self.load()
        self.git_prev = tickstate.load_git(ex.meta, self.prev)
        self.git_clean, self.git_checked, self.rsig = self.git_prev or GitCheck()
        self.frozen = False
        self.send_lock_stuck = False
        self.unseen: list[str] = []  # entries in done/ that arrived after the archive, unread
        self.holds = load_holds(ex)  # the HELD.md files this tick stands behind
        self.holds_before = dict(self.holds)
        self.read = Readings(ex, self.prev_copies, bridged(ex.meta))
        told = self.quiet_prev if self.quiet_prev is not None else self.prev
        known = told.get("known") if self.quiet_prev is not None else told.get("topics", [])
        self.prev_topics = set(known or [])
        self.prev_archived = set(told.get("archived", []))
        self.prev_unseen = set(told.get("unseen", []))
        self.status: dict[str, str] = {}  # "<topic>/<side>" -> status, for the next run
        self.known: list[str] = []  # live topics told (new, reopened) or known already
        self.passed: list[str] = []  # topics that kept their outcome (pass_over)
        self.stubs: list[Stub] = []  # their copies passed over (scan.Stub)
        self.index_id: list[int] | None = None  # INDEX.md's identity once written or checked
        self.late: list[dict[str, Any]] = []  # the unseen debts of archived topics (Debt)
        self.still_archived: set[str] = set()  # archived ones back in part: not yet reopened
        self.deferred: list[str] = []  # root-relative files still being written: left for later
        self.both = "/".join(sorted(ex.sides))  # Outcome.sides of a topic with a copy on each

    def load(self) -> None:
        """Read the whole state of the last run (once): what any topic that changed needs."""
        if self.loaded:
            return
        self.loaded = True
        self.prev = tickstate.load_state(self.ex.meta, self.r.warnings)
        self.prev_copies.update(self.prev.get("copies", {}))
        self.prev_status.update(self.prev.get("status", {}))
        self.prev_ns = int(self.prev.get("tick_ns", 0))

    def unchanged(self, scan: TopicScan) -> bool:
        """Whether the topic keeps the last run's outcome: every copy unchanged (``scan``), on
        the same sides, and an outcome kept."""
        kept = self.kept_known.get(scan.name)
        if kept is None:
            return False
        if (scan.copies or scan.conflict is not None) and not scan.unchanged():
            return False  # (none listed, the common case: every copy passed over unchanged)
        if len(kept.status) != len(self.ex.sides):  # a status per side, or worked out afresh
            return False
        if len(scan.copies) + len(scan.stubs) == len(self.ex.sides):  # the common case
            return kept.sides == self.both
        return kept.sides == "/".join(scan.sides())

    def pass_over(self, scan: TopicScan, rows: list[str]) -> None:
        """A topic that keeps its last outcome: its statuses, row and debts as they were."""
        name = scan.name
        kept = self.kept_known[name]
        assert kept is not None  # unchanged() held
        if scan.copies:
            for copy in scan.copies.values():
                self.live[copy.key] = copy
        self.stubs.extend(scan.stubs.values())
        self.known.append(name)
        self.outcomes[name] = kept
        self.passed.append(name)
        rows.append(kept.row)
        if kept.debts:  # Debt.to_json of each, made straight (13,000 of them on a quiet run)
            told = self.r.debts
            for side, reason, entry, detail in kept.debts:
                debt = {"topic": name, "side": side, "reason": reason, "entry": entry}
                if detail is not None:
                    debt["detail"] = detail
                told.append(debt)

    def keep(self, scan: TopicScan, decision: Decision, view: TopicView, row: str) -> None:
        """Keep this topic's outcome for the next run when it holds for as long as no copy
        changes: not hanging on the guard (a side not done), no hold, stray, conflict or copy in
        ``done/``, not bridged (arrival receipts change beside the tree)."""
        copies = scan.copies.values()
        stable = (
            not scan.conflict
            and not decision.candidate
            and not decision.waiting
            and not decision.holds
            and self.read.bridged is None
            and not any(c.held or c.strays or c.archived or c.deferred for c in copies)
        )
        if stable:
            debts = [[d.side, d.reason, d.entry, d.detail] for d in view.debts]
            status = [view.status.get(w, "open") for w in self.ex.sides]
            sides = "/".join(scan.sides())
            self.outcomes[scan.name] = Outcome(sides, status, row, debts)
            self.monitor[scan.name] = self.monitor_lines(scan)
        else:
            self.outcomes[scan.name] = None

    def monitor_lines(self, scan: TopicScan) -> dict[str, list[Any]] | None:
        """What ``monitor`` would say of this topic to each side (``monitor.kept_lines``), kept
        for it while nothing changes; ``None`` when a STATE.md is dated in the future (the
        answer then changes with the clock)."""
        limit = int((self.now + FUTURE_SKEW).timestamp() * 1_000_000)
        for copy in scan.copies.values():
            kept = self.read.parsed.get(copy.key, {}).get(STATE_NAME)
            if STATE_NAME in copy.files and (kept is None or (kept[2] or 0) > limit):
                return None
        pair = {s: list_dir(c.dir, scan.name, False) for s, c in scan.copies.items()}
        return kept_lines(self.ex, scan.name, pair)

    def decide(self, scan: TopicScan, status: dict[str, str]) -> Decision:
        """The guard's word on this topic, and never archive past a stray file (fail safe: a file
        nobody can read as an entry may be an unread one)."""
        if scan.conflict:
            decision = Decision()
        elif all(s == "done" for s in status.values()):
            decision = decide({w: self.read.guard_side(scan, w) for w in self.ex.sides}, self.now)
        else:
            decision = Decision()  # what decide says whenever a side is not done
        if any(c.strays for c in scan.copies.values()):
            strays = sorted(
                f"to-{s}/{scan.name}/{n}" for s, c in scan.copies.items() for n in c.strays
            )
            self.r.strays.extend(strays)
            decision.archive = False
            decision.waiting.append(f"{len(strays)} stray file(s): {', '.join(strays[:3])}")
        deferred = [f"to-{s}/{scan.name}/{n}" for s, c in scan.copies.items() for n in c.deferred]
        if deferred:  # taken next tick once whole: never moved, read or committed half-written
            decision.archive = False
            decision.waiting.append(f"{deferred[0]} is still being written")
        return decision

    # -- moving ----------------------------------------------------------------------------
    def move(self, src: Path, dst: Path) -> bool:
        bad = linked(dst.parent) or linked(src.parent) or (src if os.path.islink(src) else None)
        if bad is not None:
            self.r.errors.append(f"cannot move {src} to {dst}: {bad} is a symlink")
            return False
        if os.path.lexists(dst):
            self.r.errors.append(f"cannot move {src} to {dst}: the target exists")
            return False
        try:
            safe_move(src, dst)
        except (OSError, MailslotError) as e:
            why = e.strerror if isinstance(e, OSError) else e
            self.r.errors.append(f"cannot move {src} to {dst}: {why}")
            return False
        self.touched = True
        return True

    def archive(self, scan: TopicScan) -> bool:
        ex = self.ex
        targets = {s: ex.inbox(s) / DONE / scan.name for s in scan.copies}
        for s, c in scan.copies.items():
            if not c.archived and targets[s].exists():
                self.r.errors.append(f"cannot archive {scan.name}: {targets[s]} already exists")
                return False
        # Senders claim numbers under the send lock: holding it, no mailslot send lands between
        # the re-check and the move; the re-check catches anything written since the scan (a
        # hand writer that skips the lock too, up to this instant). What lands after it anyway
        # is an ``unseen`` debt (``late``), never silence.
        if self.send_lock_stuck:
            return False  # reported once; the next tick tries again
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(_tick_lock(ex.send_lock, SEND_LOCK_WAIT_SECONDS, "a sender"))
            except LockBusy:
                self.send_lock_stuck = True
                self.r.errors.append(
                    f"cannot archive {scan.name}: the send lock has been held for over "
                    f"{SEND_LOCK_WAIT_SECONDS:g}s (a stuck writer?); nothing archived this tick"
                )
                return False
            except OSError as e:
                self.r.errors.append(f"cannot archive {scan.name}: send lock: {e.strerror}")
                return False
            return self._archive_locked(scan, targets)

    def _archive_locked(self, scan: TopicScan, targets: dict[str, Path]) -> bool:
        ex = self.ex
        moved = [s for s, c in scan.copies.items() if current_sig(c) != c.sig]
        if moved:
            for c in scan.copies.values():
                c.dir_mtime, c.settled, c.trusted = -1, False, None  # list in full next time
            self.r.waiting.append(
                {
                    "topic": scan.name,
                    "reason": f"to-{moved[0]}/{scan.name} changed while the tick decided; "
                    "not archived, decided again next tick",
                }
            )
            return False
        drafts = [
            f"to-{s}/{scan.name}/{n}"
            for s, c in scan.copies.items()
            if not c.archived
            for n in _drafts(c.path)
        ]
        if drafts:  # a hand writer's draft waits for its lock line: the move would bury it
            self.r.waiting.append(
                {
                    "topic": scan.name,
                    "reason": f"{drafts[0]} is a hand writer's draft on its way in; "
                    "not archived while it is there",
                }
            )
            return False
        if any(c.held for c in scan.copies.values()):
            self.r.released.append(scan.name)
            self.r.events.append(f"released hold on {scan.name}")
        for side, copy in scan.copies.items():  # no HELD.md ever reaches done/
            self.holds.pop(f"to-{side}/{scan.name}", None)
            if copy.held:
                lift(f"{copy.dir}/{HELD_NAME}")
                copy.held, copy.trusted, copy.trusted_key = False, None, ""
                self.touched = True
        ok = True
        for s, c in scan.copies.items():
            if not c.archived:
                try:
                    ex.make_dir(ex.inbox(s) / DONE, s)
                except MailslotError as e:
                    self.r.errors.append(f"cannot archive {scan.name}: {e}")
                    return False
                ok = self.move(c.path, targets[s]) and ok
        return ok

    def unarchive(self, scan: TopicScan) -> None:
        for s, c in scan.copies.items():
            if c.archived:
                live = self.ex.inbox(s) / scan.name
                if self.move(c.path, live):
                    c.path, c.archived = live, False
                    c.dir_mtime, c.settled = -1, False  # moved: list it in full next time

    # -- the run ---------------------------------------------------------------------------
    def diff_copy(self, ck: str, copy: SideCopy | None, reopened: bool) -> None:
        """Compare one side's copy of a topic with the last run: new, rewritten, removed."""
        r = self.r
        rec = self.prev_copies.get(ck)
        was_sig = rec[SIG] if rec is not None else None
        if copy is None:
            if was_sig is not None:
                self.touched = True
                r.removed.extend(f"{ck}/{n}" for n in parse_sig(was_sig) if ENTRY_RE.match(n))
            return
        self.live[ck] = copy
        if was_sig is not None and was_sig == copy.sig:
            return
        self.touched = True
        old = parse_sig(was_sig) if was_sig is not None else {}
        for name, sig in copy.files.items():
            was = old.get(name)
            if not ENTRY_RE.match(name):
                continue
            if was is None:
                _, mtime_ns = sig
                if not (reopened and mtime_ns <= self.prev_ns):
                    r.new_entries.append(f"{ck}/{name}")
            elif was != sig:
                (was_bytes, _), (now_bytes, _) = was, sig
                r.rewritten.append(
                    {"path": f"{ck}/{name}", "was_bytes": was_bytes, "bytes": now_bytes}
                )
        r.removed.extend(f"{ck}/{n}" for n in old if n not in copy.files and ENTRY_RE.match(n))

    def run(self) -> None:
        """The steps, in order; each one that writes reports its failure and the rest still run
        (a full disk must not hide what this run already did: an archive needs no space)."""
        ex, r = self.ex, self.r
        r.cleaned += clean_leftovers(ex)  # killed writers' temps, empty topic folders
        topics, archived = self.scan()
        rows: list[str] = []
        now_ns = time.time_ns()
        passed = 0
        for name in sorted(topics):
            scan = topics[name]
            if self.unchanged(scan):
                self.pass_over(scan, rows)
                passed += 1
                continue
            self.load()  # once: a topic that changed needs the whole state
            scan.materialize(self.prev_copies, now_ns, self.ex.sides)
            for copy in scan.copies.values():
                keep_deferred(copy, self.prev_copies.get(copy.key))
            view, decision = self.settle(scan, archived)
            if view is not None:
                row = index_row(ex, view)
                rows.append(row)
                self.keep(scan, decision, view, row)
        self.deferred = sorted(
            os.path.relpath(f"{c.dir}/{n}", ex.root)
            for scan in topics.values()
            for c in scan.copies.values()
            for n in c.deferred
        )
        self.report_gone(topics, archived)
        late = self.report_late(archived)
        same = passed == len(topics) == len(self.prev_topics) and not self.r.unseen
        same = same and self.quiet_prev is not None
        same = same and [d.to_json() for d in late] == self.quiet_prev.get("late")  # type: ignore[union-attr]
        self.late = [d.to_json() for d in late]
        try:
            self.write_index(rows, same)
        except (MailslotError, OSError) as e:
            r.errors.append(f"cannot write INDEX.md: {e}")
        self.commit()
        self.notify()
        try:
            self.save(self.known, archived | self.still_archived)
        except (MailslotError, OSError) as e:
            r.errors.append(f"cannot save the tick state: {e}")

    def scan(self) -> tuple[dict[str, TopicScan], set[str]]:
        """Live topics and archived names (``scan.scan_tree``); a symlink in the tree is an
        error and freezes every move this run."""
        links: list[str] = []
        quick = self.quiet_prev["copies"] if self.quiet_prev is not None else None
        turn = next_turn(tickstate.load_turn(self.ex.meta), time.time_ns())
        topics, archived = scan_tree(self.ex, self.prev_copies, links, quick, turn)
        try:
            tickstate.save_turn(self.ex.meta, turn)
        except (MailslotError, OSError) as e:
            self.r.errors.append(f"cannot save the rotation's turn: {e}")
        for link in sorted(set(links)):
            rel = os.path.relpath(link, self.ex.root)
            self.r.symlinks.append(rel)
            self.r.errors.append(
                f"refusing symlink {rel}: the exchange tree holds no symlinks and the tick moves "
                "nothing while one is there (remove it; recreate a real directory)"
            )
        self.frozen = bool(links)  # no archive or recovery move while a symlink is in the tree
        return topics, archived

    def settle(self, scan: TopicScan, archived: set[str]) -> tuple[TopicView | None, Decision]:
        """One topic: decide, archive or recover it, diff it against the last run, place or
        lift its holds; its view for INDEX.md (``None`` once it is archived) and the guard's
        word."""
        r, name = self.r, scan.name
        if scan.conflict:
            r.errors.append(f"topic {name}: {scan.conflict}; settle it by hand")
        status, last = self.read.statuses(scan)
        decision = self.decide(scan, status)
        done = False
        if self.frozen:
            pass  # reported already; HELD/INDEX still computed, nothing moves
        elif scan.half_archived and not scan.conflict:
            if decision.archive:
                done = self.archive(scan)
            else:
                self.unarchive(scan)
            to = "archived" if decision.archive else "live"
            r.recovered.append({"topic": name, "to": to})
            r.events.append(f"recovered half-archived {name} -> {to}")
        elif decision.archive and not scan.conflict:
            done = self.archive(scan)
        reopened = name in self.prev_archived
        for side in self.ex.sides:
            self.diff_copy(f"to-{side}/{name}", scan.copies.get(side), reopened)
        for writer, now_is in status.items():
            self.status[f"{name}/{writer}"] = now_is
            before = self.prev_status.get(f"{name}/{writer}", "open")
            if before != now_is:
                r.state_changes.append(
                    {"topic": name, "side": writer, "from": before, "to": now_is}
                )
        # Known as live once wholly live: a conflict (its error only) or a copy still in done/
        # is not, so the topic is told new or reopened when it is settled, not lost in between.
        if done:  # told new (or reopened) and archived at once when it was wholly live
            if not scan.half_archived and name not in self.prev_topics:
                (r.reopened if reopened else r.new_topics).append(name)
        elif not scan.conflict and not any(c.archived for c in scan.copies.values()):
            if name not in self.prev_topics:
                (r.reopened if reopened else r.new_topics).append(name)
            self.known.append(name)
        elif name in self.prev_topics:
            self.known.append(name)
        elif reopened:
            self.still_archived.add(name)
        if done:
            r.archived.append(name)
            archived.add(name)
            for side in self.ex.sides:
                self.live.pop(f"to-{side}/{name}", None)
            return None, decision
        self.hold(scan, decision)
        return self.view(scan, status, last, decision), decision

    def report_gone(self, topics: dict[str, TopicScan], archived: set[str]) -> None:
        """Topics the last run saw that are neither live nor archived now: loudly removed."""
        for name in sorted(self.prev_topics - set(topics) - archived):
            self.touched = True
            self.r.removed.append(f"{name}/ (the whole topic, from both sides)")
        self.r.new_entries.sort()

    def report_late(self, archived: set[str]) -> list[Debt]:
        """Entries that reached ``done/`` unread (``late``): debts, and told once each."""
        r = self.r
        late = late_debts(self.ex, self.ex.sides, archived)
        r.debts.extend(d.to_json() for d in late)
        known = self.prev_unseen
        self.unseen = sorted(f"to-{d.side}/{DONE}/{d.topic}/{d.entry}" for d in late)
        for key in self.unseen:
            if key not in known:  # told once, like any new entry; INDEX.md keeps it standing
                r.unseen.append(key)
                r.events.append(f"UNSEEN {key}: arrived after the archive, unread")
        return late

    def hold(self, scan: TopicScan, decision: Decision) -> None:
        """HELD.md in the inbox of each side that owes a re-read (``decision.holds``): placed
        once and left alone while the hold stands, lifted when it no longer does; a HELD.md
        the tick did not place is a warning, never taken for a hold."""
        ex, r, name = self.ex, self.r, scan.name
        for side in ex.sides:
            copy = scan.copies.get(side)  # HELD.md goes into the owing side's inbox
            want = side in decision.holds
            if copy is None or not (want or copy.held):
                continue  # the common case: no hold wanted, none there (no path built)
            ck = f"to-{side}/{name}"
            held_path = f"{copy.dir}/{HELD_NAME}"
            hold = trusted_hold(self.holds, side, name, held_path) if copy.held else None
            trusted = hold is not None
            if copy.held and not trusted:
                r.warnings.append(
                    f"stray {ck}/{HELD_NAME}: not placed by the tick (not shown as a hold)"
                )
            if not trusted:
                self.holds.pop(ck, None)
            if want and not copy.archived:
                entry = decision.holds[side]
                if hold is not None and hold.entry is None:  # a record that does not name it
                    self.holds[ck] = hold._replace(entry=entry)
                if not trusted:  # a standing hold is never rewritten: no churn
                    text = held_text(name, side, ex.other(side), entry, decision.reasons[side])
                    try:
                        placed = place(
                            Path(held_path),
                            text,
                            entry,
                            mode=ex.file_mode(side),
                            replace=copy.held,  # a planted one: replaced by the tick's own
                        )
                        if placed is not None:
                            self.holds[ck] = placed
                        copy.held = trusted = self.touched = True
                        copy.trusted, copy.trusted_key = None, ""
                        r.held.append(name)
                        self.r.events.append(f"HELD {name}: {decision.reasons[side]}")
                    except (OSError, MailslotError) as e:
                        r.errors.append(f"cannot write HELD.md for {name}: {e}")
            elif trusted and not want:
                try:
                    lifted = lift(held_path)
                except OSError as e:
                    r.errors.append(f"cannot remove HELD.md for {name}: {e.strerror}")
                    lifted = False
                if lifted:
                    r.released.append(name)
                    self.r.events.append(f"released hold on {name}")
                    copy.held, copy.trusted, copy.trusted_key = False, None, ""
                    self.holds.pop(ck, None)
                    trusted = False
                    self.touched = True
            if trusted and (not r.holding or r.holding[-1] != name):
                r.holding.append(name)

    def view(
        self, scan: TopicScan, status: dict[str, str], last: datetime | None, decision: Decision
    ) -> TopicView:
        """This topic's ``TopicView`` (``index.build_view``) for INDEX.md; its debts and why it
        waits go into the result too."""
        ex, r, name = self.ex, self.r, scan.name
        required = {}
        for inbox_side in scan.copies:
            owed = self.read.owed(scan, inbox_side)
            if owed is not None:
                required[ex.writer_of(inbox_side)] = owed
        view = build_view(
            ex,
            name,
            status,
            {ex.writer_of(i): c.count for i, c in scan.copies.items()},
            required=required,
            held=dict(decision.holds),
            waiting=list(decision.waiting),
            last_activity=last,
        )
        for w in decision.waiting:
            r.waiting.append({"topic": name, "reason": w})
        r.debts.extend(d.to_json() for d in view.debts)
        return view

    def write_index(self, rows: list[str], same: bool) -> None:
        """INDEX.md from ``rows`` and the debts told in the result (every live topic's, in the
        order of ``rows``, then the unseen ones), written only if it reads otherwise. ``same``:
        every topic and debt is as the last run had them, so an INDEX.md that is still the
        file it left (``tickstate.identity``) is not even rendered."""
        path = self.ex.root / "INDEX.md"
        kept = self.quiet_prev.get("index") if self.quiet_prev is not None else None
        if same and kept is not None and kept == tickstate.identity(path):
            self.index_id = kept
            return
        debts = [Debt(**d) for d in self.r.debts]
        text = render_index_rows(self.ex, rows, debts)
        try:
            if path.read_text() == text:
                self.index_id = tickstate.identity(path)
                return
        except OSError:
            pass
        atomic_write(path, text, mode=0o644)
        self.index_id = tickstate.identity(path)
        self.touched = True

    def root_sig(self) -> str:
        """Top-level files and the config: changes there outside any topic make git look."""
        parts = []
        for e in sorted(os.scandir(self.ex.root), key=lambda e: e.name):
            if e.name in (".git", ".mailslot"):
                continue
            st = e.stat(follow_symlinks=False)
            parts.append(f"{e.name}\t{st.st_size}\t{st.st_mtime_ns}")
        with contextlib.suppress(OSError):
            st = (self.ex.meta / "config").stat()
            parts.append(f"config\t{st.st_size}\t{st.st_mtime_ns}")
        return "\n".join(parts)

    def commit(self) -> None:
        ex, r = self.ex, self.r
        if not ex.git:
            return
        if not is_repo(ex.root):
            r.errors.append("git is enabled in the config but the repository is missing")
            return
        self.rsig = self.root_sig()
        stale = time.time_ns() - self.git_checked > GIT_FULL_CHECK_NS
        same_root = self.git_prev is not None and self.rsig == self.git_prev.root
        if not (self.touched or stale or not self.git_clean or not same_root):
            return  # nothing changed anywhere the tick looks, and git was clean last time
        try:
            ensure_exclude(ex.root)  # leftovers in topics are never committed
        except OSError as e:
            r.errors.append(f"cannot write .git/info/exclude: {e.strerror}")
            self.git_clean = False
            return
        lock = clear_stale_index_lock(ex.root)  # a git killed mid-run left it; see core.git
        if lock is not None and lock.stale:
            r.cleaned.append(str(lock.path.relative_to(ex.root)))
        elif lock is not None:
            r.errors.append(f"git index is locked: {lock.describe()}")
            self.git_clean = False
            return
        try:
            r.commit = commit_all(ex.root, r.commit_message(), self.deferred)
        except MailslotError as e:
            r.errors.append(str(e))
            self.git_clean = False
            return
        self.git_clean = not self.deferred  # a file left out: git looks again next tick
        self.git_checked = time.time_ns()
        self.rsig = self.root_sig()  # the commit itself does not change the tree

    def notify(self) -> None:
        r = self.r
        pending: list[str] = list(self.prev.get("pending", []))
        lines = r.lines() if r.activity else []
        if self.notifier is None or (not pending and not lines):
            return
        error = self.notifier.send(*r.notification(self.ex.root.name, pending))
        if error is None:
            r.notified = True
            self.pending = []
        else:
            r.notify_error = error
            self.pending = [*pending, *lines][-500:]  # bounded: the git log keeps the rest

    def save(self, topics: list[str], archived: set[str]) -> None:
        """The state for the next run: the whole of it only when this run read it (something
        changed), or when what it keeps of archived topics changed; then the quiet part."""
        git = GitCheck(self.git_clean, self.git_checked, self.rsig)
        if self.holds != self.holds_before:
            save_holds(self.ex, self.holds)
        told = sorted(archived)
        kept = self.quiet_prev
        if kept is None or (
            (told, self.unseen, self.pending) != (kept["archived"], kept["unseen"], None)
            or set(topics) != self.prev_topics
        ):
            self.load()  # the whole state changes: what it keeps of archived topics, or more
        pending: list[str] = []
        # read before the state is written: it goes with the state as it was
        monitor_prev = tickstate.load_monitor(self.ex.meta) if self.loaded else None
        if self.loaded:
            pending = self.pending if self.pending is not None else self.prev.get("pending", [])
            pending = pending if self.notifier is not None else []
            now_ns = time.time_ns()
            for name in self.passed:  # their statuses, as kept
                outcome = self.outcomes[name]
                assert outcome is not None  # a topic passed over keeps its outcome
                for writer, now_is in zip(self.ex.sides, outcome.status, strict=True):
                    self.status[f"{name}/{writer}"] = now_is
            copies = {ck: c.record(self.read.parsed.get(ck, {})) for ck, c in self.live.items()}
            for stub in self.stubs:
                rec = self.prev_copies.get(stub.key)
                if rec is None:
                    rec = materialize(stub, None, now_ns).record({})
                copies[stub.key] = rec
            state = {
                "copies": copies,
                "status": self.status,
                "topics": topics,
                "archived": told,
                "unseen": self.unseen,
                "pending": pending,
                "tick_ns": time.time_ns(),
            }
            tickstate.save(self.ex.meta, state, self.prev, git, self.git_prev)
        else:
            tickstate.save_git(self.ex.meta, git, self.git_prev)
            if self.nothing_to_keep():
                return
        quick = {stub.key: stub.quick for stub in self.stubs}
        for ck, c in self.live.items():
            q = c.quick()
            if q is not None:
                quick[ck] = q
        quiet = {
            "copies": quick,
            "index": self.index_id,
            "late": self.late,
            "known": {name: self.outcomes.get(name) for name in topics},
            "archived": told,
            "unseen": self.unseen,
            "pending": bool(pending),
        }
        tickstate.save_quiet(self.ex.meta, quiet, self.quiet_prev)
        if self.loaded:  # the state may be new: what the monitor takes goes with it
            self.save_monitor(quick, monitor_prev)

    def nothing_to_keep(self) -> bool:
        """Whether the quiet records would be written as they are: a run that passed over
        every topic, with INDEX.md and the unseen debts as they were, and every copy it listed
        in its rotation slot found as recorded."""
        kept = self.quiet_prev
        if kept is None or (self.index_id, self.late) != (kept.get("index"), kept.get("late")):
            return False
        copies = kept["copies"]
        return all(c.quick() == copies.get(ck) for ck, c in self.live.items())

    def save_monitor(self, quick: dict[str, QuickRecord], prev: MonitorKept | None) -> None:
        """``tick-monitor.json``: every kept topic's directories and the monitor's lines, worked
        out this run or, for a topic passed over, as the last run kept them (``prev``)."""
        sides = self.ex.sides
        kept = MonitorKept({s: {} for s in sides}, {s: {} for s in sides}, {s: {} for s in sides})
        for name in self.known:
            outcome = self.outcomes.get(name)
            if outcome is None:
                continue
            if name in self.monitor:
                lines = self.monitor[name]
            elif prev is not None and any(name in found for found in prev.dirs.values()):
                told = {s: prev.lines.get(s, {}) for s in sides}
                lines = {s: told[s][name] for s in sides if name in told[s]}
            else:
                lines = None  # not kept last run: worked out when it next changes
            copies = outcome.sides.split("/")  # the inbox sides with a copy
            if lines is None or any(f"to-{s}/{name}" not in quick for s in copies):
                continue
            for s in copies:
                q = quick[f"to-{s}/{name}"]
                kept.dirs[s][name] = q.dir_mtime
                if q.state_size >= 0:  # a list, as it reads back: an unchanged file compares equal
                    kept.states[s][name] = [q.state_size, q.state_mtime]
            for s, scopes in lines.items():
                kept.lines[s][name] = scopes
        tickstate.save_monitor(self.ex.meta, kept, prev)


def tick(
    ex: Exchange,
    *,
    notify_urls: list[str] | None = None,
    notifier: Notifier | None = None,
    lock_wait: float = LOCK_WAIT_SECONDS,
) -> TickResult:
    """Run one tick over ``ex``; ``LockBusy`` if another tick holds the lock too long,
    ``Conflict`` on a host that is not the home of a bridged exchange.

    Notification targets: ``notifier`` if given, else ``notify_urls`` if any, else the config's.
    The result lists what happened; ``result.errors`` says what could not be done (the caller
    then fails loudly with ``raise_for_errors``). A heartbeat is written on success.
    """
    mark = bridged(ex.meta)
    if mark is not None and not mark.is_home:
        raise Conflict(f"this exchange is bridged; its tick runs on host {mark.home!r}, not here")
    urls = list(notify_urls) if notify_urls else list(ex.notify)
    if notifier is None and urls:
        notifier = AppriseNotifier(urls)
    result = TickResult()
    started = time.monotonic()
    with _tick_lock(ex.tick_lock, lock_wait):
        with gc_paused():  # ~100,000 objects that all live to the end of the run
            run = _Tick(ex, notifier, result)
            run.run()
            del run  # freed before collection resumes
        if not result.errors:
            beat = {
                "at": format_time(now()),
                "ok": result.notify_error is None,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
                "notify_error": result.notify_error,
                "pid": os.getpid(),
            }
            # Not fsync'd: a crash can only bring back the last beat, which reads as older (the
            # safe side for a liveness signal: readers take its mtime), never a lost message.
            beat_text = json.dumps(beat) + "\n"
            atomic_write(ex.meta / HEARTBEAT, beat_text, mode=0o644, durable=False)
    return result

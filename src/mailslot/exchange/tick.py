"""One tick: diff, guard, hold, archive, index, commit, notify -- under a lock, never silent.

Meant for a timer every two minutes. Each step is from seed 000 and each has bitten a real build:

1. Diff against the last run by presence/size/mtime. A brand-new topic is new activity, never
   silently absorbed into the baseline; a rewritten or shrunken entry is reported loudly.
2. Archive (plain move to ``done/`` on both sides) only on the guard's word (``guard.decide``);
   a half-archived topic is brought to one state: archived if the guard allows, live otherwise.
3. HELD.md in the inbox of the side that owes the re-read; written once and left alone while the
   hold stands (no churn), removed before an archive, recomputed for every live topic every run.
4. INDEX.md with both sides' status, counts, last activity, holds and debts.
5. ``git add -A`` + commit whenever anything is dirty, whatever else happened.
6. One batched notification; a failure is reported and retried next tick, never blocking 2-5.

A tick that cannot do its job (lock held, git failing, a move refused) reports what it did and
then fails with a clear message: a crash must never look like a quiet no-op.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mailslot.core.clock import format_time, now
from mailslot.core.errors import LockBusy, MailslotError
from mailslot.core.fsio import atomic_create, atomic_write, file_lock
from mailslot.exchange.convention import held_text
from mailslot.exchange.gitlog import commit_all, is_repo
from mailslot.exchange.guard import Decision, GuardSide, decide
from mailslot.exchange.index import TopicView, compute_debts, render_index
from mailslot.exchange.layout import DONE, HELD_NAME, STATE_NAME, Exchange
from mailslot.exchange.scan import Parsed, TopicScan, parse_cached, scan_tree
from mailslot.notify import AppriseNotifier, Notifier

__all__ = ["HEARTBEAT", "TICK_STATE", "TickFailed", "TickResult", "tick"]

TICK_STATE = "tick-state.json"
HEARTBEAT = "heartbeat"
# How long a tick waits for a previous one to finish before giving up loudly; a tick takes well
# under a second, so a lock held this long means a stuck run someone must look at.
LOCK_WAIT_SECONDS = 30.0


@dataclass
class TickResult:
    """What one tick did; ``to_json`` is the DESIGN contract (fields added, none renamed)."""

    new_entries: list[str] = field(default_factory=list)
    new_topics: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # holds placed by this tick
    released: list[str] = field(default_factory=list)
    commit: str | None = None
    notified: bool = False
    holding: list[str] = field(default_factory=list)  # every standing hold after this tick
    reopened: list[str] = field(default_factory=list)
    recovered: list[dict[str, str]] = field(default_factory=list)
    state_changes: list[dict[str, str]] = field(default_factory=list)
    rewritten: list[dict[str, Any]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    waiting: list[dict[str, str]] = field(default_factory=list)
    debts: list[dict[str, Any]] = field(default_factory=list)
    notify_error: str | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)

    @property
    def activity(self) -> bool:
        """Whether anything happened that is worth telling someone."""
        return bool(
            self.new_entries
            or self.new_topics
            or self.archived
            or self.held
            or self.released
            or self.reopened
            or self.recovered
            or self.state_changes
            or self.rewritten
            or self.removed
        )

    def raise_for_errors(self) -> None:
        """Raise ``TickFailed`` if the tick could not do all of its job."""
        if self.errors:
            raise TickFailed("; ".join(self.errors))


class TickFailed(MailslotError):
    """The tick ran but could not do all of its job (the message says which part)."""


@contextlib.contextmanager
def _tick_lock(path: Path, wait: float) -> Iterator[None]:
    deadline = time.monotonic() + wait
    while True:
        try:
            with file_lock(path, blocking=False):
                yield
                return
        except LockBusy:
            if time.monotonic() >= deadline:
                raise LockBusy(
                    f"another tick has held the lock for over {wait:g}s; is one stuck?", path=path
                ) from None
            time.sleep(0.05)


def _load_state(path: Path, result: TickResult) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
        if not isinstance(data, dict) or data.get("version") != 1:
            raise ValueError("unknown version")
        return data
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as e:
        # Fail visible: with no baseline everything reads as new, which is loud, not lost.
        result.warnings.append(f"tick state unreadable ({e}); treating everything as new")
        return {}


def _dt(us: int | None) -> datetime | None:
    return datetime.fromtimestamp(us / 1_000_000, UTC) if us is not None else None


class _Tick:
    def __init__(self, ex: Exchange, notifier: Notifier | None, result: TickResult) -> None:
        self.ex = ex
        self.notifier = notifier
        self.r = result
        self.now = now()
        self.state_path = ex.meta / TICK_STATE
        self.prev = _load_state(self.state_path, result)
        self.cache: dict[str, list[Any]] = dict(self.prev.get("cache", {}))
        self.new_cache: dict[str, list[Any]] = {}
        self.lines: list[str] = []

    # -- reading ---------------------------------------------------------------------------
    def key(self, inbox_side: str, topic: str, name: str) -> str:
        return f"to-{inbox_side}/{topic}/{name}"

    def parse(self, scan: TopicScan, inbox_side: str, name: str) -> Parsed | None:
        copy = scan.copies.get(inbox_side)
        if copy is None or name not in copy.files:
            return None
        key = self.key(inbox_side, scan.name, name)
        writer = self.ex.writer_of(inbox_side)
        p = parse_cached(copy.path / name, copy.files[name], writer, self.cache, key)
        self.new_cache[key] = self.cache[key]
        return p

    def guard_sides(self, scan: TopicScan) -> tuple[dict[str, GuardSide], dict[str, Any]]:
        sides: dict[str, GuardSide] = {}
        newest: dict[str, tuple[int, str, str | None]] = {}
        for writer in self.ex.sides:
            inbox_side = self.ex.other(writer)
            st = self.parse(scan, inbox_side, STATE_NAME)
            copy = scan.copies.get(inbox_side)
            top = copy.newest() if copy else None
            ent = self.parse(scan, inbox_side, top[2]) if top else None
            if top is not None and ent is not None:
                newest[writer] = (top[0], top[2], ent.word)
            sides[writer] = GuardSide(
                status=st.word or "unknown" if st else "open",
                updated_at=_dt(st.time_us) if st else None,
                state_error=st.error if st and st.word == "done" else None,
                newest=top[2] if top else None,
                newest_at=_dt(ent.time_us) if ent else None,
            )
        return sides, newest

    # -- moving ----------------------------------------------------------------------------
    def move(self, src: Path, dst: Path) -> bool:
        if dst.exists():
            self.r.errors.append(f"cannot move {src} to {dst}: the target exists")
            return False
        try:
            os.rename(src, dst)
        except OSError as e:
            self.r.errors.append(f"cannot move {src} to {dst}: {e.strerror}")
            return False
        return True

    def drop_held(self, scan: TopicScan) -> None:
        for copy in scan.copies.values():
            if copy.held:
                with contextlib.suppress(FileNotFoundError):
                    (copy.path / HELD_NAME).unlink()
                copy.held = False

    def archive(self, scan: TopicScan) -> bool:
        ex = self.ex
        targets = {s: ex.inbox(s) / DONE / scan.name for s, c in scan.copies.items()}
        for s, c in scan.copies.items():
            if not c.archived and targets[s].exists():
                self.r.errors.append(f"cannot archive {scan.name}: {targets[s]} already exists")
                return False
        if any(c.held for c in scan.copies.values()):
            self.r.released.append(scan.name)
            self.lines.append(f"released hold on {scan.name}")
        self.drop_held(scan)
        ok = True
        for s, c in scan.copies.items():
            if not c.archived:
                ex.make_dir(ex.inbox(s) / DONE, s)
                ok = self.move(c.path, targets[s]) and ok
        return ok

    def unarchive(self, scan: TopicScan) -> None:
        for s, c in scan.copies.items():
            if c.archived:
                live = self.ex.inbox(s) / scan.name
                if self.move(c.path, live):
                    c.path, c.archived = live, False

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> None:
        ex, r = self.ex, self.r
        topics, archived_names = scan_tree(ex)
        prev_files: dict[str, list[int]] = self.prev.get("files", {})
        prev_topics = set(self.prev.get("topics", []))
        prev_archived = set(self.prev.get("archived", []))
        prev_status: dict[str, str] = self.prev.get("status", {})
        prev_tick_ns = int(self.prev.get("tick_ns", 0))
        files: dict[str, list[int]] = {}
        status: dict[str, str] = {}
        views: list[TopicView] = []
        for name in sorted(topics):
            scan = topics[name]
            if scan.conflict:
                r.errors.append(f"topic {name}: {scan.conflict}; settle it by hand")
            sides, newest = self.guard_sides(scan)
            decision = decide(sides, self.now) if not scan.conflict else Decision()
            if scan.half_archived and not scan.conflict:
                if decision.archive:
                    done = self.archive(scan)
                    r.recovered.append({"topic": name, "to": "archived"})
                else:
                    self.unarchive(scan)
                    done = False
                    r.recovered.append({"topic": name, "to": "live"})
                self.lines.append(f"recovered half-archived {name} -> {r.recovered[-1]['to']}")
            elif decision.archive and not scan.conflict:
                done = self.archive(scan)
            else:
                done = False
            # the diff: logical keys, so a move is not traffic
            reopened = name in prev_archived
            for inbox_side, copy in sorted(scan.copies.items()):
                for fname, sig in copy.files.items():
                    k = self.key(inbox_side, name, fname)
                    files[k] = [sig[0], sig[1]]
                    old = prev_files.get(k)
                    is_entry = fname != STATE_NAME
                    if old is None:
                        if is_entry and not (reopened and sig[1] <= prev_tick_ns):
                            r.new_entries.append(k)
                    elif old != [sig[0], sig[1]] and is_entry:
                        r.rewritten.append({"path": k, "was_bytes": old[0], "bytes": sig[0]})
            for writer, gs in sides.items():
                sk = f"{name}/{writer}"
                status[sk] = gs.status
                before = prev_status.get(sk, "open")
                if before != gs.status:
                    r.state_changes.append(
                        {"topic": name, "side": writer, "from": before, "to": gs.status}
                    )
            if name not in prev_topics:
                (r.reopened if reopened else r.new_topics).append(name)
            if done:
                r.archived.append(name)
                archived_names.add(name)
                for k in [k for k in files if k.split("/", 2)[1] == name]:
                    del files[k]
                continue
            views.append(self.hold_and_view(scan, sides, newest, decision))
        for k in prev_files:
            topic = k.split("/", 2)[1]
            gone = k not in files and topic in topics and topic not in r.archived
            if gone and not k.endswith("/" + STATE_NAME):
                r.removed.append(k)
        r.new_entries.sort()
        self.write_index(views)
        self.commit()
        self.notify()
        self.save(files, status, sorted(v.name for v in views), archived_names)

    def hold_and_view(
        self,
        scan: TopicScan,
        sides: dict[str, GuardSide],
        newest: dict[str, tuple[int, str, str | None]],
        decision: Decision,
    ) -> TopicView:
        ex, r, name = self.ex, self.r, scan.name
        for side in ex.sides:
            copy = scan.copies.get(side)  # HELD.md goes into the owing side's inbox
            want = side in decision.holds
            if want and copy is not None and not copy.archived:
                if not copy.held:
                    text = held_text(
                        name, side, ex.other(side), decision.holds[side], decision.reasons[side]
                    )
                    try:
                        atomic_create(copy.path / HELD_NAME, text, mode=ex.file_mode(side))
                        copy.held = True
                        r.held.append(name)
                        self.lines.append(f"HELD {name}: {decision.reasons[side]}")
                    except (OSError, MailslotError) as e:
                        r.errors.append(f"cannot write HELD.md for {name}: {e}")
            elif copy is not None and copy.held and not want:
                try:
                    (copy.path / HELD_NAME).unlink()
                    copy.held = False
                    r.released.append(name)
                    self.lines.append(f"released hold on {name}")
                except FileNotFoundError:
                    copy.held = False
                except OSError as e:
                    r.errors.append(f"cannot remove HELD.md for {name}: {e.strerror}")
            if copy is not None and copy.held:
                r.holding.append(name)
        times = [ent.time_us for ent in self._newest_parsed(scan) if ent.time_us is not None]
        view = TopicView(
            name,
            {s: g.status for s, g in sides.items()},
            {s: len(c.entries) for s, c in ((ex.writer_of(i), c) for i, c in scan.copies.items())},
            _dt(max(times)) if times else None,
            newest,
            {s: decision.holds[s] for s in decision.holds},
            list(decision.waiting),
        )
        for w in decision.waiting:
            r.waiting.append({"topic": name, "reason": w})
        view.debts = compute_debts(ex, view)
        r.debts.extend(d.to_json() for d in view.debts)
        return view

    def _newest_parsed(self, scan: TopicScan) -> list[Parsed]:
        out = []
        for inbox_side, copy in scan.copies.items():
            top = copy.newest()
            if top is not None:
                p = self.parse(scan, inbox_side, top[2])
                if p is not None:
                    out.append(p)
        return out

    def write_index(self, views: list[TopicView]) -> None:
        text = render_index(self.ex, views)
        path = self.ex.root / "INDEX.md"
        try:
            if path.read_text() == text:
                return
        except OSError:
            pass
        atomic_write(path, text, mode=0o644)

    def commit(self) -> None:
        ex, r = self.ex, self.r
        if not ex.git:
            return
        if not is_repo(ex.root):
            r.errors.append("git is enabled in the config but the repository is missing")
            return
        parts = []
        for label, items in (
            ("new", r.new_entries),
            ("archived", r.archived),
            ("held", r.held),
            ("released", r.released),
        ):
            if items:
                parts.append(f"{len(items)} {label}")
        message = "tick: " + (", ".join(parts) if parts else "sync")
        detail = "\n".join(self.lines_for_humans())
        try:
            r.commit = commit_all(ex.root, message + ("\n\n" + detail if detail else ""))
        except MailslotError as e:
            r.errors.append(str(e))

    def lines_for_humans(self) -> list[str]:
        r = self.r
        out = [f"new topic {t}" for t in r.new_topics]
        out += [f"reopened {t}" for t in r.reopened]
        for k in r.new_entries:
            out.append(f"new {k}")
        for c in r.state_changes:
            out.append(f"{c['side']} {c['from']} -> {c['to']} on {c['topic']}")
        for w in r.rewritten:
            out.append(f"WARNING rewritten {w['path']} ({w['was_bytes']} -> {w['bytes']} bytes)")
        out += [f"WARNING removed {k}" for k in r.removed]
        out += [f"archived {t}" for t in r.archived]
        return out + self.lines

    def notify(self) -> None:
        r = self.r
        pending: list[str] = list(self.prev.get("pending", []))
        lines = self.lines_for_humans() if r.activity else []
        if not pending and not lines:
            return
        if self.notifier is None:
            return
        body_lines = [*(f"(earlier) {p}" for p in pending), *lines]
        title = f"mailslot exchange {self.ex.root.name}: {len(r.new_entries)} new"
        if r.archived:
            title += f", {len(r.archived)} archived"
        if r.held:
            title += f", {len(r.held)} held"
        error = self.notifier.send(title, "\n".join(body_lines))
        if error is None:
            r.notified = True
            self.pending = []
        else:
            r.notify_error = error
            self.pending = [*pending, *lines][-500:]  # bounded: the git log keeps the rest

    pending: list[str] | None = None

    def save(
        self,
        files: dict[str, list[int]],
        status: dict[str, str],
        topics: list[str],
        archived: set[str],
    ) -> None:
        pending = self.pending if self.pending is not None else self.prev.get("pending", [])
        if self.notifier is None:
            pending = []
        state = {
            "version": 1,
            "files": files,
            "status": status,
            "topics": topics,
            "archived": sorted(archived),
            "cache": self.new_cache,
            "pending": pending,
            "tick_ns": time.time_ns(),
        }
        unchanged = all(state[k] == self.prev.get(k) for k in state if k != "tick_ns")
        if not unchanged:
            atomic_write(self.state_path, json.dumps(state, separators=(",", ":")), mode=0o600)


def tick(
    ex: Exchange,
    *,
    notify_urls: list[str] | None = None,
    notifier: Notifier | None = None,
    lock_wait: float = LOCK_WAIT_SECONDS,
) -> TickResult:
    """Run one tick over ``ex``; ``LockBusy`` if another tick holds the lock too long.

    Notification targets: ``notifier`` if given, else ``notify_urls`` if any, else the config's.
    The result lists what happened; ``result.errors`` says what could not be done (the caller
    then fails loudly with ``raise_for_errors``). A heartbeat is written on success.
    """
    urls = list(notify_urls) if notify_urls else list(ex.notify)
    if notifier is None and urls:
        notifier = AppriseNotifier(urls)
    result = TickResult()
    started = time.monotonic()
    with _tick_lock(ex.tick_lock, lock_wait):
        run = _Tick(ex, notifier, result)
        run.run()
        if not result.errors:
            beat = {
                "at": format_time(now()),
                "ok": result.notify_error is None,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
                "notify_error": result.notify_error,
                "pid": os.getpid(),
            }
            atomic_write(ex.meta / HEARTBEAT, json.dumps(beat) + "\n", mode=0o644)
    return result

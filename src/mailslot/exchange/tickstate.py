"""What the tick keeps between runs, in ``.mailslot/`` (which no agent writes).

``tick-state.json`` is the last run's view of the tree: per topic copy its record (``scan``'s
``CopyRecord``, so the next scan can skip a directory that cannot have changed, and each file's
cached parse), each side's status per topic, the live and archived topic names, the unseen
entries already told, the notification lines not yet sent, and when it ran. ``tick-git.json`` is
the last git check (``GitCheck``), kept apart because it changes on a quiet tick and the state is
megabytes over 10,000 topics. Each is written only when it changed, atomically; an unreadable
state is a warning and reads as empty (everything is new: loud, never lost).

``tick-quiet.json`` is what a tick needs to pass over a tree in which nothing changed without
reading the megabytes: per copy its ``QuickRecord``, per known live topic its last outcome
(``Outcome``, or none when it must be worked out every run), the archived names, the unseen
entries told, whether notifications are pending, and the identity (inode, size, mtime) of the
``tick-state.json`` it goes with. The records and outcomes are kept as flat columns
(``quick_columns``, ``known_columns``): they parse in a fraction of the time of a small JSON
list each and are checked a column at a time; a column not as the tick wrote it (a damaged or
planted file) makes the whole file unread, so the tick reads the whole state. It is written
after that file, so a tick killed in between leaves one that names another state: it is then
ignored and the tick reads the whole state.

``tick-monitor.json`` is what ``monitor`` may take from the tick (it reads it, never writes it):
for the live topics whose answer hangs only on their files, by name (``MonitorKept``): per inbox
side, each copy's directory mtime and each STATE.md's size and mtime when the tick looked, and per
caller side the monitor's lines then. It goes with a ``tick-state.json`` the same way, and is
rewritten with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from mailslot.core.fsio import atomic_write, read_regular

__all__ = [
    "TICK_GIT",
    "TICK_QUIET",
    "TICK_STATE",
    "TICK_TURN",
    "GitCheck",
    "MonitorKept",
    "Outcome",
    "QuickRecord",
    "identity",
    "known_columns",
    "load_git",
    "load_monitor",
    "load_quiet",
    "load_state",
    "load_turn",
    "quick_columns",
    "save",
    "save_git",
    "save_monitor",
    "save_quiet",
    "save_turn",
]

TICK_STATE = "tick-state.json"
TICK_GIT = "tick-git.json"
TICK_QUIET = "tick-quiet.json"
TICK_MONITOR = "tick-monitor.json"
# The last run's turn of the rotation (``scan.ROTATION``), one integer: counted by runs, not by
# the clock, so ticks on any timer period give every directory its full listing in turn.
TICK_TURN = "tick-turn"
_TURN_MAX = 64
VERSION = 3
MONITOR_VERSION = 4  # tick-monitor.json, a cache: one of another version is not read
QUIET_VERSION = 8  # tick-quiet.json, a cache: one of another version is rebuilt (and with
# it tick-monitor.json, which only a tick that reads the whole state writes)
_GIT_KEYS = ("git_clean", "git_checked_ns", "root")
# The most a kept file may hold: the state over 100,000 entries is tens of MiB.
KEPT_MAX = 512 << 20


class GitCheck(NamedTuple):
    """The last git check: whether the tree was clean, when (ns), and the root's signature then
    (its top-level files and the config: a change there makes git look again)."""

    clean: bool = False
    checked_ns: int = 0
    root: str = ""

    def to_json(self) -> dict[str, Any]:
        """The form ``tick-git.json`` holds."""
        return {"git_clean": self.clean, "git_checked_ns": self.checked_ns, "root": self.root}


class Outcome(NamedTuple):
    """A live topic's outcome that holds while none of its copies changes: which inbox sides
    have a copy (``/``-joined, in order), each side's status (in the exchange's order of sides),
    its INDEX.md row, its debts (each ``[side, reason, entry, detail]`` of an ``index.Debt``).
    On disk in ``known_columns``."""

    sides: str
    status: list[str]
    row: str
    debts: list[list[Any]]


class QuickRecord(NamedTuple):
    """What the tick keeps per copy to pass over it without its ``CopyRecord``: kept only for a
    copy listed settled or passed over unchanged. On disk in ``quick_columns``."""

    dir_mtime: int
    state_size: int  # -1: no STATE.md
    state_mtime: int
    key: str  # scan.quick_key of its listing
    # The directory's ctime when listed (-1: not known), and the names of that listing
    # ("/"-joined, as quick_key sorted them): while the directory's mtime and ctime both hold,
    # it has these names, so its rotation slot lstats them without listing it again.
    dir_ctime: int = -1
    names: str = ""


class MonitorKept(NamedTuple):
    """``tick-monitor.json``, by name: the topics the monitor may take from the tick, as maps
    by side then topic. A topic is in ``dirs`` for each inbox side with a copy, in ``states``
    for each such copy with a STATE.md, and in ``lines`` for each caller side with anything
    awaiting it (``monitor.kept_lines``: ``[any, required]``, the second ``None`` when the
    same)."""

    dirs: dict[str, dict[str, int]]  # inbox side -> topic -> its directory's mtime
    states: dict[str, dict[str, list[int]]]  # inbox side -> topic -> STATE.md [size, mtime]
    lines: dict[str, dict[str, list[Any]]]  # caller side -> topic -> its lines, per scope
    state: list[int] | None = None  # the identity of the tick-state.json it goes with


def identity(path: Path) -> list[int] | None:
    """``[inode, size, mtime_ns]`` of the file at ``path`` (a rewrite, atomic or in place,
    changes it), or ``None``."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _load_kept(meta: Path, name: str, version: int) -> dict[str, Any] | None:
    """The kept file ``name`` if it goes with the ``tick-state.json`` there now, else ``None``
    (missing, unreadable, not a regular file, over ``KEPT_MAX``, another ``version``, or left by
    a tick killed between the two writes)."""
    try:
        data = json.loads(read_regular(meta / name, KEPT_MAX))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != version:
        return None
    if data.get("state") is None or data.get("state") != identity(meta / TICK_STATE):
        return None
    return data


# JSON gives only dict, list, str, int, float, bool and None: ``type(x) is`` tells them apart
# (a bool is not taken for an int) at a fraction of ``isinstance``'s cost, 30,000 records a run.


def _strs(v: Any) -> bool:
    if type(v) is not list:
        return False
    return all(type(x) is str for x in v)


def _str_or_none(v: Any) -> bool:
    return v is None or type(v) is str


def _ints(v: Any, n: int) -> bool:
    if type(v) is not list or len(v) != n:
        return False
    return all(type(x) is int for x in v)


# A record read back is made a named record by ``tuple.__new__`` on the list JSON gave: the
# cheapest named form (no call through the class's ``__new__``), 30,000 records a run.
_as_record = tuple.__new__


def known_columns(known: dict[str, Outcome | None]) -> list[Any]:
    """``known`` (topic -> its ``Outcome``, or ``None``) in the columns ``tick-quiet.json`` keeps
    it in: ``[names, sides, rows, counts, statuses, debts]``; ``sides`` and ``rows`` one per topic
    (``None`` and ``""`` for no outcome), ``counts`` two per topic (its statuses, its debts),
    ``statuses`` every status in a row, ``debts`` every debt's four fields in a row."""
    sides: list[str | None] = []
    rows: list[str] = []
    counts: list[int] = []
    statuses: list[str] = []
    debts: list[str | None] = []
    for outcome in known.values():
        if outcome is None:
            sides.append(None)
            rows.append("")
            counts += (0, 0)
            continue
        sides.append(outcome.sides)
        rows.append(outcome.row)
        counts += (len(outcome.status), len(outcome.debts))
        statuses += outcome.status
        for d in outcome.debts:
            debts += d
    return [list(known), sides, rows, counts, statuses, debts]


_STR = frozenset((str,))
_STR_OR_NONE = frozenset((str, type(None)))


def _known(v: Any) -> dict[str, Outcome | None] | None:
    """The ``Outcome`` (or ``None``) per topic in ``v`` (``known_columns``' form), or ``None`` if
    it is not what the tick wrote in every part (a damaged or planted file): then the tick reads
    the whole state and works every topic out."""
    if type(v) is not list or len(v) != 6 or not all(type(c) is list for c in v):
        return None
    names, sides, rows, counts, statuses, debts = v
    n = len(names)
    if len(sides) != n or len(rows) != n or len(counts) != 2 * n:
        return None
    if not (_all(names, str) and _all(rows, str) and _all(counts, int) and _all(statuses, str)):
        return None
    if not (_STR_OR_NONE.issuperset(map(type, sides + debts))):
        return None
    if not (_all(debts[0::4], str) and _all(debts[1::4], str)):  # each debt's side and reason
        return None
    if min(counts, default=0) < 0 or sum(counts[0::2]) != len(statuses):
        return None
    if 4 * sum(counts[1::2]) != len(debts):
        return None
    out: dict[str, Outcome | None] = {}
    at = of = 0  # where this topic's statuses, then its debts, begin
    for name, side, row, n_status, n_debts in zip(
        names, sides, rows, counts[0::2], counts[1::2], strict=True
    ):
        if side is None:
            out[name] = None
            at, of = at + n_status, of + 4 * n_debts
            continue
        told = [debts[i : i + 4] for i in range(of, of + 4 * n_debts, 4)]
        out[name] = _as_record(Outcome, (side, statuses[at : at + n_status], row, told))
        at, of = at + n_status, of + 4 * n_debts
    return out


def _all(v: list[Any], kind: type) -> bool:
    """Whether every item of ``v`` is of exactly type ``kind`` (in one pass in C)."""
    return not v or set(map(type, v)) == {kind}


def quick_columns(records: dict[str, QuickRecord]) -> list[Any]:
    """``records`` (copy key -> ``QuickRecord``) in the columns ``tick-quiet.json`` keeps them
    in: ``[keys, ints, digests, names]``, ``ints`` four per copy (``dir_mtime``, ``state_size``,
    ``state_mtime``, ``dir_ctime``). Flat lists parse in a fraction of the time of one small
    list per copy, and are checked by type in one pass each."""
    values = records.values()
    ints = [x for q in values for x in (q[0], q[1], q[2], q[4])]
    return [list(records), ints, [q[3] for q in values], [q[5] for q in values]]


def _quick_records(v: Any) -> dict[str, QuickRecord] | None:
    """The ``QuickRecord`` per copy key in ``v`` (``quick_columns``' form), or ``None`` if it is
    not what the tick wrote in every part (a damaged or planted file): then no copy is passed
    over on its word, and the tick reads the whole state."""
    if type(v) is not list or len(v) != 4 or not all(type(c) is list for c in v):
        return None
    keys, ints, digests, names = v
    n = len(keys)
    if len(ints) != 4 * n or len(digests) != n or len(names) != n:
        return None
    if not (_all(keys, str) and _all(ints, int) and _all(digests, str) and _all(names, str)):
        return None
    rows = zip(ints[0::4], ints[1::4], ints[2::4], digests, ints[3::4], names, strict=True)
    return dict(zip(keys, [_as_record(QuickRecord, r) for r in rows], strict=True))


def _line_ok(v: Any) -> bool:
    """Whether ``v`` is one monitor line, ``[kind, entry, action, count, detail]``."""
    return (
        type(v) is list
        and len(v) == 5
        and type(v[0]) is str
        and _str_or_none(v[1])
        and _str_or_none(v[2])
        and type(v[3]) is int
        and _str_or_none(v[4])
    )


def _lines_ok(v: Any) -> bool:
    if type(v) is not list:
        return False
    return all(_line_ok(line) for line in v)


def _scopes_ok(v: Any) -> bool:
    """Whether ``v`` is one topic's lines for one side: ``[any, required or None]``."""
    if type(v) is not list or len(v) != 2 or not _lines_ok(v[0]):
        return False
    return v[1] is None or _lines_ok(v[1])


def _monitor_kept(data: dict[str, Any], side: str | None) -> MonitorKept | None:
    """The ``MonitorKept`` in ``data`` (a ``tick-monitor.json``), without any topic whose
    record is not what the tick wrote (a damaged or planted file): it is then in no map at
    all, so the monitor reads its directories. With ``side``, only that side's lines are looked at
    (the others are not for its caller to read); ``None`` if the file is not of this shape."""
    maps: list[Any] = [data.get(k) for k in ("dirs", "states", "lines")]
    dirs, states, lines = maps
    if not all(type(m) is dict and all(type(v) is dict for v in m.values()) for m in maps):
        return None
    kept = MonitorKept(dirs, states, lines, data["state"])
    bad: set[str] = set()
    for found in kept.dirs.values():
        bad.update(t for t, mtime in found.items() if type(mtime) is not int)
    for inbox, stated in kept.states.items():
        found = kept.dirs.get(inbox, {})
        bad.update(t for t, q in stated.items() if not (_ints(q, 2) and t in found))
    for caller, told in kept.lines.items():
        if side is None or caller == side:
            bad.update(t for t, scopes in told.items() if not _scopes_ok(scopes))
    maps_by_side: list[dict[str, Any]] = [*kept.dirs.values(), *kept.states.values()]
    maps_by_side += kept.lines.values()
    for t in bad:
        for records in maps_by_side:
            records.pop(t, None)
    return kept


def load_quiet(meta: Path) -> dict[str, Any] | None:
    """The last ``tick-quiet.json`` if it goes with the ``tick-state.json`` there now, else
    ``None``. A record that is not what the tick wrote (a damaged or planted file) is dropped,
    so its topic or copy is read again, never trusted."""
    data = _load_kept(meta, TICK_QUIET, QUIET_VERSION)
    if data is None:
        return None
    if not (_strs(data.get("archived")) and _strs(data.get("unseen"))):
        return None
    copies, known = _quick_records(data.get("copies")), _known(data.get("known"))
    if copies is None or known is None:
        return None
    data["copies"], data["known"] = copies, known
    return data


def load_monitor(meta: Path, side: str | None = None) -> MonitorKept | None:
    """``tick-monitor.json`` (``MonitorKept``) if it goes with the ``tick-state.json`` there now,
    else ``None``; a topic whose record is not what the tick wrote is left out of it, so the
    monitor reads its directories. With ``side``, only that side's lines are looked at (the
    others are not for its caller to read)."""
    data = _load_kept(meta, TICK_MONITOR, MONITOR_VERSION)
    return _monitor_kept(data, side) if data is not None else None


def save_monitor(meta: Path, kept: MonitorKept, prev: MonitorKept | None) -> None:
    """Write ``kept`` for the monitor, with the identity of the state it goes with, unless the
    last run's file (``prev``, as ``load_monitor`` read it) already says exactly that."""
    kept = kept._replace(state=identity(meta / TICK_STATE))
    if kept != prev:
        data = {"version": MONITOR_VERSION, **kept._asdict()}
        atomic_write(meta / TICK_MONITOR, json.dumps(data, separators=(",", ":")), mode=0o600)


def save_quiet(meta: Path, quiet: dict[str, Any], prev: dict[str, Any] | None) -> None:
    """Write ``quiet`` (``version`` and the state's identity added) unless it is what the last
    run left."""
    quiet = {"version": QUIET_VERSION, "state": identity(meta / TICK_STATE), **quiet}
    if quiet != prev:
        quiet["copies"] = quick_columns(quiet["copies"])
        quiet["known"] = known_columns(quiet["known"])
        atomic_write(meta / TICK_QUIET, json.dumps(quiet, separators=(",", ":")), mode=0o600)


def save_git(meta: Path, git: GitCheck, git_prev: GitCheck | None) -> None:
    """Write ``git`` unless it is what the last run left."""
    if git != git_prev:
        atomic_write(meta / TICK_GIT, json.dumps(git.to_json()) + "\n", mode=0o600)


def load_turn(meta: Path) -> int | None:
    """The last run's rotation turn, or ``None`` if there is none or it cannot be read."""
    try:
        turn = int(read_regular(meta / TICK_TURN, _TURN_MAX))
    except (ValueError, OSError):
        return None
    return turn if turn >= 0 else None


def save_turn(meta: Path, turn: int) -> None:
    """Keep this run's rotation turn (not fsync'd: a crash only repeats a turn)."""
    atomic_write(meta / TICK_TURN, f"{turn}\n", mode=0o600, durable=False)


def load_state(meta: Path, warnings: list[str]) -> dict[str, Any]:
    """The last run's state (empty if there is none); an unreadable one is appended to
    ``warnings`` and read as empty."""
    try:
        data = json.loads(read_regular(meta / TICK_STATE, KEPT_MAX))
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError("unknown version")
        return data
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as e:
        # Fail visible: with no baseline everything reads as new, which is loud, not lost.
        warnings.append(f"tick state unreadable ({e}); treating everything as new")
        return {}


def load_git(meta: Path, prev: dict[str, Any]) -> GitCheck | None:
    """The last git check; ``None`` (so git is checked now) if it cannot be read.

    Git fields in the tick state come first: only a tick that kept them there, before
    ``tick-git.json`` existed, writes them (an old install still on a timer), so they are the
    newest word.
    """
    data: Any
    if any(k in prev for k in _GIT_KEYS):
        data = {k: prev[k] for k in _GIT_KEYS if k in prev}
    else:
        try:
            data = json.loads(read_regular(meta / TICK_GIT, KEPT_MAX))
        except (ValueError, OSError):
            return None
    if not (
        isinstance(data, dict)
        and isinstance(data.get("git_clean"), bool)
        and isinstance(data.get("git_checked_ns"), int)
        and isinstance(data.get("root"), str)
    ):
        return None
    return GitCheck(data["git_clean"], data["git_checked_ns"], data["root"])


def save(
    meta: Path,
    state: dict[str, Any],
    prev: dict[str, Any],
    git: GitCheck,
    git_prev: GitCheck | None,
) -> None:
    """Write ``state`` (``version`` added) and ``git``, each only if it differs from what the
    last run left (``tick_ns`` aside: a quiet tick rewrites nothing)."""
    state = {"version": VERSION, **state}
    moved = any(k in prev for k in _GIT_KEYS)  # kept in the state by an older tick: move once
    save_git(meta, git, None if moved else git_prev)
    if moved or any(state[k] != prev.get(k) for k in state if k != "tick_ns"):
        atomic_write(meta / TICK_STATE, json.dumps(state, separators=(",", ":")), mode=0o600)

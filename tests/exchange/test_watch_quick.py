"""The common wake read in one pass (``Watcher._quick``): one entry renamed into a listed topic is
delivered, shown and marked exactly as the general path does it, and every other wake -- a
stray, a sender the transport does not back, a head the full parser reads, a file too large for
one read, a topic moved, a full event queue, a seen-set another process wrote -- goes the
general way, with the same result."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from exhelp import GENEROUS
from hypothesis import given, settings
from hypothesis import strategies as st

from mailslot.core.clock import parse_time
from mailslot.core.cursor import CursorStore
from mailslot.core.errors import WaitTimeout
from mailslot.core.record import FrozenRecord
from mailslot.exchange import send
from mailslot.exchange import watch as watch_mod
from mailslot.exchange.entry import Entry
from mailslot.exchange.layout import Exchange
from mailslot.exchange.watch import (
    QUICK_BYTES,
    WATCH_NAMESPACE,
    Delivered,
    Watcher,
    WatchResult,
    mark_all_seen,
)

RAISED = "raised"  # what the spy notes for a one-pass read that raised
TEXT = "---\nfrom: claude\nat: 2026-11-29T18:14:00.5+01:00\naction: required\n---\nhi {n}\n"


def _watcher(ex: Exchange, base: Path, *, general: bool = False, action: str = "any") -> Watcher:
    """olu's watcher over its own seen-mark under ``base``, already past its first round; with
    ``general``, its common wake is never read in one pass; ``quick`` lists what each wake's
    one pass returned (``None``: handed to the general path)."""
    store = CursorStore(WATCH_NAMESPACE, base)
    mark_all_seen(ex, "olu", store=store)
    w = Watcher(ex, "olu", store=store, action=action)
    w.quick = []  # type: ignore[attr-defined]
    real = w._quick

    def spy(change: Any, show: Any, ready: Any) -> WatchResult | None:
        w.quick.append(RAISED)  # type: ignore[attr-defined]
        got = None if general else real(change, show, ready)
        w.quick[-1] = got  # type: ignore[attr-defined]
        return got

    w._quick = spy  # type: ignore[method-assign]
    with pytest.raises(WaitTimeout):  # the first round lists and arms everything
        w.watch(0)
    w.quick.clear()  # type: ignore[attr-defined]
    return w


def _both_wake(
    watchers: list[Watcher],
    land: Callable[[], None],
    *,
    timeout: float = GENEROUS,
    show: Callable[[WatchResult], None] | None = None,
) -> list[WatchResult | BaseException]:
    """Each watcher blocked in ``watch`` in a thread of its own, then ``land`` run."""
    got: list[WatchResult | BaseException] = [RuntimeError("no result")] * len(watchers)
    armed = [threading.Event() for _ in watchers]

    def run(i: int) -> None:
        try:
            got[i] = watchers[i].watch(timeout, on_armed=armed[i].set, show=show)
        except BaseException as e:  # handed to the test
            got[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(watchers))]
    for t in threads:
        t.start()
    for a in armed:
        assert a.wait(GENEROUS)
    land()
    for t in threads:
        t.join(GENEROUS)
    return got


def _pair(ex: Exchange, topic: str, tmp_path: Path, action: str = "any") -> list[Watcher]:
    """A watcher reading the common wake in one pass and one that never does, each past its
    first take (entry 0002: the first take of a watcher goes the general way, making its state
    dir and noting what the inbox holds)."""
    pair = [
        _watcher(ex, tmp_path / "fast", action=action),
        _watcher(ex, tmp_path / "slow", general=True, action=action),
    ]
    d = ex.inbox("olu") / topic
    a, b = _both_wake(pair, _renamed_in(d, "0002-claude.md", TEXT.format(n=2)))
    assert isinstance(a, WatchResult) and isinstance(b, WatchResult) and a == b
    for w in pair:
        w.quick.clear()  # type: ignore[attr-defined]
    return pair


def _renamed_in(directory: Path, name: str, text: str | bytes) -> Callable[[], None]:
    tmp = directory / f".{name}.partial"
    if isinstance(text, str):
        text = text.encode()
    tmp.write_bytes(text)
    return lambda: os.rename(tmp, directory / name)


def _seen_keys(ex: Exchange, base: Path) -> set[str]:
    return set(CursorStore(WATCH_NAMESPACE, base).load_seen(f"olu@{ex.root}").keys)


@pytest.fixture
def topic(ex: Exchange) -> str:
    return send(ex, "claude", "wake", "fyi", "opening").topic


@pytest.mark.parametrize("made", ["filled", "constructed"])
def test_the_common_wake_delivers_and_marks_what_the_general_path_does(
    ex: Exchange, topic: str, tmp_path: Path, made: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if made == "constructed":  # what ``_filler`` cannot fill takes its constructor
        monkeypatch.setattr(watch_mod, "_ENTRY_REST", None)
    else:
        assert watch_mod._ENTRY_REST is not None and watch_mod._DELIVERED_REST is not None
    fast, slow = _pair(ex, topic, tmp_path)
    d = ex.inbox("olu") / topic
    for n in (3, 4, 5):  # each wake after the first one too: the listing it left is right
        land = _renamed_in(d, f"{n:04d}-claude.md", TEXT.format(n=n))
        if n == 5:  # written "after" the round began: also marked as it stands (its size, mtime)
            future = time.time_ns() + 3600 * 10**9
            os.utime(d / f".{n:04d}-claude.md.partial", ns=(future, future))
        a, b = _both_wake([fast, slow], land)
        assert isinstance(a, WatchResult) and isinstance(b, WatchResult)
        assert fast.quick[-1] is not None and slow.quick[-1] is None  # type: ignore[attr-defined]
        assert a == b and repr(a) == repr(b)
        (x,), (y,) = a.items, b.items
        for f in ("kind", "key", "topic", "path", "archived", "entry", "text", "why", "partial"):
            assert getattr(x, f) == getattr(y, f), f
        assert x.entry is not None and y.entry is not None
        for f in x.entry.__match_args__:
            assert getattr(x.entry, f) == getattr(y.entry, f), f
        assert a.to_json(ex.root) == b.to_json(ex.root)
        assert _seen_keys(ex, tmp_path / "fast") == _seen_keys(ex, tmp_path / "slow")
        assert f"{topic}/{n:04d}-claude" in _seen_keys(ex, tmp_path / "fast")
        assert any("@" in k for k in _seen_keys(ex, tmp_path / "fast")) == (n == 5)
    # what it left behind finds nothing more, and a fresh look agrees
    assert fast.pending() == [] and Watcher(ex, "olu", store=fast.store).pending() == []
    with pytest.raises(AttributeError):  # filled or made, still frozen
        x.entry.body = "changed"  # type: ignore[misc]
    fast.close()
    slow.close()


def test_the_common_wake_shows_before_it_marks_and_marks_nothing_shown_in_vain(
    ex: Exchange, topic: str, tmp_path: Path
) -> None:
    w, slow = _pair(ex, topic, tmp_path)
    slow.close()
    d = ex.inbox("olu") / topic
    key = f"{topic}/0003-claude"
    marked_when_shown: list[bool] = []

    def show(r: WatchResult) -> None:
        marked_when_shown.append(key in _seen_keys(ex, tmp_path / "fast"))
        raise BrokenPipeError("the reader went away")

    (got,) = _both_wake([w], _renamed_in(d, "0003-claude.md", TEXT.format(n=3)), show=show)
    assert isinstance(got, BrokenPipeError) and marked_when_shown == [False]
    assert w.quick == [RAISED]  # type: ignore[attr-defined]
    assert key not in _seen_keys(ex, tmp_path / "fast")
    # not marked: the next watch delivers it again, and that one marks it
    shown: list[WatchResult] = []
    again = w.watch(GENEROUS, show=shown.append)
    assert [i.key for i in again.items] == [key] == [i.key for i in shown[0].items]
    assert key in _seen_keys(ex, tmp_path / "fast")
    w.close()


def _two(d: Path, ex: Exchange) -> Callable[[], None]:
    first = _renamed_in(d, "0003-claude.md", TEXT.format(n=3))
    second = _renamed_in(d, "0004-claude.md", TEXT.format(n=4))
    return lambda: (first(), second())  # type: ignore[func-returns-value]


def _moved(d: Path, ex: Exchange) -> Callable[[], None]:
    (ex.inbox("olu") / "done").mkdir(exist_ok=True)
    return lambda: os.rename(d, ex.inbox("olu") / "done" / d.name)


def _made_then_renamed(d: Path, make: Callable[[Path], None]) -> Callable[[], None]:
    make(d / ".0003-claude.md.tmp")
    return lambda: os.rename(d / ".0003-claude.md.tmp", d / "0003-claude.md")


def _entry_as(text: str) -> Callable[[Path, Exchange], Callable[[], None]]:
    return lambda d, ex: _renamed_in(d, "0003-claude.md", text)


ENTRY = TEXT.format(n=3)
# what lands, made ready (a temp written) before the watchers block
CASES: dict[str, Callable[[Path, Exchange], Callable[[], None]]] = {
    "a stray": lambda d, ex: _renamed_in(d, "notes.txt", "not an entry\n"),
    "a sender not on the side": lambda d, ex: _renamed_in(d, "0003-mallory.md", ENTRY),
    "a body claiming someone else": _entry_as(ENTRY.replace("from: claude", "from: olu")),
    "a head the full parser reads": _entry_as(ENTRY.replace("action: required", "action: 'fyi'")),
    "CRLF line ends": _entry_as(ENTRY.replace("\n", "\r\n")),
    "a head that does not parse": _entry_as("---\nfrom: [\n---\nx\n"),
    "a body cut short": _entry_as(ENTRY.rstrip("\n")),
    "a file too large for one read": _entry_as(TEXT.format(n="x" * (QUICK_BYTES + 10))),
    "a FIFO named like an entry": lambda d, ex: _made_then_renamed(d, os.mkfifo),
    "a symlink named like an entry": lambda d, ex: _made_then_renamed(
        d, lambda p: os.symlink("/etc/passwd", p)
    ),
    # not even offered to the one pass: more than one name, or not renamed or closed in
    "a directory named like an entry": lambda d, ex: _made_then_renamed(d, os.mkdir),
    "two entries in one wake": _two,
    "a topic moved to done/": _moved,
    "an entry linked in, not renamed": lambda d, ex: (
        lambda: os.link(d / "0001-claude.md", d / "0009-claude.md")
    ),
}


NOT_OFFERED = {
    "a directory named like an entry",
    "two entries in one wake",
    "a topic moved to done/",
    "an entry linked in, not renamed",
}
# landed before the watchers look: both queued for one round, not a wake on the first
BEFORE = {"two entries in one wake"}


@pytest.mark.parametrize("case", list(CASES))
def test_every_other_wake_goes_the_general_way_with_the_same_result(
    ex: Exchange, topic: str, tmp_path: Path, case: str
) -> None:
    d = ex.inbox("olu") / topic
    fast, slow = _pair(ex, topic, tmp_path)
    land = CASES[case](d, ex)
    if case in BEFORE:
        land()
    a, b = _both_wake([fast, slow], (lambda: None) if case in BEFORE else land, timeout=3.0)
    assert fast.quick == ([] if case in NOT_OFFERED else [None]), case  # type: ignore[attr-defined]
    if isinstance(a, WatchResult) and isinstance(b, WatchResult):
        assert a.items and a == b
        assert a.to_json(ex.root) == b.to_json(ex.root)
    else:  # a topic moved away: nothing to show, both time out
        assert isinstance(a, WaitTimeout) and isinstance(b, WaitTimeout), (a, b)
    assert _seen_keys(ex, tmp_path / "fast") == _seen_keys(ex, tmp_path / "slow")
    fast.close()
    slow.close()


def test_a_full_event_queue_goes_the_general_way(ex: Exchange, topic: str, tmp_path: Path) -> None:
    d = ex.inbox("olu") / topic
    w, slow = _pair(ex, topic, tmp_path)
    slow.close()
    a, b = d / ".a", d / ".b"  # dot names: never strays, yet each event is queued
    a.touch()
    b.touch()
    w._watch.take_changes()  # type: ignore[union-attr]
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    for _ in range(limit // 2 + 10):  # two names in turn: the kernel merges no two of them
        os.utime(a)
        os.utime(b)
    _renamed_in(d, "0003-claude.md", TEXT.format(n=3))()
    got = w.watch(GENEROUS)
    assert not any(w.quick)  # type: ignore[attr-defined]
    assert f"{topic}/0003-claude" in {i.key for i in got.items}
    w.close()


def test_a_seen_set_another_process_wrote_goes_the_general_way(
    ex: Exchange, topic: str, tmp_path: Path
) -> None:
    d = ex.inbox("olu") / topic
    w, slow = _pair(ex, topic, tmp_path)
    slow.close()
    other = Watcher(ex, "olu", store=w.store)
    _renamed_in(d, "0003-claude.md", TEXT.format(n=3))()
    assert [x.key for x in other.take(other.pending())] == [f"{topic}/0003-claude"]
    other.close()
    _renamed_in(d, "0004-claude.md", TEXT.format(n=4))()
    got = w.watch(GENEROUS)
    assert [i.key for i in got.items] == [f"{topic}/0004-claude"]  # 0003 was taken by the other
    assert not any(w.quick)  # type: ignore[attr-defined]
    w.close()


def test_an_entry_out_of_scope_is_not_delivered_either_way(
    ex: Exchange, topic: str, tmp_path: Path
) -> None:
    fast, slow = _pair(ex, topic, tmp_path, action="required")
    d = ex.inbox("olu") / topic
    fyi = TEXT.format(n=3).replace("action: required", "action: fyi")
    results = _both_wake([fast, slow], _renamed_in(d, "0003-claude.md", fyi), timeout=1.0)
    assert all(isinstance(r, WaitTimeout) for r in results)
    assert not any(fast.quick)  # type: ignore[attr-defined]
    fast.close()
    slow.close()


def test_only_a_record_keeping_its_fields_in_a_dict_is_filled_in_place_of_its_constructor() -> None:
    class Plain(FrozenRecord):
        __match_args__ = ("a", "b")

        def __init__(self, a: int, b: str | None = None) -> None:
            self.__dict__.update(a=a, b=b)

    class Slotted(FrozenRecord):
        __match_args__ = ("a", "b")
        __slots__ = ("a", "b")

        def __init__(self, a: int, b: str | None = None) -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", b)

    class Renamed(FrozenRecord):  # a parameter that is not a field
        __match_args__ = ("a", "b")

        def __init__(self, a: int, c: str | None = None) -> None:
            self.__dict__.update(a=a, b=c)

    class Rest(FrozenRecord):  # what it takes beyond its fields
        __match_args__ = ("a", "b")

        def __init__(self, a: int, b: str | None = None, **more: object) -> None:
            self.__dict__.update(a=a, b=b)

    assert watch_mod._filler(Plain, ("a",)) == {"b": None}
    assert watch_mod._filler(Plain, ("b",)) is None  # ``a`` has no default
    assert watch_mod._filler(Plain, ("a", "c")) is None  # no such field
    for cls in (Slotted, Renamed, Rest):
        assert watch_mod._filler(cls, ("a",)) is None, cls


@pytest.mark.parametrize("cls", [Entry, Delivered, WatchResult])
def test_each_record_the_common_wake_fills_is_what_its_init_makes(cls: type) -> None:
    """The common wake fills ``Entry``, ``Delivered`` and ``WatchResult`` as ``_filler`` says;
    each such fill equals the constructor's record, field for field, under a set of values
    unlike any default."""
    given: dict[str, Any] = {
        Entry: {
            "number": 7,
            "sender": "claude",
            "side": "claude",
            "topic": "t",
            "path": Path("/x/0007-claude.md"),
            "at": parse_time("2026-11-29T10:00:00Z"),
            "action": "fyi",
            "body": "b\n",
            "meta": {"from": "claude"},
            "arrived_ns": 5,
        },
        Delivered: {
            "kind": "entry",
            "key": "t/0007-claude",
            "topic": "t",
            "path": Path("/x/0007-claude.md"),
            "archived": False,
            "entry": None,
        },
        WatchResult: {"agent": "olu", "side": "olu", "items": [], "peek": False, "warnings": []},
    }[cls]
    rest = watch_mod._filler(cls, tuple(given))
    assert rest is not None
    filled = object.__new__(cls)
    filled.__dict__.update(rest, **given)
    made = cls(**given)
    assert vars(filled) == vars(made) and filled == made and repr(filled) == repr(made)
    assert set(vars(made)) == set(cls.__match_args__)


def test_a_record_copied_with_changes_is_made_anew_and_refuses_a_name_that_is_no_field() -> None:
    e = Entry(1, "claude", "claude", "t", Path("/x/0001-claude.md"), body="hi\n")
    w = e.replace(warning="w", verified=False)
    assert (w.warning, w.verified, w.body) == ("w", False, "hi\n")
    assert (e.warning, e.verified) == (None, True)  # the original stands
    assert w.meta == {} and w.meta is e.meta  # as dataclasses.replace: the values, not copies
    with pytest.raises(TypeError, match="no field 'nope'"):
        e.replace(nope=1)


SENDERS = ["claude", "will", "a", "yes", "no", "n", "y", "null", "on", "off", "true", "x" * 40]
SENDERS += ["x" * 41, "0claude", "_x", "Claude", "claude.bot", "a@b", "c-d_e"]
TIMES = ["2026-11-29T18:14:00Z", "2026-11-29T18:14:00.5+01:00", "2026-11-29T18:14:00+0100"]
TIMES += ["2026-02-30T18:14:00Z", "2026-11-29T25:14:00Z", "2026-11-29 18:14:00Z", "soon"]


@settings(max_examples=400)
@given(
    sender=st.sampled_from(SENDERS),
    at=st.sampled_from(TIMES),
    action=st.sampled_from(["required", "fyi", "'fyi'", "maybe", "Required"]),
    body=st.sampled_from(["", "hi\n", "---\nrule\n", "a\r\nb\n", "x"]),
    extra=st.sampled_from(["", "tags: x\n", "from: claude\n"]),
)
def test_the_own_head_reads_as_any_plain_head_reads(
    sender: str, at: str, action: str, body: str, extra: str
) -> None:
    """``plain_head``'s one match for the head ``exchange send`` writes gives what the general
    scanner gives, and what the strict parser gives, for every head near that shape."""
    from mailslot.exchange.entries import parse_entry_text
    from mailslot.exchange.inbox import _plain_head, plain_head

    text = f"---\nfrom: {sender}\nat: {at}\naction: {action}\n{extra}---\n{body}"
    got = plain_head(text.encode())
    assert got == (None if "\r" in text else _plain_head(text))
    if got is not None:
        meta, full_body, error = parse_entry_text(text.encode(), Path("0001-x.md"))
        fields, when, act, rest = got
        assert error is None and (fields, act, rest) == (meta, meta["action"], full_body)
        assert when.isoformat() == parse_time(meta["at"]).isoformat()

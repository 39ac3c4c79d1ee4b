"""gc_paused: collection is off inside, back on after, whatever the nesting, exceptions or
threads that overlap (two threads whose pauses interleave must not leave it off for good)."""

from __future__ import annotations

import gc
import threading

import pytest

from mailslot.core.gcpause import gc_paused


def test_off_inside_on_after_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block does not resume it early
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_left_off_when_it_was_off_before() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_threads_leave_it_on() -> None:
    # A enters; B enters; A leaves (B still inside: stays off); B leaves (back on).
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def a() -> None:
        with gc_paused():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with gc_paused():
            b_in.set()
            a_out.wait(5)
            seen["after A left, inside B"] = gc.isenabled()

    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after A left, inside B": False}
    assert gc.isenabled()

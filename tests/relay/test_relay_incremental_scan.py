"""A loop that scans on every wake (``serve``, a held wait) parses each inbox byte once.

``Scanner`` keeps what it parsed and reads only the complete lines appended since; an inbox
that shrank or was replaced is parsed again from byte 0. Whatever happened to the files, it
answers exactly what a fresh ``scan`` answers.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mailslot import relay
from mailslot.relay import mailbox
from mailslot.relay.mailbox import Conversation, Scanner, scan

T0 = 1722868950123


def _conversation(pairs: int, start: int = 1) -> tuple[bytes, bytes]:
    """``pairs`` answered turns, with the kinds of line a scan must report mixed in."""
    worker, manager = [], []
    for n in range(start, start + pairs):
        manager.append(f"- [14:02] (w1) id=C{n:02d} T0={T0 + n} say=question {n}")
        worker.append(f"- [14:02] (manager) id=R{n:02d} T1={T0 + n} say=answer {n}")
        manager.append(f"- [14:02] (w1) ack=R{n:02d} T0={T0 + n} T2={T0 + n + 1}")
        if n % 7 == 0:
            manager.append(f"junk line {n}")
        if n % 11 == 0:
            worker.append(f"- [14:02] (w1) id=R{n:02d} T1={T0} say=forged")
        if n % 13 == 0:
            manager.append(f"- [14:02] (w1) id=C{n // 2:02d} T0={T0} say=a repeated id")
    return ("\n".join(worker) + "\n").encode(), ("\n".join(manager) + "\n").encode()


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def _same(a: Conversation, b: Conversation) -> None:
    assert a == b
    assert list(a.turns) == list(b.turns)  # the order open_turn reads them in
    assert a.to_json() == b.to_json()


def test_a_scanner_answers_what_a_fresh_scan_answers_as_inboxes_change(mb: Path) -> None:
    rel = relay.open_relay(mb)
    w, m = rel.inbox("w1"), rel.inbox("manager")
    worker, manager = _conversation(400)
    _append(w, worker)
    _append(m, manager)
    scanner = Scanner(rel)
    _same(scanner(), scan(rel))
    more_w, more_m = _conversation(300, start=401)
    _append(w, more_w)
    _append(m, more_m + b"- [14:02] (w1) id=C701 T0=1 say=half")  # a line still being written
    _same(scanner(), scan(rel))
    assert scanner.through("manager") == len(manager) + len(more_m)  # the partial line waits
    _append(m, b" a line\n" + b"junk\n" * 150)  # completes it; more junk than is kept
    _same(scanner(), scan(rel))
    assert scanner.through("manager") == m.stat().st_size
    with m.open("r+b") as f:  # shrank (cut by hand): parsed again from 0
        f.truncate(len(manager) // 2)
    _same(scanner(), scan(rel))
    replacement = w.with_name("new.md")  # replaced by a longer file: parsed again from 0
    replacement.write_bytes(worker + more_w + b"- [14:03] (manager) STOP at=5 say=done\n")
    os.replace(replacement, w)
    conv = scanner()
    _same(conv, scan(rel))
    assert conv.stopped is not None


def test_the_offset_is_the_end_of_the_last_complete_line(mb: Path) -> None:
    rel = relay.open_relay(mb)
    m = rel.inbox("manager")
    scanner = Scanner(rel)
    scanner()
    assert scanner.through("manager") == 0
    line = f"- [14:02] (w1) id=C01 T0={T0} say=hi\n".encode()
    _append(m, line[:10])
    scanner()
    assert scanner.through("manager") == 0
    _append(m, line[10:] + b"\n")  # and a blank line
    conv = scanner()
    assert scanner.through("manager") == len(line) + 1 and "C01" in conv.turns
    m.write_bytes(b"")  # emptied in place: the same inode, shorter than the offset
    assert scanner().turns == {} and scanner.through("manager") == 0


def test_serve_over_a_big_inbox_parses_each_byte_once_and_serves_what_scan_finds(
    mb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = relay.open_relay(mb)
    w, m = rel.inbox("w1"), rel.inbox("manager")
    worker, manager = _conversation(3000)
    _append(w, worker)
    _append(m, manager)
    parsed: list[int] = []  # bytes handed to the parser by the serving thread
    first_scan = threading.Event()
    real = mailbox.read_inbox

    def counting(data: bytes, **kw):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "serve":
            parsed.append(len(data))
            if len(parsed) >= 2:
                first_scan.set()
        return real(data, **kw)

    monkeypatch.setattr(mailbox, "read_inbox", counting)
    served: list[object] = []
    thread = threading.Thread(
        target=lambda: served.append(relay.serve(mb, "manager", timeout=60)), name="serve"
    )
    thread.start()
    assert first_scan.wait(60)
    _append(m, f"- [14:02] (w1) id=C3001 T0={T0} say=the new question\n".encode())
    thread.join(60)
    assert not thread.is_alive()
    (turn,) = served
    assert turn == scan(rel).open_turn and turn.id == "C3001"  # type: ignore[union-attr]
    assert sum(parsed) == w.stat().st_size + m.stat().st_size  # each byte parsed once

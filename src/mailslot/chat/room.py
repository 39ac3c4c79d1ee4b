"""Chat operations over one append-only file (seed 002): new, join, say, read, wait, end, check.

Invariants and why:

* History is never edited: every write is one whole block appended under BOTH locks -- the seed's
  ``mkdir FILE.lock`` directory (so hand-run bash agents following seed 002 interleave safely with
  mailslot) and ``flock`` via ``locked_append`` (so mailslot readers, who take the shared flock,
  never see half a block). The mkdir lock is always taken first, so the two cannot deadlock.
* Rules are code, not memory: a write that the protocol forbids (saying after the end, accepting
  your own end request, approving a check you did not open) is checked under the lock against
  the file itself, and refused.
* ``wait`` delivers only OTHER participants' messages after the caller's cursor, and is armed
  before it checks (``wait_until``), so a message written at any moment after the cursor is found.
  The cursor lives in the caller's state dir per (file, name); ``say`` never moves it, so a
  message that lands while the caller composes is never skipped (the seed's ``CUR=$(wc -c)`` after
  writing could skip one).
* Durable before return, visible at once: the block is fsync'd after both locks are released,
  so a waiting reader sees it the moment it is whole and the sender returns only once it is on
  disk.
* A removed chat file ends a wait with ``Gone`` (exit 4); so does waiting on an ended chat.
* A writer killed inside its append leaves nothing a reader takes as a message: ``read_from``
  stops before its fragment and the next ``say`` moves the fragment into ``<file>.torn``, which
  ``status`` reports. A bash writer following the seed (``mkdir`` lock and ``>>``) records no
  intent, so its own torn write is not detected. Every read is bounded (``read_from``): a FIFO or
  a huge file named like a chat is refused, never waited on or read whole.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailslot.chat.format import (
    APPROVED,
    CHECK,
    END_ACCEPT,
    END_REJECT,
    END_REQUEST,
    MARKERS,
    ChatMessage,
    check_utf8,
    parse_messages,
    render_message,
)
from mailslot.chat.identity import NameBook, generate_name
from mailslot.chat.locate import LIST_MAX, list_chats
from mailslot.core.clock import format_time, now
from mailslot.core.cursor import ByteCursor, CursorStore
from mailslot.core.durable import sync_file
from mailslot.core.errors import Conflict, FormatError, Gone, LockBusy, NotFound, WaitTimeout
from mailslot.core.fsio import atomic_create, locked_append, read_from, torn_of
from mailslot.core.limits import check_chars, check_one_line
from mailslot.core.names import validate_agent
from mailslot.core.wait import wait_until

__all__ = [
    "CWD_NOTE",
    "Batch",
    "ChatStatus",
    "Joined",
    "approve",
    "check",
    "compute_status",
    "end",
    "join",
    "new_chat",
    "read",
    "say",
    "status",
    "wait",
]

CWD_NOTE = (
    "NOTE: my working directory may contain unrelated files; do not assume everything there is "
    "relevant."
)
# A lock held longer than this belongs to a writer that died mid-append (a write takes
# microseconds); we refuse visibly instead of breaking someone's lock.
LOCK_WAIT_SECONDS = 30.0
# Seed 002 spins every 0.1 s; we spin faster so mailslot writers queue tightly.
LOCK_SPIN_SECONDS = 0.001
# A topic is one line that names the conversation, not its content.
TOPIC_MAX_CHARS = 200
# A default wait mirrors the seed's 5-minute safety net; exit 3 tells the agent to loop again.
DEFAULT_WAIT_SECONDS = 300.0


@dataclass
class Batch:
    """Messages read from a chat and the byte cursor just past them."""

    messages: list[ChatMessage]
    cursor: int
    ended: bool = False

    def to_json(self) -> dict[str, Any]:
        """``{"messages": [{"from", "time", "body", ...}], "cursor": N, "ended": bool}``."""
        return {
            "messages": [m.to_json() for m in self.messages],
            "cursor": self.cursor,
            "ended": self.ended,
        }


@dataclass
class Joined:
    """The result of ``new_chat``/``join``: the file, the caller's name, what it has seen."""

    path: Path
    name: str
    history: list[ChatMessage]
    cursor: int

    def to_json(self) -> dict[str, Any]:
        """Path, name, cursor and the history as message dicts."""
        return {
            "path": str(self.path),
            "name": self.name,
            "cursor": self.cursor,
            "messages": [m.to_json() for m in self.history],
        }


@dataclass
class ChatStatus:
    """What the file says about the conversation (computed from every block, in order)."""

    topic: str | None = None
    participants: list[str] = field(default_factory=list)
    end_request: dict[str, Any] | None = None
    ended: bool = False
    ended_at: str | None = None
    last_rejection: dict[str, Any] | None = None
    human_checks: list[dict[str, Any]] = field(default_factory=list)
    messages: int = 0
    torn: dict[str, Any] | None = None  # ``<file>.torn``: fragments of appends killed mid-write

    @property
    def human_check(self) -> dict[str, Any] | None:
        """The most recent open human check, or ``None``."""
        return self.human_checks[-1] if self.human_checks else None

    def to_json(self) -> dict[str, Any]:
        """DESIGN's ``participants, end_request, ended, human_check`` plus details."""
        return {
            "participants": self.participants,
            "end_request": self.end_request,
            "ended": self.ended,
            "human_check": self.human_check,
            "human_checks": self.human_checks,
            "ended_at": self.ended_at,
            "last_rejection": self.last_rejection,
            "topic": self.topic,
            "messages": self.messages,
            "torn": self.torn,
        }


def _time(m: ChatMessage) -> str:
    return format_time(m.at) if m.at is not None else m.time_raw


def compute_status(messages: list[ChatMessage]) -> ChatStatus:
    """Fold the messages into a status: participants, the end handshake, open human checks.

    An end request is pending until every participant other than the requester (participants
    are every ``FROM`` seen so far, including later joiners) has accepted -- then the chat has
    ended, for good. With no other participant (a hand-written lone request) it stays pending
    until someone joins and accepts: nobody ends a chat alone. Any reject cancels it. A new
    request replaces a pending one.
    """
    st = ChatStatus(messages=len(messages))
    accepted: list[str] = []
    for m in messages:
        if m.sender not in st.participants:
            st.participants.append(m.sender)
        if st.topic is None and m.body.startswith("TOPIC:"):
            st.topic = m.body.split("\n", 1)[0][len("TOPIC:") :].strip()
        if st.ended:
            continue
        kind = m.kind
        if kind == "end-request":
            st.end_request = {"from": m.sender, "time": _time(m), "reason": m.marker_text}
            accepted = []
        elif kind == "end-accept" and st.end_request is not None:
            if m.sender != st.end_request["from"] and m.sender not in accepted:
                accepted.append(m.sender)
        elif kind == "end-reject" and st.end_request is not None:
            st.last_rejection = {"from": m.sender, "time": _time(m), "reason": m.marker_text}
            st.end_request = None
        elif kind == "human-check":
            st.human_checks.append({"from": m.sender, "time": _time(m), "text": m.marker_text})
        elif kind == "human-approved":
            mine = [c for c in st.human_checks if c["from"] == m.sender]
            if mine:
                st.human_checks.remove(mine[0])
        if st.end_request is not None:
            others = [p for p in st.participants if p != st.end_request["from"]]
            st.end_request["accepted"] = list(accepted)
            st.end_request["waiting_for"] = [p for p in others if p not in accepted]
            if others and not st.end_request["waiting_for"]:  # someone else must accept
                st.ended = True
                st.ended_at = _time(m)
    return st


@contextlib.contextmanager
def _seed_lock(path: Path) -> Iterator[None]:
    """Hold seed 002's ``mkdir FILE.lock`` lock; ``LockBusy`` after ``LOCK_WAIT_SECONDS``."""
    lock = Path(f"{path}.lock")
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            os.mkdir(lock)
            break
        except FileExistsError:
            if time.monotonic() >= deadline:
                raise LockBusy(
                    f"{lock} has been held for {LOCK_WAIT_SECONDS:g}s; if no writer is running, "
                    f"remove it (rmdir {lock})",
                    path=path,
                ) from None
            time.sleep(LOCK_SPIN_SECONDS)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(lock)


def _no_chat(path: Path, why: str = "") -> NotFound:
    """The error for a missing chat file, listing the chats beside it (strict addressing)."""
    chats = list_chats(path.parent)
    shown = ", ".join(chats[:LIST_MAX]) + (" ..." if len(chats) > LIST_MAX else "")
    return NotFound(f"no such chat file{why} (chats there: {shown or 'none'})", path=path)


def _require_chat(data: bytes, path: Path) -> bytes:
    """``data`` if it is a chat (empty, or its first line with text is ``---MSG---``);
    ``FormatError`` otherwise, so a mistyped path (``~/.bashrc``) is never appended to."""
    first = next((ln for ln in data[:4096].splitlines() if ln.strip()), b"")
    if first and first.strip() != b"---MSG---":
        raise FormatError(
            "not a chat file: it does not start with a ---MSG--- block; nothing written",
            path=path,
        )
    return data


def _all(path: Path) -> tuple[list[ChatMessage], int]:
    try:
        data = read_from(path, 0)
    except NotFound:
        raise _no_chat(path) from None
    return parse_messages(_require_chat(data, path))


def _quick_status(data: bytes) -> ChatStatus:
    """The status, skipping the parse when no end request exists (then it cannot have ended).

    Only ``ended`` is meaningful in the skipped case; a say in a long chat stays cheap.
    """
    if END_REQUEST.encode() not in data:
        return ChatStatus()
    return compute_status(parse_messages(data)[0])


def _seen_as_sender(data: bytes, name: str) -> bool:
    """Whether ``name`` is the ``FROM`` of a block in ``data`` (case-insensitive: ``Kiran-1``
    written by hand and ``kiran-1`` would read as one speaker). A byte search first, so a say in
    a long chat stays cheap; the parse confirms (a hand-written body line may read ``FROM: x``)."""
    pattern = rb"(?im)^FROM:[ \t]*" + re.escape(name.encode()) + rb"[ \t]*\r?$"
    if re.search(pattern, data) is None:
        return False
    return any(m.sender.lower() == name.lower() for m in parse_messages(data)[0])


def _write(
    path: Path,
    name: str,
    body: str,
    book: NameBook,
    *,
    rule: Callable[[ChatStatus], None] | None = None,
) -> tuple[int, int]:
    """Append one block under both locks after ``rule(status)`` allows it; (start, end).

    ``name`` must be this caller's (``book.check_speaker``, under the lock, so two callers
    cannot both take a new name); the caller is recorded as its holder once the block is written.
    The block is visible to readers as soon as it is whole; the fsync happens after the locks
    are released and before this returns (a reader never waits for the disk, a sender never
    returns before its message is durable).
    """
    block = render_message(name, now(), body)
    with _seed_lock(path):
        if not path.is_file():
            raise _no_chat(path, " (was it removed?)")
        data = _require_chat(read_from(path, 0), path)
        st = compute_status(parse_messages(data)[0]) if rule else _quick_status(data)
        if st.ended:
            raise Conflict(
                f"the chat ended by mutual agreement at {st.ended_at}; nothing more is written",
                path=path,
            )
        book.check_speaker(path, name, lambda: _seen_as_sender(data, name))
        if rule is not None:
            rule(st)
        start = locked_append(path, block)
        book.claim(path, name)
    sync_file(path)
    return start, start + len(block.encode())


def _chat_path(path: Path | str) -> Path:
    return Path(path).expanduser().absolute()


def _cursor_key(path: Path, name: str) -> str:
    return f"{path}\0{name}"


def new_chat(
    topic: str,
    directory: Path | str | None = None,
    name: str | None = None,
    text: str | None = None,
    *,
    state: Path | None = None,
    cwd: Path | None = None,
) -> Joined:
    """Create ``chat-YYYY-MM-DD-HHMMSS[-N].txt`` with the opening message; never overwrites.

    The stamp is UTC. Two chats made in the same second get ``-2``, ``-3``... Raises
    ``LimitExceeded`` for a bad topic, ``InvalidName``/``Conflict`` for the name.
    """
    topic = topic.strip()
    check_utf8("topic", topic)
    check_chars("topic", topic, 1, TOPIC_MAX_CHARS)
    check_one_line("topic", topic)
    book = NameBook(state)
    who = validate_agent(name, "chat name") if name is not None else generate_name()
    here = (cwd or Path.cwd()).resolve()
    body = f"TOPIC: {topic}\nCWD: {here}\n{CWD_NOTE}"
    if text and text.strip():
        body += "\n" + text.strip("\n")
    when = now()
    block = render_message(who, when, body)
    folder = _chat_path(directory or here)
    stamp = when.strftime("%Y-%m-%d-%H%M%S")
    for n in range(1, 10_000):
        path = folder / (f"chat-{stamp}.txt" if n == 1 else f"chat-{stamp}-{n}.txt")
        try:
            atomic_create(path, block)
            break
        except Conflict:
            continue
    else:  # pragma: no cover - ten thousand chats in one second
        raise Conflict(f"no free chat name for {stamp}", path=folder)
    book.remember(path, who)
    book.claim(path, who)
    messages, end_ = parse_messages(block.encode())
    CursorStore("chat", state).save_bytes(_cursor_key(path, who), ByteCursor.at_end(path))
    return Joined(path, who, messages, end_)


def join(
    path: Path | str,
    name: str | None = None,
    text: str | None = None,
    *,
    state: Path | None = None,
    cwd: Path | None = None,
) -> Joined:
    """Write the joining message (name, CWD, the note), return the history up to it.

    The joiner's cursor is set just past its own message, so ``wait`` next delivers exactly what
    others wrote after it. Raises ``NotFound``, ``Conflict`` (ended chat; a name already held here).
    """
    path = _chat_path(path)
    if not path.is_file():
        raise _no_chat(path)
    book = NameBook(state)
    who = book.pick(path, name)
    here = (cwd or Path.cwd()).resolve()
    body = f"{who} joined.\nCWD: {here}\n{CWD_NOTE}"
    if text and text.strip():
        body += "\n" + text.strip("\n")
    _, end_ = _write(path, who, body, book)
    book.remember(path, who)  # only once the joining message is written
    history, _ = parse_messages(read_from(path, 0)[:end_])
    inode = path.stat().st_ino
    CursorStore("chat", state).save_bytes(_cursor_key(path, who), ByteCursor(end_, inode))
    return Joined(path, who, history, end_)


def _refuse_markers(body: str) -> None:
    first = body.lstrip().split("\n", 1)[0]
    for marker in MARKERS:
        if first.startswith(marker):
            raise FormatError(
                f"a message starting with {marker} is protocol; use `mailslot chat end` or "
                "`chat check`/`chat approve`, which check the rules first",
                field="body",
            )


def say(
    path: Path | str, body: str, name: str | None = None, *, state: Path | None = None
) -> ChatMessage:
    """Append one message. Raises ``NotFound``, ``Conflict`` (ended), ``LimitExceeded``."""
    path = _chat_path(path)
    book = NameBook(state)
    who = book.resolve(path, name)
    _refuse_markers(body)
    start, end_ = _write(path, who, body, book)
    return parse_messages(read_from(path, start)[: end_ - start], start)[0][0]


def read(path: Path | str, since: int = 0) -> Batch:
    """Every complete message from byte ``since`` on (a peek: moves no cursor); ``NotFound``."""
    path = _chat_path(path)
    try:
        data = read_from(path, since)
    except NotFound:
        raise _no_chat(path) from None
    if since == 0:
        _require_chat(data, path)
    messages, cursor = parse_messages(data, since)
    all_messages = messages if since == 0 else _all(path)[0]
    return Batch(messages, cursor, compute_status(all_messages).ended)


def wait(
    path: Path | str,
    name: str | None = None,
    *,
    timeout: float | None = DEFAULT_WAIT_SECONDS,
    cursor: int | None = None,
    state: Path | None = None,
    keep_cursor: Callable[[], bool] | None = None,
) -> Batch:
    """Block until another participant writes after the caller's cursor; return those messages.

    The cursor is the one stored for (file, name), moved past what is returned, unless
    ``cursor`` is given (then nothing is stored). ``keep_cursor`` is asked just before the
    cursor is stored: False leaves it where it was (a caller that gave up on this wait, such as
    an MCP call the host cancelled, must not skip what it was never shown). Raises
    ``Conflict`` when another caller holds ``name`` (its cursor is not ours to move),
    ``WaitTimeout`` (exit 3) after ``timeout`` seconds with nothing new and ``Gone`` (exit 4)
    when the file is removed or the chat has ended.
    """
    path = _chat_path(path)
    book = NameBook(state)
    who = book.resolve(path, name)
    if cursor is None:  # the stored cursor is the name holder's: nobody else may move it
        book.check_speaker(path, who, lambda: False)
    store = CursorStore("chat", state)
    key = _cursor_key(path, who)
    if not path.exists():
        raise Gone("the chat file was removed: the conversation is over", path=path)
    if cursor is None:
        stored = store.load_bytes(key)
        pos = stored.offset if stored.valid_for(path) else 0
    else:
        pos = cursor
    try:
        started_ended = _quick_status(_require_chat(read_from(path, 0), path)).ended
    except NotFound:
        raise Gone("the chat file was removed: the conversation is over", path=path) from None

    def check() -> list[ChatMessage] | None:
        nonlocal pos
        try:
            data = read_from(path, pos)
        except NotFound:
            raise Gone("the chat file was removed: the conversation is over", path=path) from None
        messages, pos = parse_messages(data, pos)
        others = [m for m in messages if m.sender != who]
        if others:
            return others
        ending = started_ended or any(m.kind.startswith("end-") for m in messages)
        if ending and status(path).ended:
            raise Gone("the chat has ended by mutual agreement", path=path)
        return None

    def save() -> None:
        if cursor is None and (keep_cursor is None or keep_cursor()):
            with contextlib.suppress(FileNotFoundError):
                # Not fsync'd: a cursor lost in a crash only re-delivers (the safe direction),
                # and two fsyncs would dominate the wake latency.
                store.save_bytes(key, ByteCursor(pos, path.stat().st_ino), durable=False)

    try:
        found = wait_until(check, [path], timeout, what="message from another participant")
    except Gone:
        raise
    except WaitTimeout as e:
        save()
        e.payload = {"messages": [], "cursor": pos, "ended": False}
        raise
    except BaseException:
        save()
        raise
    save()
    ended = any(m.kind.startswith("end-") for m in found) and status(path).ended
    return Batch(found, pos, ended)


def status(path: Path | str) -> ChatStatus:
    """The conversation's status from the whole file, and its ``.torn`` file if one exists;
    ``NotFound`` if it is missing."""
    path = _chat_path(path)
    st = compute_status(_all(path)[0])
    torn = torn_of(path)
    st.torn = torn.to_json() if torn is not None else None
    return st


def end(
    path: Path | str,
    action: str,
    reason: str | None = None,
    name: str | None = None,
    *,
    state: Path | None = None,
) -> ChatStatus:
    """Write ``request``/``accept``/``reject`` of the end handshake; return the new status.

    Refused (``Conflict``) when it cannot count: a request with no other participant to accept
    it, a second request while one is pending, an accept or reject with none pending, accepting
    your own request, accepting twice. ``FormatError`` for an unknown action.
    """
    path = _chat_path(path)
    book = NameBook(state)
    who = book.resolve(path, name)
    marker = {"request": END_REQUEST, "accept": END_ACCEPT, "reject": END_REJECT}.get(action)
    if marker is None:
        raise FormatError(f"unknown end action {action!r}: request, accept or reject")
    reason = (reason or "").strip()
    if reason:
        check_one_line("end reason", reason)

    def rule(st: ChatStatus) -> None:
        req = st.end_request
        if action == "request" and req is not None:
            raise Conflict(f"an end request by {req['from']} is pending; accept or reject it")
        if action == "request" and not [p for p in st.participants if p != who]:
            raise Conflict(
                "no other participant has joined, so nobody could accept an end request; wait "
                "for someone to join, or remove the chat file to end it (the human's override)"
            )
        if action != "request" and req is None:
            raise Conflict("no end request is pending")
        if action == "accept" and req is not None:
            if req["from"] == who:
                raise Conflict("this is your own end request; the others must accept it")
            if who in req["accepted"]:
                raise Conflict("you already accepted this end request")

    _write(path, who, f"{marker} {reason}".rstrip(), book, rule=rule)
    return status(path)


def check(
    path: Path | str, text: str, name: str | None = None, *, state: Path | None = None
) -> ChatStatus:
    """Open a human check (``---HUMAN-CHECK---`` + the decision); others hold until approved."""
    path = _chat_path(path)
    book = NameBook(state)
    who = book.resolve(path, name)
    check_chars("human check", text.strip(), 1, 1 << 16)
    _write(path, who, f"{CHECK}\n{text.strip()}", book)
    return status(path)


def approve(
    path: Path | str, text: str, name: str | None = None, *, state: Path | None = None
) -> ChatStatus:
    """Write your human's decision (``---HUMAN-APPROVED---``), closing your open check.

    Raises ``Conflict`` when the caller has no open check (only the agent that asked its human
    may write the human's answer).
    """
    path = _chat_path(path)
    book = NameBook(state)
    who = book.resolve(path, name)
    check_chars("human decision", text.strip(), 1, 1 << 16)

    def rule(st: ChatStatus) -> None:
        if not any(c["from"] == who for c in st.human_checks):
            raise Conflict(f"{who} has no open human check to approve (open one with `chat check`)")

    _write(path, who, f"{APPROVED}\n{text.strip()}", book, rule=rule)
    return status(path)

"""Chat operations over one append-only file: new, join, say, read, end, leave (``wait`` is in
``waiter``).

Invariants and why:

* History is never edited: every write is one whole block appended under BOTH locks -- the
  ``mkdir FILE.lock`` directory that hand-run bash agents take (so they interleave safely with
  mailslot) and ``flock`` via ``locked_append`` (so mailslot readers, who take the shared flock,
  never see half a block). The mkdir lock is always taken first, so the two cannot deadlock.
* Rules are code, not memory: a write that the protocol forbids (saying after the end, accepting
  your own end request, approving a check you did not open, marking someone gone too soon) is
  checked under the lock against the file itself, and refused.
* A command that fails has written nothing: state that can fail (the joiner's remembered name
  and cursor, in the state dir) is stored before the block is appended, and taken back if the
  append fails; a new chat whose state cannot be stored is removed again.
* A chat is its file's real path (``ChatRef``), and a name given with ``--as`` acts as that
  speaker from anywhere (see ``identity``).
* ``wait`` (in ``waiter``) delivers only OTHER participants' messages after the caller's cursor,
  and moves the cursor past them only once they were shown. The cursor lives in the caller's
  state dir per (file, name); ``say`` never moves it, so a message that lands while the caller
  composes is never skipped (a hand-run loop's ``CUR=$(wc -c)`` after writing could skip one).
* Durable before return, visible at once: the block is fsync'd after both locks are released,
  so a waiting reader sees it the moment it is whole and the sender returns only once it is on
  disk.
* A writer killed inside its append leaves nothing a reader takes as a message: ``read_from``
  stops before its fragment and the next ``say`` (or a reader who may write the file) moves the
  fragment, and only it, into ``<file>.torn``, which ``status`` reports; blocks bash writers
  appended after it stay in the chat. A writer that finds the ``mkdir`` lock held settles
  first, so a dead writer's fragment is out before its stale lock is broken (a mailslot
  writer's, proven dead by its owner record) or removed (a bash writer's) and a waiting bash
  writer appends. A hand-run bash writer (``mkdir`` lock and ``>>``) records no
  intent, so its own torn write is not detected. Every read is bounded (``read_from``): a FIFO or
  a huge file named like a chat is refused, never waited on or read whole.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mailslot.chat.format import (
    APPROVED,
    CHECK,
    END_ACCEPT,
    END_REJECT,
    END_REQUEST,
    GONE,
    LEAVE,
    MARKERS,
    ChatMessage,
    check_utf8,
    parse_messages,
    render_message,
)
from mailslot.chat.identity import ChatRef, NameBook, generate_name
from mailslot.chat.locate import LIST_MAX, list_chats
from mailslot.chat.status import HUMAN_PREFIX, ChatStatus, compute_status
from mailslot.core.clock import FUTURE_SKEW, now
from mailslot.core.durable import sync_appended
from mailslot.core.errors import (
    Conflict,
    FormatError,
    NoSpace,
    NotFound,
    Unresolved,
)
from mailslot.core.fsio import (
    atomic_create,
    locked_append,
    read_from,
    settle_appends,
    torn_of,
)
from mailslot.core.limits import check_chars, check_one_line
from mailslot.core.lockwait import mkdir_lock
from mailslot.core.names import validate_agent
from mailslot.core.record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from mailslot.core.cursor import ByteCursor, CursorStore

__all__ = [
    "CURSOR_MAX",
    "CWD_NOTE",
    "FORGET_REMOVED_AFTER_SECONDS",
    "GONE_AFTER_SECONDS",
    "HUMAN",
    "Batch",
    "ChatStatus",
    "Joined",
    "approve",
    "check",
    "compute_status",
    "end",
    "forget_removed",
    "human_answer",
    "human_say",
    "join",
    "leave",
    "mark_gone",
    "new_chat",
    "read",
    "say",
    "status",
]

CWD_NOTE = (
    "NOTE: my working directory may contain unrelated files; do not assume everything there is "
    "relevant."
)
# A lock held longer than this belongs to a writer that died mid-append (a write takes
# microseconds); a mailslot writer's lock whose owner record proves it dead is broken at once,
# any other (a bash writer's) is refused visibly, never broken.
LOCK_WAIT_SECONDS = 30.0
# Hand-run bash writers spin every 0.1 s; we spin faster so mailslot writers queue tightly.
LOCK_SPIN_SECONDS = 0.001
# A topic is one line that names the conversation, not its content.
TOPIC_MAX_CHARS = 200
# A default wait mirrors a hand-run agent's 5-minute safety net; exit 3 says: loop again.
DEFAULT_WAIT_SECONDS = 300.0
# A byte cursor past any real file: the largest integer JSON carries exactly (2^53 - 1, far
# below off_t's 2^63), so every face can pass one through without rounding or overflow.
CURSOR_MAX = 2**53 - 1
# A participant may mark another gone after this long without a block from them: twelve of the
# hand-run agents' 5-minute safety-net wakings. A live agent answers well within it; one waiting on
# its human may not, so the mark is visible, states the silence, and their next message undoes it.
GONE_AFTER_SECONDS = 3600.0
# State of a removed chat (a cursor, a remembered name) is kept this long after it was last
# written or a sweep last found its chat: a reader back within it is told the chat is gone (exit
# 4), not that it never was one (exit 1); past it the state goes, so the state dir does not grow
# with every chat ever joined.
FORGET_REMOVED_AFTER_SECONDS = 7 * 86400.0
# The name a human's ``gone --human`` mark is written under when no ``--as`` is given; a name
# whose only blocks are gone marks is not a participant, so nobody waits for it.
HUMAN = "human"


class Batch(Record):
    """Messages read from a chat and the byte cursor just past them; ``warnings`` says what the
    reader could not read or store of its own state (a cursor), never what it was given.

    A ``core.record`` record, not a dataclass: every ``chat say`` loads this module."""

    __match_args__ = ("messages", "cursor", "ended", "warnings")
    __slots__ = ("cursor", "ended", "messages", "warnings")
    messages: list[ChatMessage]
    cursor: int
    ended: bool
    warnings: list[str]

    def __init__(
        self,
        messages: list[ChatMessage],
        cursor: int,
        ended: bool = False,
        warnings: list[str] | None = None,
    ) -> None:
        self.messages = messages
        self.cursor = cursor
        self.ended = ended
        self.warnings = [] if warnings is None else warnings

    def to_json(self) -> dict[str, Any]:
        """``{"messages": [{"from", "time", "body", ...}], "cursor": N, "ended": bool}``, and
        ``"warnings"`` when there are any."""
        out: dict[str, Any] = {
            "messages": [m.to_json() for m in self.messages],
            "cursor": self.cursor,
            "ended": self.ended,
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


class Joined(Record):
    """The result of ``new_chat``/``join``: the file, the caller's name, what it has seen.

    A ``core.record`` record, not a dataclass: every ``chat say`` loads this module."""

    __match_args__ = ("path", "name", "history", "cursor")
    __slots__ = ("cursor", "history", "name", "path")
    path: Path
    name: str
    history: list[ChatMessage]
    cursor: int

    def __init__(self, path: Path, name: str, history: list[ChatMessage], cursor: int) -> None:
        self.path = path
        self.name = name
        self.history = history
        self.cursor = cursor

    @property
    def topic(self) -> str | None:
        """The chat's topic (the opening message's ``TOPIC:`` line), or ``None``."""
        return compute_status(self.history[:1]).topic

    def to_json(self) -> dict[str, Any]:
        """Path, name, topic, cursor and the history as message dicts."""
        return {
            "path": str(self.path),
            "name": self.name,
            "topic": self.topic,
            "cursor": self.cursor,
            "messages": [m.to_json() for m in self.history],
        }


@contextlib.contextmanager
def _mkdir_lock(path: Path) -> Iterator[None]:
    """Hold the ``mkdir FILE.lock`` lock that hand-run bash agents take; ``LockBusy`` after
    ``LOCK_WAIT_SECONDS``."""

    def settle() -> None:
        # The holder may be a mailslot writer killed mid-append: its fragment is cut out now,
        # while the lock still keeps bash writers out -- once someone removes the lock, a
        # waiting bash writer appends at once, after the fragment.
        with contextlib.suppress(OSError):  # the append itself repairs again
            settle_appends(path)

    with mkdir_lock(
        Path(f"{path}.lock"),
        LOCK_WAIT_SECONDS,
        interval=LOCK_SPIN_SECONDS,
        on_first_miss=settle,
        busy_path=path,
    ):
        yield


def _no_chat(path: Path, why: str = "") -> NotFound:
    """The error for a missing chat file, listing the chats beside it (strict addressing)."""
    chats = list_chats(path.parent)
    shown = ", ".join(chats[:LIST_MAX]) + (" ..." if len(chats) > LIST_MAX else "")
    return NotFound(f"no such chat file{why} (chats there: {shown or 'none'})", path=path)


def _require_file(path: Path, why: str = "") -> None:
    """Nothing if ``path`` is a regular file; else ``NotFound`` when nothing is there, or
    ``FormatError`` saying what is there instead (a FIFO, a directory...)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise _no_chat(path, why) from None
    if stat.S_ISREG(mode):
        return
    kind = "not a regular file"
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            kind = name
    raise FormatError(f"not a chat file: it is {kind}; nothing written", path=path)


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


def _write(
    path: Path,
    name: str,
    body: str,
    *,
    rule: Callable[[ChatStatus], None] | None = None,
    compose: Callable[[], str] | None = None,
    prepare: Callable[[int], Callable[[], None]] | None = None,
) -> tuple[int, int]:
    """Append one block under both locks after ``rule(status)`` allows it; (start, end).

    ``compose()``, when given, makes the body once the rule has passed (a body that states what
    the rule found, such as a silence).
    ``prepare(start)`` runs under the lock once the rules pass and before the append, to store
    what must exist if the block does (a joiner's name and cursor); it returns an undo that runs
    if the append then fails. A ``NoSpace``/``OSError`` from it (a full state dir) leaves the file
    untouched.
    The block is visible to readers as soon as it is whole; the fsync happens after the locks
    are released and before this returns (a reader never waits for the disk, a sender never
    returns before its message is durable).
    """
    block = render_message(name, now(), body) if compose is None else ""
    _require_file(path)
    with _mkdir_lock(path):
        _require_file(path, " (was it removed?)")
        data = _require_chat(read_from(path, 0), path)
        st = compute_status(parse_messages(data)[0]) if rule else _quick_status(data)
        if st.ended:
            raise Conflict(
                f"the chat ended by mutual agreement at {st.ended_at}; nothing more is written",
                path=path,
            )
        if rule is not None:
            rule(st)
        if compose is not None:
            block = render_message(name, now(), compose())
        undo = _prepared(prepare, len(data)) if prepare is not None else None
        try:
            start = locked_append(path, block)
        except BaseException as e:
            if undo is not None:
                undo()
            if isinstance(e, NoSpace):
                raise NoSpace(
                    "no space left on the disk to append the message to this chat; nothing "
                    "was written",
                    path=path,
                ) from None
            raise
    sync_appended(path, "message")
    return start, start + len(block.encode())


def append_verbatim(path: Path | str, block: bytes) -> tuple[int, int]:
    """Append ``block``, a whole message written elsewhere (a bridge carrying another host's
    copy of this chat), under both locks like any message; ``(start, end)``. Creates the file
    when missing. ``FormatError`` when ``block`` is not exactly one whole message or the file
    is no chat. No rule is applied: the message was already said where it was written.
    """
    path = Path(path)
    messages, consumed = parse_messages(block)
    if len(messages) != 1 or consumed != len(block) or messages[0].offset != 0:
        raise FormatError("not exactly one whole chat message", path=path)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
    with _mkdir_lock(path):
        data = _require_chat(read_from(path, 0), path)
        if data and not data.endswith(b"\n"):
            raise FormatError("the chat does not end at a message boundary yet", path=path)
        start = locked_append(path, block)
    sync_appended(path, "message")
    return start, start + len(block)


def _state_failed(e: OSError | NoSpace, outcome: str) -> OSError | NoSpace:
    """``e`` (a state-dir write that failed) restated with what became of the chat."""
    if isinstance(e, NoSpace):
        return NoSpace(f"{e.message} (in the state dir); {outcome}", path=e.path)
    return OSError(e.errno, f"{e.strerror} (in the state dir); {outcome}", e.filename)


def _prepared(prepare: Callable[[int], Callable[[], None]], start: int) -> Callable[[], None]:
    try:
        return prepare(start)
    except (OSError, NoSpace) as e:
        raise _state_failed(e, "nothing was written to the chat") from e


def _cursor_key(path: Path, name: str) -> str:
    return f"{path}\0{name}"


def _chat_is_there(key: str) -> bool:
    """Whether the chat a state key (``<real path>\0<name or session>``) names may still exist:
    only a file found missing is not (anything that cannot be told keeps its state)."""
    chat, sep, _ = key.partition("\0")
    if not sep or not os.path.isabs(chat):
        return True  # not a chat's key
    try:
        os.lstat(chat)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def forget_removed(state: Path | None = None) -> list[Path]:
    """Remove the cursors and remembered names of chats whose file is gone, once nothing wrote
    them and no sweep found their chat for ``FORGET_REMOVED_AFTER_SECONDS`` (the state of a
    chat that exists is read once in that time, not by every sweep: ``CursorStore.sweep``);
    the files removed. Run by ``new_chat`` and ``join``, which add state of their own; never
    fails them (a sweep that cannot list or remove leaves the files for the next)."""
    from mailslot.core.cursor import CursorStore  # here: a say needs no cursor

    removed: list[Path] = []
    for namespace in ("chat", "chat-names"):
        with contextlib.suppress(OSError):
            removed += CursorStore(namespace, state).sweep(
                _chat_is_there, FORGET_REMOVED_AFTER_SECONDS
            )
    return removed


def _load_cursor(store: CursorStore, chat: ChatRef, name: str) -> ByteCursor | None:
    """The cursor stored for ``name`` in ``chat`` under its real path, else its spelling."""
    from mailslot.core.cursor import ByteCursor

    for path in chat.keys:
        key = _cursor_key(path, name)
        value = store.load(key)
        if value is not None:
            return ByteCursor.from_value(value, store.path_for(key))
    return None


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
    ``LimitExceeded`` for a bad topic, ``InvalidName``/``Conflict`` for the name,
    ``NoSpace``/``OSError`` when the state dir cannot hold the name (the new file is removed).
    """
    from mailslot.core.cursor import ByteCursor, CursorStore  # here: a say needs no cursor

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
    folder = ChatRef.of(directory or here).path
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
    ref = ChatRef.of(path)
    try:
        book.remember(ref, who)
        cursor = ByteCursor.at_end(path)
        CursorStore("chat", state).save_bytes(_cursor_key(ref.path, who), cursor)
    except (OSError, NoSpace) as e:
        # Nobody has the path yet (it is printed on success), so taking the file back is safe.
        outcome = "no chat was created"
        try:
            path.unlink()
        except OSError:
            outcome = f"the chat file {path} was created but could not be removed"
        raise _state_failed(e, outcome) from e
    forget_removed(state)
    messages, end_ = parse_messages(block.encode())
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

    The joiner's name and cursor are stored before the message is appended (so a full state dir
    fails the join with nothing written), and the cursor ends just past the joining message, so
    ``wait`` next delivers exactly what others wrote after it. Raises ``NotFound``, ``Conflict``
    (ended chat; a name that already speaks here; a session that already speaks, without
    ``--as``), ``NoSpace``/``OSError`` (the state dir).
    """
    from mailslot.core.cursor import ByteCursor, CursorStore  # here: a say needs no cursor

    ref = ChatRef.of(path)
    path = ref.path
    _require_file(path)
    book = NameBook(state)
    store = CursorStore("chat", state)
    try:
        speaking = {p.lower() for p in compute_status(_all(path)[0]).present}
    except FormatError:
        speaking = set()  # not a chat: the write below refuses it with the reason
    who = book.pick(ref, name, speaking)
    here = (cwd or Path.cwd()).resolve()
    body = f"{who} joined.\nCWD: {here}\n{CWD_NOTE}"
    if text and text.strip():
        body += "\n" + text.strip("\n")
    key = _cursor_key(path, who)

    def rule(st: ChatStatus) -> None:
        taken = st.find(who)
        if taken is not None and taken in st.present:
            raise Conflict(
                f"{taken!r} already speaks in this chat, so {who!r} cannot join as a new "
                f"speaker. To act as {taken}, pass --as {taken} to say/wait/end (no join "
                "needed, from any directory); to join as someone else, pick another name with "
                "--as NEW-NAME",
                path=path,
            )

    def prepare(start: int) -> Callable[[], None]:
        before = store.load(key)
        remembered = False

        def undo() -> None:
            with contextlib.suppress(OSError, NoSpace):
                if remembered:
                    book.forget(ref)
                if before is None:
                    store.forget(key)
                else:
                    store.save(key, before)

        try:
            store.save_bytes(key, ByteCursor(start, path.stat().st_ino))
            remembered = book.remember(ref, who)
        except BaseException:
            undo()  # a state dir that filled up between the two leaves neither behind
            raise
        return undo

    _, end_ = _write(path, who, body, rule=rule, prepare=prepare)
    with contextlib.suppress(OSError, NoSpace):  # at ``start`` already; past our block is nicer
        store.save_bytes(key, ByteCursor(end_, path.stat().st_ino))
    forget_removed(state)
    history, _ = parse_messages(read_from(path, 0)[:end_])
    return Joined(path, who, history, end_)


def _refuse_markers(body: str) -> None:
    first = body.lstrip().split("\n", 1)[0]
    for marker in MARKERS:
        if first.startswith(marker):
            raise FormatError(
                f"a message starting with {marker} is protocol; use `mailslot chat end`, "
                "`chat leave`, `chat gone` or `chat check`/`chat approve`, which check the rules "
                "first",
                field="body",
            )


def _check_cursor(value: int, what: str, path: Path) -> int:
    """``value`` if it is a byte cursor within ``path``; ``FormatError`` naming ``what``
    otherwise (a file only grows, so a cursor past its end was never one of its cursors)."""
    if not 0 <= value <= CURSOR_MAX:
        raise FormatError(f"a byte cursor is 0 to {CURSOR_MAX}, got {value}", field=what)
    with contextlib.suppress(FileNotFoundError):  # a missing file is reported by the caller
        size = path.stat().st_size
        if value > size:
            raise FormatError(
                f"cursor {value} is past the end of the chat ({size} bytes)", field=what, path=path
            )
    return value


def say(
    path: Path | str, body: str, name: str | None = None, *, state: Path | None = None
) -> ChatMessage:
    """Append one message. Raises ``NotFound``, ``Conflict`` (ended), ``LimitExceeded``."""
    ref = ChatRef.of(path)
    who = NameBook(state).resolve(ref, name)
    _refuse_markers(body)
    start, end_ = _write(ref.path, who, body)
    return parse_messages(read_from(ref.path, start)[: end_ - start], start)[0][0]


def read(path: Path | str, since: int = 0) -> Batch:
    """Every complete message from byte ``since`` on (a peek: moves no cursor); ``NotFound``,
    ``FormatError`` for a cursor outside 0..``CURSOR_MAX``."""
    path = ChatRef.of(path).path
    since = _check_cursor(since, "since", path)
    try:
        data = read_from(path, since)
    except NotFound:
        raise _no_chat(path) from None
    if since == 0:
        _require_chat(data, path)
    messages, cursor = parse_messages(data, since)
    all_messages = messages if since == 0 else _all(path)[0]
    return Batch(messages, cursor, compute_status(all_messages).ended)


def status(path: Path | str) -> ChatStatus:
    """The conversation's status from the whole file, and its ``.torn`` file if one exists;
    ``NotFound`` if it is missing."""
    path = ChatRef.of(path).path
    st = compute_status(_all(path)[0])
    torn = torn_of(path)
    st.torn = torn.to_json() if torn is not None else None
    return st


def _others_present(st: ChatStatus, who: str) -> list[str]:
    return [p for p in st.present if p != who]


def end(
    path: Path | str,
    action: str,
    reason: str | None = None,
    name: str | None = None,
    *,
    state: Path | None = None,
) -> ChatStatus:
    """Write ``request``/``accept``/``reject`` of the end handshake; return the new status.

    Refused (``Conflict``) when it cannot count: a request with no other present participant to
    accept it, a second request while one is pending, an accept or reject with none pending,
    accepting your own request, accepting twice. ``FormatError`` for an unknown action.
    """
    ref = ChatRef.of(path)
    who = NameBook(state).resolve(ref, name)
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
        if action == "request" and not _others_present(st, who):
            raise Conflict(
                "no other participant is here (none joined, or all left or are gone), so nobody "
                "could accept an end request; wait for someone to join, leave with `chat leave`, "
                "or remove the chat file to end it (the human's override)"
            )
        if action != "request" and req is None:
            raise Conflict("no end request is pending")
        if action == "accept" and req is not None:
            if req["from"] == who:
                raise Conflict("this is your own end request; the others must accept it")
            if who in req["accepted"]:
                raise Conflict("you already accepted this end request")

    _write(ref.path, who, f"{marker} {reason}".rstrip(), rule=rule)
    return status(ref.path)


def leave(
    path: Path | str,
    reason: str | None = None,
    name: str | None = None,
    *,
    state: Path | None = None,
) -> ChatStatus:
    """Write ``---LEAVE---``: the end handshake stops waiting for the caller (a later message
    from it brings it back). ``Conflict`` for a name that is not in the chat or already left."""
    ref = ChatRef.of(path)
    who = NameBook(state).resolve(ref, name)
    reason = (reason or "").strip()
    if reason:
        check_one_line("leave reason", reason)

    def rule(st: ChatStatus) -> None:
        if st.find(who) is None:
            raise Conflict(f"{who!r} is not in this chat, so it cannot leave it")
        if who in st.left:
            raise Conflict(f"{who!r} already left this chat at {st.left[who]['time']}")

    body = (
        f"{LEAVE} {reason}".rstrip() + f"\n{who} has left the chat; the end handshake no longer "
        f"waits for {who}. A new message from {who} brings them back."
    )
    _write(ref.path, who, body, rule=rule)
    return status(ref.path)


def _silence(seconds: float) -> str:
    """``2h 05m``, ``12m``, ``40s``: a silence as people say it."""
    whole = int(seconds)
    if whole >= 3600:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 60}m" if whole >= 60 else f"{whole}s"


def mark_gone(
    path: Path | str,
    target: str,
    reason: str | None = None,
    name: str | None = None,
    *,
    silence: float = GONE_AFTER_SECONDS,
    human: bool = False,
    state: Path | None = None,
) -> ChatStatus:
    """Write ``---GONE--- TARGET``: the end handshake stops waiting for a participant that went
    silent (crashed, or left without saying so). A later message from it brings it back.

    A participant may mark another once ``silence`` seconds have passed since the target's last
    block (the mark states how long); the human (``human=True``, written as ``name`` or
    ``human``) may mark at any time. Refused: ``Conflict`` for an unknown, departed or too
    recently heard target, for yourself (use ``leave``), or for a writer who is not in the chat;
    ``Unresolved`` when the target's last ``TIME`` does not parse (the silence cannot be told).
    """
    ref = ChatRef.of(path)
    book = NameBook(state)
    who = validate_agent(name, "chat name") if human and name else HUMAN
    if not human:
        who = book.resolve(ref, name)
    if not silence >= 0:
        raise FormatError(f"must be a number of seconds >= 0, got {silence}", field="silence")
    reason = (reason or "").strip()
    if reason:
        check_one_line("gone reason", reason)
    at = now()
    found: dict[str, str] = {}

    def rule(st: ChatStatus) -> None:
        gone = st.find(target)
        if gone is None:
            shown = ", ".join(st.participants) or "none"
            raise Conflict(f"no participant {target!r} in this chat (participants: {shown})")
        if gone.lower() == who.lower():
            raise Conflict("you cannot mark yourself gone; use `chat leave`")
        if gone in st.left:
            raise Conflict(f"{gone!r} already left this chat at {st.left[gone]['time']}")
        if gone in st.gone:
            raise Conflict(f"{gone!r} is already marked gone (by {st.gone[gone]['by']})")
        if not human and st.find(who) not in st.present:
            raise Conflict(
                f"{who!r} is not present in this chat (never joined, left or marked gone), so it "
                "cannot mark anyone gone; say something first, or the human can, with --human"
            )
        last = st.last_block[gone]
        when = last.at
        if when is None or when > at + FUTURE_SKEW:
            if not human:
                raise Unresolved(
                    f"cannot tell how long {gone!r} has been silent (its last TIME is "
                    f"{last.time_raw!r}); the human can mark it gone with --human"
                )
            found["line"] = f"{gone} was marked gone by the human."
        else:
            quiet = max(0.0, (at - when).total_seconds())
            if not human and quiet < silence:
                raise Conflict(
                    f"{gone!r} last wrote {_silence(quiet)} ago; a participant may mark it gone "
                    f"after {_silence(silence)} of silence. Until then ask it in the chat, or "
                    "ask your human (--human)"
                )
            by = "the human" if human else f"{who} (silence bound {_silence(silence)})"
            found["line"] = (
                f"{gone} has written nothing since {last.time_raw} ({_silence(quiet)}); "
                f"marked gone by {by}."
            )
        found["name"] = gone

    def body() -> str:
        gone = found["name"]
        return (
            f"{GONE} {gone}\n{found['line']} The end handshake no longer waits for {gone}; a "
            f"new message from {gone} brings them back." + (f"\nreason: {reason}" if reason else "")
        )

    _write(ref.path, who, "", rule=rule, compose=body)
    return status(ref.path)


def check(
    path: Path | str, text: str, name: str | None = None, *, state: Path | None = None
) -> ChatStatus:
    """Open a human check (``---HUMAN-CHECK---`` + the decision); others hold until approved."""
    ref = ChatRef.of(path)
    who = NameBook(state).resolve(ref, name)
    check_chars("human check", text.strip(), 1, 1 << 16)
    _write(ref.path, who, f"{CHECK}\n{text.strip()}")
    return status(ref.path)


def approve(
    path: Path | str, text: str, name: str | None = None, *, state: Path | None = None
) -> ChatStatus:
    """Write your human's decision (``---HUMAN-APPROVED---``), closing your open check.

    Raises ``Conflict`` when the caller has no open check (only the agent that asked its human
    may write the human's answer).
    """
    ref = ChatRef.of(path)
    who = NameBook(state).resolve(ref, name)
    check_chars("human decision", text.strip(), 1, 1 << 16)

    def rule(st: ChatStatus) -> None:
        if not any(c["from"] == who for c in st.human_checks):
            raise Conflict(f"{who} has no open human check to approve (open one with `chat check`)")

    _write(ref.path, who, f"{APPROVED}\n{text.strip()}", rule=rule)
    return status(ref.path)


def _person(human: str) -> str:
    return HUMAN_PREFIX + validate_agent(human, "human name")


def human_say(path: Path | str, human: str, body: str) -> ChatMessage:
    """Append a person's message, written as ``human:NAME``: shown to everyone, never counted as
    a participant the end handshake waits for. ``NotFound``, ``Conflict`` (ended),
    ``LimitExceeded``, ``FormatError`` (a body that is a protocol marker)."""
    ref = ChatRef.of(path)
    _refuse_markers(body)
    start, end_ = _write(ref.path, _person(human), body)
    return parse_messages(read_from(ref.path, start)[: end_ - start], start)[0][0]


def human_answer(
    path: Path | str, human: str, author: str, text: str, *, approve: bool
) -> ChatStatus:
    """A person's answer to ``author``'s open human check.

    Approving writes ``---HUMAN-APPROVED--- @AUTHOR`` and the decision, which closes the check;
    refusing writes a plain message saying so, visible to all, and the check stays open (the
    agents keep holding). ``Conflict`` when ``author`` has no open check.
    """
    ref = ChatRef.of(path)
    check_chars("human decision", text.strip(), 1, 1 << 16)

    def rule(st: ChatStatus) -> None:
        if not any(c["from"] == author for c in st.human_checks):
            raise Conflict(f"{author} has no open human check to answer")

    if approve:
        body = f"{APPROVED} @{author}\n{text.strip()}"
    else:
        body = f"REFUSED {author}'s human check:\n{text.strip()}"
    _write(ref.path, _person(human), body, rule=rule)
    return status(ref.path)

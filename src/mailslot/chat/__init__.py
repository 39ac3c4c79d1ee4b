"""mailslot.chat: multi-agent chat over one append-only file.

Any number of agents share ``chat-YYYY-MM-DD-HHMMSS.txt``; each appends ``---MSG---`` blocks under
a lock and blocks in ``wait`` on kernel file events until someone else writes. The end handshake
and the human check are rules in code (``end``, ``check``, ``approve``); a participant can
``leave`` and a silent one can be marked gone (``mark_gone``), and ``status`` reads it all back
from the file. See ``format`` for the on-disk block, ``room`` for the operations and ``waiter``
for waiting (a ``Waiter`` keeps its watch armed between waits).
"""

from mailslot._lazy import lazy_exports as _lazy_exports
from mailslot.chat.format import ChatMessage, parse_messages, render_message
from mailslot.chat.identity import ChatRef, NameBook, generate_name
from mailslot.chat.locate import list_chats, locate_chat
from mailslot.chat.room import (
    Batch,
    ChatStatus,
    Joined,
    append_verbatim,
    approve,
    check,
    compute_status,
    end,
    human_answer,
    human_say,
    join,
    leave,
    mark_gone,
    new_chat,
    read,
    say,
    status,  # the function (after ``room`` imported the ``status`` module, which it shadows)
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: every chat loads this
if TYPE_CHECKING:
    from mailslot.chat.waiter import Waiter, wait

__all__ = [
    "Batch",
    "ChatMessage",
    "ChatRef",
    "ChatStatus",
    "Joined",
    "NameBook",
    "Waiter",
    "append_verbatim",
    "approve",
    "check",
    "compute_status",
    "end",
    "generate_name",
    "human_answer",
    "human_say",
    "join",
    "leave",
    "list_chats",
    "locate_chat",
    "mark_gone",
    "new_chat",
    "parse_messages",
    "read",
    "render_message",
    "say",
    "status",
    "wait",
]

# The waiter loads on first use (PEP 562): ``chat say`` has no use for it, nor for the cursors
# and the kernel-event watch it keeps.
__getattr__, __dir__ = _lazy_exports(__name__, dict.fromkeys(("Waiter", "wait"), "waiter"), __all__)

del TYPE_CHECKING  # not part of the package's names

"""What a chat file says about its conversation: topic, who is in it, the end handshake, checks.

The status is a fold over every block in file order, so any reader -- mailslot, or a bash agent
following the file by hand -- reaches the same answer from the same bytes:

* The topic is the first ``TOPIC:`` line of the opening message, wherever it stands in it.
* Participants are every ``FROM`` seen. A participant who wrote ``---LEAVE---`` has left; one
  named by another's ``---GONE--- NAME`` is gone. Neither is waited for by the end handshake,
  and any later block from them brings them back. A ``---GONE---`` mark alone does not make its
  writer a participant (the human marking a silent agent from their own terminal).
* An end request is pending until every *present* participant other than the requester has
  accepted; then the chat has ended, for good. With nobody else present it stays pending: nobody
  ends a chat alone. Any reject cancels it; a new request replaces a pending one.
* A human check stays open until its author writes ``---HUMAN-APPROVED---``, or a person
  answers it (below).
* A person writes as ``human:NAME`` (``HUMAN_PREFIX``; no agent name holds a colon). A person is
  never a participant: the end handshake never waits for them and their blocks do not bring
  anyone back. A person's ``---HUMAN-APPROVED--- @AUTHOR`` closes AUTHOR's open check (the newest
  open check when no ``@AUTHOR`` is named); their other markers change nothing.
"""

from __future__ import annotations

import re
from typing import Any

from mailslot.chat.format import ChatMessage
from mailslot.core.clock import format_time
from mailslot.core.record import Record

__all__ = [
    "HUMAN_PREFIX",
    "ChatStatus",
    "approved_author",
    "compute_status",
    "gone_target",
    "is_person",
    "message_time",
]

# The FROM of a block a person wrote (``human:ops``): agent names never hold a colon.
HUMAN_PREFIX = "human:"

_TOPIC_RE = re.compile(r"^[ \t]*TOPIC:[ \t]*(.*?)[ \t]*$", re.MULTILINE)


class ChatStatus(Record):
    """What the file says about the conversation (computed from every block, in order).

    A ``core.record`` record, not a dataclass: every ``chat say`` checks one."""

    __match_args__ = (
        "topic",
        "participants",
        "end_request",
        "ended",
        "ended_at",
        "last_rejection",
        "human_checks",
        "messages",
        "torn",
        "left",
        "gone",
        "last_block",
    )
    __slots__ = (
        "end_request",
        "ended",
        "ended_at",
        "gone",
        "human_checks",
        "last_block",
        "last_rejection",
        "left",
        "messages",
        "participants",
        "topic",
        "torn",
    )
    topic: str | None
    participants: list[str]
    end_request: dict[str, Any] | None
    ended: bool
    ended_at: str | None
    last_rejection: dict[str, Any] | None
    human_checks: list[dict[str, Any]]
    messages: int
    torn: dict[str, Any] | None  # ``<file>.torn``: fragments of appends killed mid-write
    left: dict[str, dict[str, Any]]
    gone: dict[str, dict[str, Any]]
    last_block: dict[str, ChatMessage]

    def __init__(
        self,
        topic: str | None = None,
        participants: list[str] | None = None,
        end_request: dict[str, Any] | None = None,
        ended: bool = False,
        ended_at: str | None = None,
        last_rejection: dict[str, Any] | None = None,
        human_checks: list[dict[str, Any]] | None = None,
        messages: int = 0,
        torn: dict[str, Any] | None = None,
        left: dict[str, dict[str, Any]] | None = None,
        gone: dict[str, dict[str, Any]] | None = None,
        last_block: dict[str, ChatMessage] | None = None,
    ) -> None:
        self.topic = topic
        self.participants = [] if participants is None else participants
        self.end_request = end_request
        self.ended = ended
        self.ended_at = ended_at
        self.last_rejection = last_rejection
        self.human_checks = [] if human_checks is None else human_checks
        self.messages = messages
        self.torn = torn
        self.left = {} if left is None else left
        self.gone = {} if gone is None else gone
        self.last_block = {} if last_block is None else last_block

    @property
    def human_check(self) -> dict[str, Any] | None:
        """The most recent open human check, or ``None``."""
        return self.human_checks[-1] if self.human_checks else None

    @property
    def present(self) -> list[str]:
        """Participants who have neither left nor been marked gone."""
        return [p for p in self.participants if p not in self.left and p not in self.gone]

    def find(self, name: str) -> str | None:
        """The participant called ``name`` (exactly, else ignoring case), or ``None``."""
        if name in self.participants:
            return name
        return next((p for p in self.participants if p.lower() == name.lower()), None)

    def to_json(self) -> dict[str, Any]:
        """The documented ``participants, end_request, ended, human_check`` plus details."""
        return {
            "participants": self.participants,
            "present": self.present,
            "left": list(self.left.values()),
            "gone": list(self.gone.values()),
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


def message_time(m: ChatMessage) -> str:
    """A block's ``TIME`` as mailslot writes it (UTC, ms), or as written when it does not parse."""
    return format_time(m.at) if m.at is not None else m.time_raw


def gone_target(text: str, participants: list[str]) -> str | None:
    """The participant a ``---GONE---`` mark names: its first line is the name, optionally
    followed by words (``dave-12345 silent since noon``). The longest participant name that the
    line is, or starts with before a space, wins (hand-written names may hold spaces)."""
    line = text.split("\n", 1)[0].strip()
    low = line.lower()
    hits = [p for p in participants if low == p.lower() or low.startswith(p.lower() + " ")]
    return max(hits, key=len) if hits else None


def is_person(sender: str) -> bool:
    """Whether a block's ``FROM`` is a person's (``human:NAME``), not an agent's."""
    return sender.startswith(HUMAN_PREFIX)


def approved_author(text: str) -> str | None:
    """The check author a person's approval names (``@kiran-48291`` first on its first line)."""
    first = text.split("\n", 1)[0].strip()
    if first.startswith("@") and len(first) > 1:
        return first[1:].split()[0]
    return None


def _person_answers(st: ChatStatus, m: ChatMessage) -> None:
    author = approved_author(m.marker_text)
    mine = [c for c in st.human_checks if c["from"] == author] if author else st.human_checks[-1:]
    if mine:
        st.human_checks.remove(mine[0])


def compute_status(messages: list[ChatMessage]) -> ChatStatus:
    """Fold the messages into a status (the rules are in the module docstring)."""
    st = ChatStatus(messages=len(messages))
    accepted: list[str] = []
    if messages and (topic := _TOPIC_RE.search(messages[0].body)):
        st.topic = topic.group(1)
    for m in messages:
        kind = m.kind
        if is_person(m.sender):  # a person: never a participant, answers checks only
            if not st.ended and kind == "human-approved":
                _person_answers(st, m)
            continue
        if kind != "gone" or m.sender in st.participants:
            if m.sender not in st.participants:
                st.participants.append(m.sender)
            st.last_block[m.sender] = m
            st.left.pop(m.sender, None)  # any block from a name shows it is here
            st.gone.pop(m.sender, None)
        if st.ended:
            continue
        if kind == "end-request":
            st.end_request = {"from": m.sender, "time": message_time(m), "reason": m.marker_text}
            accepted = []
        elif kind == "end-accept" and st.end_request is not None:
            if m.sender != st.end_request["from"] and m.sender not in accepted:
                accepted.append(m.sender)
        elif kind == "end-reject" and st.end_request is not None:
            st.last_rejection = {"from": m.sender, "time": message_time(m), "reason": m.marker_text}
            st.end_request = None
        elif kind == "human-check":
            st.human_checks.append(
                {"from": m.sender, "time": message_time(m), "text": m.marker_text}
            )
        elif kind == "human-approved":
            mine = [c for c in st.human_checks if c["from"] == m.sender]
            if mine:
                st.human_checks.remove(mine[0])
        elif kind == "leave":
            reason = m.marker_text.split("\n", 1)[0].strip()  # what follows is our sentence
            st.left[m.sender] = {"name": m.sender, "time": message_time(m), "reason": reason}
        elif kind == "gone":
            target = gone_target(m.marker_text, st.participants)
            if target is not None and target != m.sender and target not in st.left:
                st.gone[target] = {
                    "name": target,
                    "by": m.sender,
                    "time": message_time(m),
                    "text": m.marker_text,
                }
        if st.end_request is not None:
            others = [p for p in st.present if p != st.end_request["from"]]
            st.end_request["accepted"] = list(accepted)
            st.end_request["waiting_for"] = [p for p in others if p not in accepted]
            if others and not st.end_request["waiting_for"]:  # someone else must accept
                st.ended = True
                st.ended_at = message_time(m)
    return st

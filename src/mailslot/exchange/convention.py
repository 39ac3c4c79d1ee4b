"""CONVENTION.md: the protocol, written for an agent that has never heard of mailslot.

The other side is often an agent that writes files by hand, so this text is the whole interface:
paths, the entry format, what ``action`` means, the STATE rules, what HELD.md means and how to
release it, and the rule that the side raising ``action: required`` does not mark itself done.
It is generated from the exchange's own sides so every path in it is literally right.
"""

from __future__ import annotations

import shlex

from mailslot.exchange.layout import Exchange

__all__ = ["held_text", "lock_line", "render_convention"]


def render_convention(ex: Exchange) -> str:
    """The CONVENTION.md text for ``ex``."""
    a, b = ex.sides
    people = "".join(f"- `{h}` writes on side `{s}`.\n" for h, s in sorted(ex.humans.items()))
    lock_a, lock_b = lock_line(ex, a), lock_line(ex, b)
    return f"""# Exchange convention

This directory is a two-sided mailbox between **{a}** and **{b}**. You can use it with nothing
but a text editor; the `mailslot` tool follows exactly these rules.

## Who writes where

- `to-{b}/` is written by **{a}** and read by {b}.
- `to-{a}/` is written by **{b}** and read by {a}.
{people}
Write only into the other side's inbox (your outbox). Never write into your own inbox.

## Topics and entries

A topic is a directory `YYYY-MM-DD-<slug>` (slug: lowercase letters, digits, `-`). The same topic
name is used on both sides. Each message is one file `NNNN-<from>.md` in the topic directory of
your outbox, for example `to-{b}/2026-11-29-gate-bug/0001-{a}.md`:

```
---
from: {a}
at: 2026-11-29T18:14:00.123Z
action: required
---
The message, in plain markdown.
```

- **Numbering is shared by both sides of a topic.** Look at both `to-{a}/<topic>/` and
  `to-{b}/<topic>/`, take the highest number in either, and write the next one (4 digits).
  Never reuse a number and never write over an existing file: if the name exists, take the next.
- `at` is UTC ISO-8601 (`Z` or `+00:00`), best with milliseconds:
  `date -u +%Y-%m-%dT%H:%M:%S.%3NZ`.
- `action` is mandatory: `required` means you need an answer or an action from the other side;
  `fyi` means no answer is needed.
- Never edit or delete an entry, yours or theirs. A correction is a new, higher-numbered entry.
- Write the file under a name starting with `.` and rename it into place when complete; files
  whose names start with `.` are ignored by readers. If you do write an entry in place
  (`cat > 0003-{a}.md`), close it promptly: a reader waits until the file is closed (or left
  unchanged for 30 s while still open) and then shows it as it stands; end it with a newline,
  since a last line without one is shown as possibly cut short.

### Take the send lock while you number

Two writers at the same moment can pick the same number. mailslot claims every number under
`{ex.root}/.mailslot/send.lock`, which both sides can open; take it too, around "pick the next
number + rename". Write your entry as `.draft.md` in the topic directory of your outbox, set `T`
to the topic, then run your side's line (it renames the draft to the next free number; if
`.draft.md` is still there afterwards, nothing was renamed: run it again).

As **{a}**:

```
{lock_a}
```

As **{b}**:

```
{lock_b}
```

## STATE.md: your status for a topic

Your status lives in your outbox: `to-<other>/<topic>/STATE.md`. It is plain YAML:

```
status: open            # open | in-progress | blocked | done
tags: []
updated_at: 2026-11-29T18:20:00.456Z
updated_by: {a}
```

- `status` is one of those four words, exactly, in lowercase: anything else (`Done`, `closed`)
  is not understood, is reported as a problem, and never archives anything.
- `updated_at` is the time you wrote the file (`date -u +%Y-%m-%dT%H:%M:%S.%3NZ`).
- Write only your own STATE.md; never the other side's. A missing STATE.md means `open`.
- **If your newest entry in a topic is `action: required`, do not mark your side `done`.**
  Required means the exchange is open until the other side answers; "nothing more from me" is
  not "this topic is finished".
- When both sides say `done`, the topic is archived: moved to `done/` on both sides.

## HELD.md: a topic waiting for you to re-read it

Archiving waits until the newest entry from each side is older than the other side's last
STATE.md update, so a closing reply is never filed before it is read. If a `HELD.md` appears in a
topic directory of **your inbox**, the other side wrote something after you marked the topic
`done`. Read the newest entries; then either answer, or re-affirm by writing your STATE.md again
with `status: done` and a fresh `updated_at`. That releases the hold. `HELD.md` itself is not a
message: never answer it, edit it or delete it.

## INDEX.md

`INDEX.md` at the top is regenerated on every tick: each topic with both sides' status, entry
counts, last activity, holds, and what each side owes. It answers "is anything waiting for me".
"""


def lock_line(ex: Exchange, writer: str) -> str:
    """The shell line that renames ``writer``'s ``.draft.md`` in topic ``$T`` of its outbox to the
    next free number, under the send lock (``flock`` on a file both sides can read)."""
    mine, theirs = f"to-{writer}", f"to-{ex.other(writer)}"
    pick = (
        f'n=$(ls {mine}/"$1" {theirs}/"$1" 2>/dev/null | grep -E "^[0-9]{{4}}-" | sort '
        "| tail -n 1 | cut -c1-4); "
        f'mv -n {theirs}/"$1"/.draft.md '
        f'{theirs}/"$1"/$(printf %04d $((10#${{n:-0}} + 1)))-{writer}.md'
    )
    root = shlex.quote(str(ex.root))
    return f"cd {root} && flock .mailslot/send.lock bash -c '{pick}' _ \"$T\""


def held_text(topic: str, owing_side: str, other_side: str, entry: str, reason: str) -> str:
    """The HELD.md text: self-describing, stable while the hold stands."""
    return f"""# HELD: topic {topic} is waiting for {owing_side} to re-read it

Both sides marked this topic `done`, but it was not archived: {reason}.

{other_side} wrote `{entry}` after {owing_side}'s STATE.md was last updated, so {owing_side} may
not have read it. Archiving now could file that entry where nobody looks.

To release this hold, {owing_side} reads the newest entries in this directory, then either:
- answers with a new entry (the topic stays open), or
- re-affirms by writing its own STATE.md again (`to-{other_side}/{topic}/STATE.md`) with
  `status: done` and a fresh `updated_at`.

This file is written by the tick, not by {other_side}. It is not a message: do not answer, edit
or delete it. The tick removes it when the hold is released.
"""

"""Helpers for exchange tests (a module, not the conftest, so it imports unambiguously)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from mailslot.cli import cli


def write_by_hand(path: Path, text: str, *, crlf: bool = False) -> Path:
    """Write a file the way a foreign agent would: plain open/write, maybe CRLF."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.replace("\n", "\r\n") if crlf else text
    path.write_bytes(data.encode())
    return path


def hand_entry(
    root: Path,
    inbox: str,
    topic: str,
    number: int,
    sender: str,
    at: str | None,
    action: str = "fyi",
    body: str = "hand-written\n",
    *,
    crlf: bool = False,
    quoted: bool = False,
) -> Path:
    """An entry written by hand into ``to-<inbox>/<topic>/``; ``at=None`` leaves it out."""
    q = '"' if quoted else ""
    lines = ["---", f"from: {q}{sender}{q}"]
    if at is not None:
        lines.append(f"at: {q}{at}{q}")
    lines += [f"action: {q}{action}{q}", "---", body]
    name = f"{number:04d}-{sender}.md"
    return write_by_hand(root / f"to-{inbox}" / topic / name, "\n".join(lines), crlf=crlf)


def hand_state(
    root: Path,
    inbox: str,
    topic: str,
    status: str,
    updated_at: str | None,
    by: str = "agent",
    *,
    fenced: bool = False,
    crlf: bool = False,
) -> Path:
    """A STATE.md written by hand into ``to-<inbox>/<topic>/`` (the writer side's status)."""
    lines = [f"status: {status}", "tags: []"]
    if updated_at is not None:
        lines.append(f"updated_at: {updated_at}")
    lines.append(f"updated_by: {by}")
    text = "\n".join(lines) + "\n"
    if fenced:
        text = "---\n" + text + "---\n"
    return write_by_hand(root / f"to-{inbox}" / topic / "STATE.md", text, crlf=crlf)


def run(root: Path, *args: str, ok: bool = True, agent: str | None = None) -> Any:
    """Invoke ``mailslot --root ROOT [--as A] ARGS`` in-process; fail loudly on a wrong exit."""
    pre = ["--root", str(root)] + (["--as", agent] if agent else [])
    r = CliRunner().invoke(cli, [*pre, *args], catch_exceptions=False)
    if ok and r.exit_code != 0:
        raise AssertionError(f"mailslot {' '.join(args)} exited {r.exit_code}:\n{r.output}")
    return r


def send_cli(root: Path, agent: str, topic: str, body: str, action: str = "fyi") -> str:
    """``exchange send`` through the CLI; the new entry's root-relative path."""
    r = run(root, "exchange", "send", "--topic", topic, "--action", action, body, agent=agent)
    return r.stdout.strip()


def both_done_cli(root: Path) -> str:
    """A topic claude opened with an fyi entry, then marked done by both sides; its name."""
    topic = send_cli(root, "claude", "q", "fyi: context").split("/")[1]
    run(root, "exchange", "state", topic, "done", agent="olu")
    run(root, "exchange", "state", topic, "done", agent="claude")
    return topic


def tick(root: Path, *extra: str) -> dict[str, Any]:
    """Drive the real ``exchange tick`` entry point; a non-zero exit fails the test loudly."""
    r = run(root, "exchange", "tick", "--json", *extra)
    return json.loads(r.stdout)


class Hook:
    """A real HTTP server on 127.0.0.1 that records the notifications Apprise posts to it."""

    def __init__(self, port: int = 0) -> None:
        received: list[dict[str, Any]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", 0))
                received.append(json.loads(self.rfile.read(n) or b"{}"))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def hook(port: int = 0) -> Iterator[Hook]:
    """A running ``Hook`` for the duration of the block."""
    h = Hook(port)
    try:
        yield h
    finally:
        h.close()


# A hand writer following CONVENTION.md with nothing but bash: list both sides' directories of the
# topic, take the highest number, write a dot-file, rename it into place. ``pick`` as the action
# prints the number it would take and writes nothing (two writers that pick before either
# renames reuse a number, as hand-writing agents do). No send lock: the convention's lock line is
# tested on its own.
HAND_SEND = r"""
set -eu
root=$1 me=$2 other=$3 topic=$4 action=$5 num=${6:-}
dir="$root/to-$other/$topic"
if [ -z "$num" ]; then
  n=$(ls "$root/to-$me/$topic" "$dir" 2>/dev/null | grep -E '^[0-9]{4}-' | sort | tail -n 1)
  n=${n:0:4}
  num=$(printf %04d $((10#${n:-0} + 1)))
fi
if [ "$action" = pick ]; then echo "$num"; exit 0; fi
mkdir -p "$dir"
printf -- '---\nfrom: %s\nat: %s\naction: %s\n---\nwritten by hand\n' \
  "$me" "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$action" > "$dir/.draft-$$.md"
mv "$dir/.draft-$$.md" "$dir/$num-$me.md"
echo "$num"
"""

# A hand writer's STATE.md, the bash way: second-precision ``date``, written whole, renamed in.
HAND_STATE = r"""
set -eu
root=$1 me=$2 other=$3 topic=$4 status=$5
dir="$root/to-$other/$topic"
mkdir -p "$dir"
printf 'status: %s\ntags: []\nupdated_at: %s\nupdated_by: %s\n' \
  "$status" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$me" > "$dir/.STATE-$$.md"
mv "$dir/.STATE-$$.md" "$dir/STATE.md"
"""


def bash_send(root: Path, me: str, other: str, topic: str, action: str, num: str = "") -> str:
    """Run ``HAND_SEND`` as ``me`` writing to ``other``; the number it took (or would take)."""
    r = subprocess.run(
        ["bash", "-c", HAND_SEND, "hand", str(root), me, other, topic, action, num],
        capture_output=True,
        text=True,
        check=True,
    )
    return r.stdout.strip()


def bash_state(root: Path, me: str, other: str, topic: str, status: str) -> None:
    """Run ``HAND_STATE``: ``me`` writes its STATE.md for ``topic`` (in ``to-<other>/``)."""
    subprocess.run(
        ["bash", "-c", HAND_STATE, "hand", str(root), me, other, topic, status], check=True
    )

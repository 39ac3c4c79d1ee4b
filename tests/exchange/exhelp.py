"""Helpers for the exchange tests, tests/exchange and tests/exchange_health alike (a module, not
the conftest, so it imports unambiguously; pytest's ``pythonpath`` puts it on the path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from mailslot.cli import cli

GENEROUS = 60.0  # seconds: a loaded 2-core CI machine, never a performance assertion


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
    quote_from: bool = False,
    rename: bool = False,
) -> Path:
    """An entry written by hand into ``to-<inbox>/<topic>/``; ``at=None`` leaves it out.

    ``quoted`` quotes every value, ``quote_from`` only ``from:``. ``rename`` writes a dot-file
    first and renames it into place (a writer never seen half-done); without it the entry is
    written in place."""
    q = '"' if quoted else ""
    qf = '"' if quoted or quote_from else ""
    lines = ["---", f"from: {qf}{sender}{qf}"]
    if at is not None:
        lines.append(f"at: {q}{at}{q}")
    lines += [f"action: {q}{action}{q}", "---", body]
    final = root / f"to-{inbox}" / topic / f"{number:04d}-{sender}.md"
    if not rename:
        return write_by_hand(final, "\n".join(lines), crlf=crlf)
    tmp = write_by_hand(final.with_name(f".{final.name}.partial"), "\n".join(lines), crlf=crlf)
    os.rename(tmp, final)
    return final


# The hand writer of the health tests: ``from:`` quoted, the entry renamed into place whole.
RENAMED_IN: dict[str, Any] = {"body": "written by hand\n", "quote_from": True, "rename": True}


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


def spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the real ``mailslot`` command in a subprocess (stdout/stderr captured)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mailslot", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def inotify_watches(pid: int) -> int:
    """How many inotify watches process ``pid`` holds (-1 where /proc cannot tell)."""
    fd_dir = Path(f"/proc/{pid}/fdinfo")
    if not fd_dir.is_dir():
        return -1
    n = 0
    for f in fd_dir.iterdir():
        try:
            n += f.read_text().count("inotify wd:")
        except OSError:
            continue
    return n


def wait_armed(proc: subprocess.Popen[str], at_least: int, timeout: float = GENEROUS) -> None:
    """Block until ``proc`` has armed ``at_least`` inotify watches (it is blocked in wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"waiter exited early: {proc.communicate()}"
        n = inotify_watches(proc.pid)
        if n < 0:
            time.sleep(2.0)  # no /proc: give it a generous moment instead
            return
        if n >= at_least:
            time.sleep(0.05)
            return
        time.sleep(0.02)
    raise AssertionError("the waiter never armed its watches")


def snapshot(*dirs: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``dirs`` with (size, mtime_ns, mode): to assert nothing was written."""
    out = {}
    for d in dirs:
        if not d.exists():
            continue
        for p in [d, *d.rglob("*")]:
            st = p.lstat()
            out[str(p)] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, st.st_mode)
    return out


# An entry's header as a hand agent writes it, its time filled in by ``format(at=...)``.
HAND_HEAD = "---\nfrom: olu\nat: {at}\naction: fyi\n---\n"


def now_stamp() -> str:
    """Now, as an entry's ``at`` (milliseconds, Z)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def open_writer(path: Path, first: str) -> subprocess.Popen[str]:
    """A hand writer in its own process: ``first`` written (truncating) and flushed, the file
    kept open; each line on its stdin appended as it comes, and a closed stdin closes it."""
    code = (
        "import sys\n"
        f"f = open({str(path)!r}, 'w'); f.write({first!r}); f.flush()\n"
        "print('written', flush=True)\n"
        "for line in sys.stdin: f.write(line); f.flush()\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None and p.stdout.readline() == "written\n"
    return p


def finish_writer(p: subprocess.Popen[str], rest: str, timeout: float = 30) -> None:
    """Have the ``open_writer`` ``p`` append ``rest`` and close its file; it must exit cleanly."""
    assert p.stdin is not None
    p.stdin.write(rest)
    p.stdin.close()
    assert p.wait(timeout) == 0

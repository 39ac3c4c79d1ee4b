"""What tests of more than one channel share: a call in a thread, Debian's chromium, an app on
a real loopback server, systemd's verdict on a unit. Plain functions; fixtures are in conftest."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    """Call ``fn`` in a daemon thread; the thread and a box that gets ``result`` or ``error``."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def blocked_in_poll(t: threading.Thread, timeout: float = 30) -> None:
    """Return once thread ``t`` sleeps in the kernel's poll (a wait armed and blocked), as the
    kernel reports it in ``/proc/self/task/TID/wchan``; fail after ``timeout`` s."""
    wchan = Path(f"/proc/self/task/{t.native_id}/wchan")
    deadline = time.monotonic() + timeout
    while "poll" not in wchan.read_text():
        assert t.is_alive() and time.monotonic() < deadline, "the wait never blocked"
        time.sleep(0.005)


# Debian's chromium, driven through Playwright by the web tests that need a real browser.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """The chromium executable; skips the test where it is missing (fails it on CI)."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    found = shutil.which("chromium")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"chromium is required on CI ({CHROMIUM}); scripts/sysdeps.sh installs it")
    pytest.skip("chromium not installed (make sysdeps)")


@contextmanager
def loopback_server(
    app_for_port: Callable[[int], Any], limits: Any, listen: str = "127.0.0.1"
) -> Iterator[str]:
    """Run the app ``app_for_port(port)`` makes in a thread on ``listen``:<free port>, built as
    the serve commands build it (``bind.build_server``, with the ``ServerLimits`` ``limits``);
    yield its base URL."""
    from mailslot.web.bind import build_server

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as bind.bind_socket does
    sock.bind((listen, 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = build_server(app_for_port(port), limits)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "server thread died while starting"
        assert time.monotonic() < deadline, "server did not start within 30 s"
        time.sleep(0.01)
    try:
        yield f"http://{listen}:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def unit_problems(unit: Path, cwd: Path | None = None) -> tuple[list[str], str]:
    """What ``systemd-analyze verify`` says is wrong with ``unit`` (the caller checks the tool
    is installed), leaving out what only a test machine lacks: the users and programs a unit
    names. The problems, and the tool's whole error output to show with them."""
    tool = shutil.which("systemd-analyze")
    assert tool is not None, "systemd-analyze not installed"
    r = subprocess.run(
        [tool, "verify", str(unit)], capture_output=True, text=True, timeout=60, cwd=cwd
    )
    problems = [
        line
        for line in (r.stderr + r.stdout).splitlines()
        if line.strip()
        and "user" not in line.lower()
        and "group" not in line.lower()
        and "not executable" not in line.lower()
        and "No such file" not in line
        and "Failed to prepare filename" not in line
    ]
    return problems, r.stderr


def with_watch_limit(limit: int, argv: list[str]) -> list[str]:
    """``argv`` run in a user namespace of its own whose inotify watch limit is ``limit``
    (``/proc/sys/user/max_inotify_watches``: a real ``ENOSPC`` from ``inotify_add_watch`` past
    it, and nothing else on the machine touched); skips the test where user namespaces are
    not allowed (a container or a kernel policy may forbid them: the machine's limit is never
    lowered instead, which would starve every other watcher of the user)."""
    prefix = [
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        'echo "$0" > /proc/sys/user/max_inotify_watches && exec "$@"',
        str(limit),
    ]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no user namespace with its own inotify watch limit: {probe.stderr.strip()}")
    return [*prefix, *argv]


def holds_intent(sidecar: Path) -> bool:
    """Whether the append sidecar ``sidecar`` holds an intent (or is something else in its
    place). One holding none is empty or starts with the cleared mark ``-``: its file's owner
    keeps it between appends."""
    return not sidecar.is_file() or sidecar.read_bytes()[:1] not in (b"", b"-")


def names_left(directory: Path) -> list[str]:
    """The names in ``directory``, less append sidecars that hold no intent."""
    return sorted(
        n for n in os.listdir(directory) if not n.endswith(".intent") or holds_intent(directory / n)
    )

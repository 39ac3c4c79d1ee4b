"""Running an external program (git, systemctl, systemd-analyze): bounded, and never left behind.

Every program mailslot runs goes through ``run_command``, which guarantees:

* Bounded in time: past ``timeout`` the program's whole process group is sent SIGTERM, given
  ``STOP_GRACE_S`` to clean up (git removes its ``index.lock``), then SIGKILL. A child that
  outlives its parent while holding the output pipe open is in that group too, so the wait for
  the output ends when the group does.
* Bounded in memory: standard output past ``max_output`` bytes stops the program and fails the
  call (output is never silently cut); standard error keeps its last ``STDERR_KEEP`` bytes,
  which is all an error message needs.
* Its own session (``start_new_session``): a terminal's Ctrl-C reaches mailslot, not the
  program, so mailslot decides how the program ends. An interrupt (SIGINT, SIGTERM) that lands
  while the program is being spawned is held until it exists, so it is never left running
  unseen; an interrupt while it runs lets it finish the step it is in (``STOP_GRACE_S``, its
  output drained so it cannot block) before its group is stopped, then the interrupt goes on.
* One error: a program that cannot be started, overruns, prints too much or (with ``check``)
  exits non-zero raises ``CommandFailed``, which names the program and the last line it wrote
  to standard error.

What this cannot protect against: a program that leaves its session (``setsid``) or daemonises
escapes the group kill; the programs mailslot runs do neither.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from mailslot.core.errors import CommandFailed
from mailslot.core.handover import held_signals

__all__ = [
    "MAX_OUTPUT",
    "STDERR_KEEP",
    "STOP_GRACE_S",
    "CommandResult",
    "run_command",
]

# Standard output a caller parses whole; a git log over 100,000 entries stays well under it.
MAX_OUTPUT = 64 * 1024 * 1024
# The tail of standard error kept for the error message.
STDERR_KEEP = 64 * 1024
# How long an interrupted or overrunning program gets to finish its step (git removing its lock
# files) before its group is killed.
STOP_GRACE_S = 10.0
_CHUNK = 65536


class CommandResult(NamedTuple):
    """A finished program: its exit status and what it wrote (standard error's tail only)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        """Standard output as text (UTF-8; undecodable bytes kept as surrogates)."""
        return self.stdout.decode("utf-8", errors="surrogateescape")

    @property
    def err(self) -> str:
        """Standard error's tail as text."""
        return self.stderr.decode("utf-8", errors="replace")


class _Overrun(Exception):
    """Internal: the deadline passed or the output bound was crossed."""


def _last_line(data: bytes) -> str:
    lines = data.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else ""


class _Pump:
    """Feeds standard input and drains standard output and error without blocking."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes | None, max_output: int) -> None:
        self.proc = proc
        self.max_output = max_output
        self.out = bytearray()
        self.err = bytearray()
        self.sel = selectors.DefaultSelector()
        self.data = memoryview(data or b"")
        self.overflow = False
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                self.sel.register(stream, selectors.EVENT_READ)
        if proc.stdin is not None:
            if self.data:
                os.set_blocking(proc.stdin.fileno(), False)
                self.sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()

    def run(self, deadline: float, *, keep: bool = True) -> None:
        """Pump until both outputs close, or ``_Overrun`` at ``deadline`` or past the bound.

        With ``keep`` false the output is read and dropped (a program finishing its step).
        """
        while self.sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Overrun("deadline")
            for key, _ in self.sel.select(left):
                stream = key.fileobj
                if stream is self.proc.stdin:
                    self._feed()
                    continue
                fd = key.fd
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    self.sel.unregister(stream)
                    continue
                if not keep:
                    continue
                if stream is self.proc.stdout:
                    self.out += chunk
                    if len(self.out) > self.max_output:
                        self.overflow = True
                        raise _Overrun("output")
                else:
                    self.err += chunk
                    if len(self.err) > 2 * STDERR_KEEP:
                        del self.err[:-STDERR_KEEP]

    def _feed(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            written = os.write(stdin.fileno(), self.data[:_CHUNK])
        except BlockingIOError:
            return
        except BrokenPipeError:
            written = len(self.data)  # the program stopped reading: its exit says why
        self.data = self.data[written:]
        if not self.data:
            self.sel.unregister(stdin)
            with contextlib.suppress(BrokenPipeError):
                stdin.close()

    def close(self) -> None:
        self.sel.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _settle(pump: _Pump, grace: float) -> bool:
    """Drain the output (dropped) until the program exits or ``grace`` passes; whether it did."""
    end = time.monotonic() + grace
    with contextlib.suppress(_Overrun):
        pump.run(end, keep=False)
    try:
        pump.proc.wait(timeout=max(0.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _stop(pump: _Pump, *, finish_first: bool) -> None:
    """End the program: let it finish first when asked, then SIGTERM its group, then SIGKILL.

    Each step is bounded by ``STOP_GRACE_S``; the group is killed last whatever happened, so a
    child left holding a pipe does not outlive the call.
    """
    proc = pump.proc
    try:
        if finish_first and _settle(pump, STOP_GRACE_S):
            return
        _signal_group(proc, signal.SIGTERM)
        _settle(pump, STOP_GRACE_S)
    finally:
        _signal_group(proc, signal.SIGKILL)
        pump.close()
        proc.wait()


def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | str | None = None,
    check: bool = True,
    max_output: int = MAX_OUTPUT,
) -> CommandResult:
    """Run ``argv`` (no shell) to its end within ``timeout`` seconds; what it wrote.

    ``env`` replaces the environment when given; ``input`` is written to standard input (else
    standard input is empty). Raises ``CommandFailed`` when the program cannot be started, runs
    past ``timeout``, writes more than ``max_output`` bytes, or (with ``check``) exits non-zero.
    """
    args = tuple(str(a) for a in argv)
    name = Path(args[0]).name
    data = input.encode() if isinstance(input, str) else input
    # A signal during the spawn is held until the program and its pump exist, then acted on
    # inside the ``try`` below, whose handler ends what was spawned: never left running unseen.
    pump: _Pump | None = None
    try:
        with held_signals():
            try:
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=dict(env) if env is not None else None,
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise CommandFailed(name, f"{name} is not installed (not found on PATH)") from None
            except OSError as e:
                raise CommandFailed(name, f"{name} could not be started: {e.strerror}") from None
            pump = _Pump(proc, data, max_output)
        deadline = time.monotonic() + timeout
        pump.run(deadline)
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Overrun("deadline")
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            raise _Overrun("deadline") from None
    except _Overrun:
        assert pump is not None
        _stop(pump, finish_first=False)
        if pump.overflow:
            raise CommandFailed(
                name, f"{name} wrote more than {max_output} bytes of output; stopped"
            ) from None
        raise CommandFailed(
            name, f"{name} did not finish within {timeout:g}s; stopped", timed_out=True
        ) from None
    except BaseException:
        if pump is not None:
            _stop(pump, finish_first=True)
        raise
    pump.close()
    result = CommandResult(args, proc.returncode, bytes(pump.out), bytes(pump.err[-STDERR_KEEP:]))
    if check and proc.returncode != 0:
        detail = _last_line(result.stderr) or _last_line(result.stdout) or str(proc.returncode)
        raise CommandFailed(
            name, f"{name} exited with status {proc.returncode}: {detail}", result=result
        )
    return result

"""Blocking work (fsync'd writes) run off the event loop on a few long-lived threads.

The peer inbox hands each accepted message to a worker thread, so concurrent messages overlap
their fsyncs while the loop keeps speaking HTTP. A hop through ``anyio.to_thread`` costs a
cancel scope, a capacity limiter with its weak-reference bookkeeping and a queue with a
condition variable per call: under wrk -c32 that hop was about a third of the server's CPU per
message. This pool is the plain version: one ``SimpleQueue`` of jobs (a hand-off in C), threads
started on demand up to ``size`` and ended after ``IDLE_S`` without work, and the result handed
back with one ``call_soon_threadsafe``.

Invariants:

* A job submitted runs to its end on a worker even if the awaiting task is cancelled (a write
  is never cut off half-way by a client that left); its result is then dropped.
* An exception in a job is raised in the awaiting task, never swallowed by the worker.
* At most ``size`` threads run jobs; more jobs wait in the queue, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

__all__ = ["IDLE_S", "WorkerPool"]

# A worker with nothing to do for this long ends (a server between bursts, or a test process
# that built many apps, keeps no idle threads); the next burst starts them again.
IDLE_S = 10.0

T = TypeVar("T")


class _Job(NamedTuple):
    """A call to make on a worker, and where its result goes."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    fut: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if fut.cancelled():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class WorkerPool:
    """Up to ``size`` daemon threads that run blocking calls for coroutines (``await run``)."""

    def __init__(self, size: int, name: str = "mailslot-worker") -> None:
        if size < 1:
            raise ValueError("a pool needs at least one thread")
        self.size = size
        self.name = name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread; its result, or its exception raised here."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        with self._lock:
            # ``_idle`` counts idle workers less jobs queued for them: below zero only when
            # every thread is busy, and then no new one may start.
            start = self._idle <= 0 and self._threads < self.size
            if start:
                self._threads += 1
                name = f"{self.name}-{self._threads}"
            else:
                self._idle -= 1
        if start:
            threading.Thread(target=self._work, name=name, daemon=True).start()
        self._jobs.put(_Job(fn, args, fut, loop))
        return await fut

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    # Leave only while more workers are idle than jobs are queued for them.
                    if self._idle > 0:
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            try:
                value, ok = job.fn(*job.args), True
            except BaseException as e:  # handed to the awaiting task, raised there
                value, ok = e, False
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                job.loop.call_soon_threadsafe(_settle, job.fut, ok, value)
            del job, value  # drop references while idle
            with self._lock:
                self._idle += 1

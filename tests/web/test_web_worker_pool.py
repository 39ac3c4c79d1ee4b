"""The worker pool the inbox writes on: results and exceptions come back to the awaiting task,
at most ``size`` jobs run at once (the rest wait in order), and a job whose task was cancelled
still runs to its end."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mailslot.web.workers import WorkerPool


def test_results_and_exceptions_reach_the_awaiting_task() -> None:
    pool = WorkerPool(4)

    def boom() -> None:
        raise ValueError("refused in the worker")

    async def main() -> tuple[list[int], str]:
        results = await asyncio.gather(*(pool.run(lambda i=i: i * i) for i in range(20)))
        with pytest.raises(ValueError) as e:
            await pool.run(boom)
        return list(results), str(e.value)

    results, message = asyncio.run(main())
    assert results == [i * i for i in range(20)]
    assert message == "refused in the worker"


def test_at_most_size_jobs_run_at_once_and_all_run() -> None:
    pool = WorkerPool(3)
    lock = threading.Lock()
    running, peak, done = 0, 0, []

    def job(i: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)  # a blocking write's wait
        with lock:
            running -= 1
            done.append(i)
        return threading.get_ident()

    async def main() -> list[int]:
        return await asyncio.gather(*(pool.run(job, i) for i in range(24)))

    threads = asyncio.run(main())
    assert sorted(done) == list(range(24))
    assert peak == 3
    assert len(set(threads)) == 3 and threading.get_ident() not in threads


def test_a_cancelled_task_does_not_cut_its_job_short() -> None:
    pool = WorkerPool(1)
    finished = threading.Event()

    def write() -> str:
        time.sleep(0.2)
        finished.set()
        return "stored"

    async def main() -> None:
        task = asyncio.create_task(pool.run(write))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await pool.run(lambda: "next") == "next"  # after the first job, in order

    asyncio.run(main())
    assert finished.is_set()

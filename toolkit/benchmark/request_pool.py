"""Start requests in arrival order, at most ``limit`` at a time, from a pool that costs nothing per prompt.

vLLM 0.33.0 creates one task per request up front, each waiting on a semaphore
(``vllm/benchmarks/serve.py:1001-1012``, ``:1110-1118``); so did we, and against a server that records
what it sent (issue 29) 5,120 tasks and their first semaphore tries cost 52 ms inside the measured
duration: most of a -0.5 % output tok/s error. Here at most ``limit`` workers exist, spawned when none
is idle; request ``i`` starts at ``max(arrival_i, a worker free)`` in index order, as vLLM's FIFO
semaphore gives (``get_request``, serve.py:431; ``limited_request_func``, serve.py:1007).

Due requests start in slices of about a millisecond after a reading of the sockets (:class:`StartTurns`).
A start costs 100-300 us of CPU: starting the next request in the turn that read a stream's end stamped
the other streams' last tokens 0.9-5.4 ms late. One start per turn slowed a 256-stream run by a fifth;
all due starts in one turn cost +52 ms TTFT at 256 streams against +28 ms in slices.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

__all__ = ["RequestPool", "StartTurns"]


class StartTurns:
    """Request starts in index order, in slices of about a millisecond, each after a reading of the sockets.

    ``await turns.wait(i)`` returns when request ``i`` may start. A release runs one turn after a wait
    began (every stream read in that turn has its timestamp) and lets go, in index order, the waiters
    whose predecessors went; those past the slice's ``BUDGET_S`` wait for the next release.
    """

    #: starts in one turn stop after this much time; the rest go after the next reading of the sockets
    BUDGET_S = 0.001

    def __init__(self) -> None:
        self._next = 0
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._scheduled = False
        self._batch_t0: float | None = None

    async def wait(self, i: int) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._waiting[i] = waiter = loop.create_future()
            if not self._scheduled:
                self._scheduled = True
                loop.call_soon(self._release)
            try:
                await waiter
            finally:
                self._waiting.pop(i, None)
            now = time.perf_counter()
            if self._batch_t0 is None:
                self._batch_t0 = now
            if now - self._batch_t0 < self.BUDGET_S:
                return
            self._next = min(self._next, i)  # over this turn's budget: wait for the next release, in order

    def _release(self) -> None:
        self._scheduled = False
        self._batch_t0 = None
        while (waiter := self._waiting.pop(self._next, None)) is not None:
            self._next += 1
            if not waiter.done():
                waiter.set_result(None)


class RequestPool:
    """Run ``work(i)`` for ``i`` in ``range(n)``: in order, on the arrival schedule, ``limit`` at a time.

    ``offsets_s[i]``: request ``i``'s arrival from the start (``None``: all at once). :meth:`stop`
    cancels the workers (:attr:`stopped` says why); requests never started never reach ``work``.
    """

    def __init__(self, n: int, *, limit: int | None, offsets_s: Sequence[float] | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be >= 1 (or None for unlimited), got {limit}")
        if offsets_s is not None and len(offsets_s) < n:
            raise ValueError(f"offsets_s has {len(offsets_s)} arrival times for {n} requests: give one per request")
        self.n = n
        self.limit = min(limit or n, n)
        self.offsets_s = offsets_s
        self.start = 0.0  # time.perf_counter() just before the first request was released
        self.started = 0  # requests handed to work
        self.stopped: str | None = None
        self.max_workers = 0
        self._end_by: float | None = None
        self._deadline_s: float | None = None
        self._next = 0
        self._idle = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._alive = 0
        self._finished: asyncio.Future[None] | None = None
        self._turns = StartTurns()

    def stop(self, reason: str) -> None:
        """End the run: no further request starts, the running ones are cancelled."""
        if self.stopped is None:
            self.stopped = reason
            for task in self._tasks:
                task.cancel()

    async def run(self, work: Callable[[int], Awaitable[None]], *, deadline_s: float | None = None) -> None:
        """Release every request and wait for all; past ``deadline_s`` the run is stopped."""
        if self.n == 0:
            self.start = time.perf_counter()
            return
        self._finished = asyncio.get_running_loop().create_future()
        self._deadline_s = deadline_s
        self.start = time.perf_counter()
        self._end_by = None if deadline_s is None else self.start + deadline_s
        self._spawn(work)
        try:
            timeout = None if self._end_by is None else max(0.0, self._end_by - time.perf_counter())
            done, _ = await asyncio.wait([self._finished], timeout=timeout)
            if not done:
                self.stop(f"the benchmark's deadline of {deadline_s:g} s passed (deadline_s=...; derived from the "
                          "warm-up unless given)")
                await self._finished
        except asyncio.CancelledError:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            raise
        for task in self._tasks:  # a bug in work() must not vanish as "exception never retrieved"
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    def _spawn(self, work: Callable[[int], Awaitable[None]]) -> None:
        self._alive += 1
        self._tasks.append(asyncio.get_running_loop().create_task(self._worker(work)))
        self.max_workers = max(self.max_workers, len(self._tasks))

    async def _take(self) -> int | None:
        """The next request's index, at its arrival time; None when there is none (or the run stopped)."""
        i = self._next
        if i >= self.n or self.stopped is not None:
            return None
        self._next += 1
        if self.offsets_s is not None and self.offsets_s[i] > 0:
            due = self.start + self.offsets_s[i]
            if self._end_by is not None and due > self._end_by:
                self.stop(f"the benchmark's deadline of {self._deadline_s:g} s passed before every request was sent")
                return None
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        return i

    async def _worker(self, work: Callable[[int], Awaitable[None]]) -> None:
        try:
            while True:
                self._idle += 1
                try:
                    i = await self._take()
                finally:
                    self._idle -= 1
                if i is None:
                    return
                if self._idle == 0 and len(self._tasks) < self.limit and self._next < self.n:
                    self._spawn(work)  # a spare, waiting for the next arrival while this one works
                await self._turns.wait(i)
                self.started += 1
                await work(i)
        except asyncio.CancelledError:
            if self.stopped is None:
                raise  # cancelled from outside (Ctrl-C): not ours to swallow
        finally:
            self._alive -= 1
            if self._alive == 0 and self._finished is not None and not self._finished.done():
                self._finished.set_result(None)

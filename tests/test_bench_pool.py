"""The request pool and the quiet collector: arrival order, the concurrency cap, one start per loop turn,
the run's cost independent of the number of prompts, and the collector's state put back even on error."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_bench_client import Loopback

from toolkit.benchmark.client import ClientSettings
from toolkit.benchmark.collector import collector_state, quiet_collector
from toolkit.benchmark.dispatch import run_requests
from toolkit.benchmark.request_pool import RequestPool, StartTurns
from toolkit.benchmark.wire import StreamPool
from toolkit.benchmark.workload import arrival_offsets, make_workload


@pytest.fixture(scope="module")
def server() -> Iterator[Loopback]:
    with Loopback() as srv:
        yield srv


class Ticker:
    """Counts turns of the running event loop (a callback that re-schedules itself)."""

    def __init__(self) -> None:
        self.turns = 0
        self.loop = asyncio.get_running_loop()
        self.handle = self.loop.call_soon(self.tick)

    def tick(self) -> None:
        self.turns += 1
        self.handle = self.loop.call_soon(self.tick)


def test_requests_start_in_order_and_never_more_than_the_limit_at_once():
    started: list[int] = []
    running, most = 0, 0

    async def work(i: int) -> None:
        nonlocal running, most
        started.append(i)
        running += 1
        most = max(most, running)
        for _ in range(i % 4 + 8):  # requests of different lengths finish out of order
            await asyncio.sleep(0)
        running -= 1

    pool = RequestPool(40, limit=3)
    asyncio.run(pool.run(work))
    assert started == list(range(40))
    assert most == 3 and pool.max_workers == 3 and pool.started == 40


def test_streams_that_end_together_are_all_read_before_the_next_requests_start():
    """Five requests ending in the same turn: each worker used to start its next request in the step in which
    it read its end, so the ends behind it in that turn were stamped after those starts."""
    events: list[tuple[str, int]] = []

    async def main() -> None:
        release = asyncio.Event()

        async def work(i: int) -> None:
            events.append(("start", i))
            if i == 4:
                release.set()  # the first five end together
            if i < 5:
                await release.wait()
                events.append(("end", i))

        await RequestPool(10, limit=5).run(work)

    asyncio.run(main())
    last_end = max(k for k, e in enumerate(events) if e[0] == "end")
    first_late_start = min(k for k, e in enumerate(events) if e == ("start", 5))
    assert last_end < first_late_start, events
    assert [i for kind, i in events if kind == "start"] == list(range(10))


def test_arrival_times_are_honoured_and_keep_their_order():
    offsets = [0.0, 0.0, 0.02, 0.02, 0.05, 0.06]
    started: dict[int, float] = {}

    async def main() -> RequestPool:
        loop = asyncio.get_running_loop()
        pool = RequestPool(len(offsets), limit=2, offsets_s=offsets)

        async def work(i: int) -> None:
            started[i] = loop.time()
            await asyncio.sleep(0.01)

        t0 = loop.time()
        await pool.run(work)
        for i, at in started.items():
            assert at - t0 >= offsets[i] - 1e-3, (i, at - t0)  # never before its arrival time
        return pool

    pool = asyncio.run(main())
    assert list(started) == list(range(len(offsets)))
    assert pool.max_workers <= 2


def test_stop_cancels_the_running_and_starts_nothing_more():
    started: list[int] = []
    cancelled: list[int] = []

    async def main() -> RequestPool:
        pool = RequestPool(10, limit=2)

        async def work(i: int) -> None:
            started.append(i)
            if i == 0:
                return
            if i == 2:
                pool.stop("enough")
                return
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.append(i)
                raise

        await pool.run(work)
        return pool

    pool = asyncio.run(main())
    assert pool.stopped == "enough"
    assert started == [0, 1, 2] and cancelled == [1]


def test_a_deadline_stops_the_run():
    async def main() -> RequestPool:
        pool = RequestPool(4, limit=1)

        async def work(i: int) -> None:
            await asyncio.sleep(10)

        await pool.run(work, deadline_s=0.05)
        return pool

    pool = asyncio.run(main())
    assert pool.stopped is not None and "deadline of 0.05 s passed" in pool.stopped
    assert pool.started == 1


def test_bad_arguments_say_what_to_give():
    with pytest.raises(ValueError, match="limit must be >= 1"):
        RequestPool(3, limit=0)
    with pytest.raises(ValueError, match="give one per request"):
        RequestPool(3, limit=1, offsets_s=[0.0])


def settings(url: str, conc: int | None) -> ClientSettings:
    return ClientSettings(url=url, model="ok", max_concurrency=conc, timeout_s=10.0, progress=False)


def test_a_run_holds_tasks_for_its_concurrency_not_for_its_prompts(server: Loopback):
    """vLLM's model (and ours before): one task per prompt, all created before the first request left."""
    workload = make_workload(num_prompts=300, input_len=4, output_len=3, range_ratio=0.0, dataset=None, seed=0)
    most = 0

    async def main() -> None:
        def seen(_rec: Any) -> None:
            nonlocal most
            most = max(most, len(asyncio.all_tasks()))

        async with StreamPool() as streams:
            records, duration, stopped = await run_requests(streams, settings(server.url, 4), workload.requests,
                                                            on_done=seen)
        assert stopped is None and all(r.ok for r in records) and duration > 0
        assert [r.index for r in records] == list(range(300))

    asyncio.run(main())
    assert most <= 4 + 6, most  # the workers, the run itself and a few of the loop's own: never one per prompt


def test_the_collector_is_quiet_inside_a_run_and_put_back_after(server: Loopback):
    workload = make_workload(num_prompts=6, input_len=4, output_len=3, range_ratio=0.0, dataset=None, seed=0)
    inside: list[bool] = []
    before = collector_state()

    async def main() -> None:
        async with StreamPool() as streams:
            await run_requests(streams, settings(server.url, 2), workload.requests,
                               on_done=lambda _r: inside.append(gc.isenabled()))

    asyncio.run(main())
    assert inside and not any(inside)
    assert collector_state() == before


def test_the_collector_state_is_restored_after_an_error_and_nothing_is_collected_or_frozen():
    before = collector_state()
    collections = gc.get_stats()[2]["collections"]
    gc.set_threshold(1234, 11, 12)
    try:
        with pytest.raises(RuntimeError, match="boom"), quiet_collector():
            assert not gc.isenabled() and gc.get_freeze_count() == before.frozen
            raise RuntimeError("boom")
        assert collector_state() == type(before)(before.enabled, (1234, 11, 12), before.frozen)
        gc.disable()
        with quiet_collector():
            pass
        assert not gc.isenabled()  # a collector the caller had disabled stays disabled
        # no full pass on either side: a run does not pay for scanning its caller's heap (about 250 ms in pytest)
        assert gc.get_stats()[2]["collections"] == collections
    finally:
        gc.set_threshold(*before.thresholds)
        if before.enabled:
            gc.enable()
    assert collector_state() == before


def test_a_run_at_a_request_rate_sends_in_order_never_early_with_few_workers(server: Loopback):
    workload = make_workload(num_prompts=12, input_len=4, output_len=3, range_ratio=0.0, dataset=None, seed=0)
    offsets = arrival_offsets(12, 100.0, 1.0, 0)  # Poisson at 100 req/s, seeded

    async def main() -> tuple[float, list[Any]]:
        async with StreamPool() as streams:
            t0 = time.perf_counter()
            records, _, stopped = await run_requests(streams, settings(server.url, 64), workload.requests,
                                                     offsets_s=offsets)
        assert stopped is None and all(r.ok for r in records)
        return t0, records

    t0, records = asyncio.run(main())
    sends = [r.send_time for r in records]
    assert sends == sorted(sends)
    assert all(s >= t0 + off for s, off in zip(sends, offsets, strict=True))


def test_starts_over_a_slice_budget_wait_for_the_next_release_and_keep_their_order(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(StartTurns, "BUDGET_S", 1e-9)  # a slice holds one start: the re-wait path each time
    started: list[int] = []

    async def work(i: int) -> None:
        started.append(i)
        await asyncio.sleep(0)

    pool = RequestPool(30, limit=10)
    asyncio.run(pool.run(work))
    assert started == list(range(30))

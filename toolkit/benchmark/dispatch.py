"""Send a workload on its schedule, under the concurrency cap, and never wait without bound.

vLLM's client waits for every request: against a server that answers nothing, ``num_prompts x timeout``
(17 hours at the defaults). Here a run has a deadline and stops once its first requests all failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

from toolkit.benchmark.client import DEFAULT_HEADERS, ClientSettings, encode_body, stream_request
from toolkit.benchmark.collector import quiet_collector
from toolkit.benchmark.metrics import RequestRecord
from toolkit.benchmark.request_pool import RequestPool
from toolkit.benchmark.wire import StreamPool
from toolkit.benchmark.workload import RequestSpec

__all__ = ["run_requests", "not_run"]


def not_run(index: int, prompt_len: int, reason: str) -> RequestRecord:
    """The record of a request that was never sent, or was cut off by the benchmark itself."""
    now = time.perf_counter()
    return RequestRecord(send_time=now, chunk_times=(), end_time=now, prompt_tokens=prompt_len, output_tokens=0,
                         output_tokens_source="chunks", error=reason, index=index)


async def run_requests(streams: StreamPool, settings: ClientSettings, specs: Sequence[RequestSpec], *,
                       offsets_s: Sequence[float] | None = None,
                       on_done: Callable[[RequestRecord], None] | None = None,
                       headers: Mapping[str, str] = DEFAULT_HEADERS, deadline_s: float | None = None,
                       stop_after_failures: int = 0) -> tuple[list[RequestRecord], float, str | None]:
    """Send ``specs`` on the schedule ``offsets_s`` under the concurrency cap; never wait without bound.

    Returns the records in request order (failed ones for requests cut off or never sent), the duration as
    vLLM measures it, and why it stopped early: ``deadline_s``, or the first ``stop_after_failures`` failed.
    """
    bodies = [encode_body(settings, s) for s in specs]  # encoded before the clock starts
    chat = settings.endpoint == "chat"
    url = settings.api_url
    records: list[RequestRecord | None] = [None] * len(specs)
    failures_first: list[bool] = []  # ok/failed of the first requests to finish
    pool = RequestPool(len(specs), limit=settings.max_concurrency, offsets_s=offsets_s)

    async def one(i: int) -> None:
        try:
            rec = await stream_request(streams, url, bodies[i], chat=chat, timeout_s=settings.timeout_s,
                                       index=i, prompt_len=specs[i].prompt_len,
                                       max_tokens=specs[i].output_len, headers=headers)
        except asyncio.CancelledError:
            if pool.stopped is None:
                raise  # cancelled from outside (Ctrl-C): not ours to swallow
            rec = not_run(i, specs[i].prompt_len, f"not finished: {pool.stopped}")
        records[i] = rec
        if stop_after_failures and len(failures_first) < stop_after_failures and pool.stopped is None:
            failures_first.append(rec.ok)
            if len(failures_first) == stop_after_failures and not any(failures_first):
                pool.stop(f"the first {stop_after_failures} requests all failed (first error: {rec.error})")
        if on_done is not None:
            on_done(rec)

    with quiet_collector():
        await pool.run(one, deadline_s=deadline_s)
        finished = time.perf_counter()
    reason = pool.stopped
    out = [rec if rec is not None else not_run(i, specs[i].prompt_len, f"not sent: {reason}")
           for i, rec in enumerate(records)]
    # the last request's own end: this coroutine's wake-up is the client's time, not the server's
    end = max(r.end_time for r in out) if out and reason is None else finished
    return out, end - pool.start, reason

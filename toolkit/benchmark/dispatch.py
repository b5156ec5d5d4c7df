"""Send a workload on its schedule, under the concurrency cap, and never wait without bound.

vLLM's client releases requests on an arrival schedule behind a semaphore and waits for all
of them. Against a server that answers nothing, that is ``num_prompts x timeout`` (17 hours at
the defaults). Here a run also has a deadline and stops itself once its first requests have all
failed; the requests it cut off, or never sent, are failed records that say why.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp

from toolkit.benchmark.client import DEFAULT_HEADERS, ClientSettings, encode_body, stream_request
from toolkit.benchmark.metrics import RequestRecord
from toolkit.benchmark.workload import RequestSpec

__all__ = ["run_requests", "not_run"]


def not_run(index: int, prompt_len: int, reason: str) -> RequestRecord:
    """The record of a request that was never sent, or was cut off by the benchmark itself."""
    now = time.perf_counter()
    return RequestRecord(send_time=now, chunk_times=(), end_time=now, prompt_tokens=prompt_len, output_tokens=0,
                         output_tokens_source="chunks", error=reason, index=index)


async def run_requests(
    session: aiohttp.ClientSession,
    settings: ClientSettings,
    specs: Sequence[RequestSpec],
    *,
    offsets_s: Sequence[float] | None = None,
    on_done: Callable[[RequestRecord], None] | None = None,
    headers: Mapping[str, str] = DEFAULT_HEADERS,
    deadline_s: float | None = None,
    stop_after_failures: int = 0,
) -> tuple[list[RequestRecord], float, str | None]:
    """Send ``specs`` on the schedule ``offsets_s`` under the concurrency cap; never wait without bound.

    Returns the records in request order, the duration as vLLM measures it (from just before the
    first request is released to the last one finishing), and why the run was cut short, if it was:
    ``deadline_s`` (seconds from the start) ends whatever is still running; ``stop_after_failures=N``
    stops everything once the first N requests to finish have all failed (a server that answers
    nothing must not be asked 1,000 times). Requests cut off or never sent are failed records.
    """
    bodies = [encode_body(settings, s) for s in specs]  # encoded before the clock starts
    limit: AbstractAsyncContextManager[Any] = (
        asyncio.Semaphore(settings.max_concurrency) if settings.max_concurrency else contextlib.nullcontext()
    )
    chat = settings.endpoint == "chat"
    url = settings.api_url
    records: list[RequestRecord | None] = [None] * len(specs)
    stopped: list[str] = []  # why the benchmark stopped itself, once it did
    failures_first: list[bool] = []  # ok/failed of the first requests to finish
    tasks: list[asyncio.Task[None]] = []

    def stop(reason: str) -> None:
        if not stopped:
            stopped.append(reason)
            for task in tasks:
                task.cancel()

    async def one(i: int) -> None:
        try:
            async with limit:
                if stopped:
                    raise asyncio.CancelledError
                rec = await stream_request(session, url, bodies[i], chat=chat, timeout_s=settings.timeout_s,
                                           index=i, prompt_len=specs[i].prompt_len,
                                           max_tokens=specs[i].output_len, headers=headers)
        except asyncio.CancelledError:
            if not stopped:
                raise  # cancelled from outside (Ctrl-C): not ours to swallow
            rec = not_run(i, specs[i].prompt_len, f"not finished: {stopped[0]}")
        records[i] = rec
        if stop_after_failures and len(failures_first) < stop_after_failures and not stopped:
            failures_first.append(rec.ok)
            if len(failures_first) == stop_after_failures and not any(failures_first):
                stop(f"the first {stop_after_failures} requests all failed (first error: {rec.error})")
        if on_done is not None:
            on_done(rec)

    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    end_by = None if deadline_s is None else start + deadline_s
    try:
        for i in range(len(specs)):
            if stopped:
                break
            if offsets_s is not None and offsets_s[i] > 0:
                delay = start + offsets_s[i] - time.perf_counter()
                if end_by is not None and start + offsets_s[i] > end_by:
                    stop(f"the benchmark's deadline of {deadline_s:g} s passed before every request was sent")
                    break
                if delay > 0:
                    await asyncio.sleep(delay)
            tasks.append(loop.create_task(one(i)))
        if tasks:
            timeout = None if end_by is None else max(0.0, end_by - time.perf_counter())
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            if pending:
                stop(f"the benchmark's deadline of {deadline_s:g} s passed (deadline_s=...; derived from the warm-up"
                     " unless given)")
                await asyncio.wait(pending)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    duration = time.perf_counter() - start
    reason = stopped[0] if stopped else None
    out = [rec if rec is not None else not_run(i, specs[i].prompt_len, f"not sent: {reason}")
           for i, rec in enumerate(records)]
    return out, duration, reason

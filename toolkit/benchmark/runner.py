"""``bench()``: the one call a notebook makes; warm up, run, ask the server, summarise.

Inside Jupyter's running loop it runs on its own loop (uvloop when installed) in a joined worker thread."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import statistics
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

import aiohttp
import pandas as pd

from toolkit.benchmark.client import DEFAULT_HEADERS, ClientSettings
from toolkit.benchmark.dispatch import run_requests
from toolkit.benchmark.load import Load
from toolkit.benchmark.log_evidence import collect_evidence, log_mark
from toolkit.benchmark.metrics import SUMMARY_KEYS, RequestRecord, parse_goodput_slos, summarize
from toolkit.benchmark.result import BenchResult, requests_frame, spread_frame
from toolkit.benchmark.server_view import LogMetricSource, build_server_view
from toolkit.benchmark.side_reads import fetch_snapshot, first_model
from toolkit.benchmark.tokens import TokenCounter, fit_prompts
from toolkit.benchmark.wire import StreamPool
from toolkit.benchmark.workload import Workload, arrival_offsets, make_workload, warmup_requests
from toolkit.errors import BenchmarkFailed
from toolkit.progress import progress_bar
from toolkit.server.http import metrics_route
from toolkit.server.server import MultiNodeServer, Server

__all__ = ["bench", "bench_async", "resolve_url"]

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True)
class SnapshotPaths:
    """The endpoints whose figures a run reads before and after (only those the engine serves)."""

    metrics: str | None = "/metrics"
    info: tuple[str, ...] = ("/server_info", "/get_server_info")


def resolve_url(target: Server | MultiNodeServer | str) -> str:
    """A base URL from a string or a toolkit ``Server``."""
    url = target.url if isinstance(target, Server | MultiNodeServer) else target
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"bench() needs a URL like 'http://127.0.0.1:8000' or a Server with .url, "
                         f"got {target!r}")
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


async def bench_async(target: Any, load: Load | None = None, *, model: str | None = None, repeats: int = 1,
                      progress: bool = True, timeout_s: float = 600.0, deadline_s: float | None = None,
                      tokenizer: str | None = "server", api_key: str | None = None,
                      server_log: LogMetricSource | None = None,
                      stop_after_failures: int | None = None) -> BenchResult:
    """Benchmark an OpenAI-compatible server as ``vllm bench serve`` would; return a BenchResult.

    ``target``: a URL or a ``Server`` (its API key sent, only its release's endpoints read). ``model=None``:
    the first id of ``/v1/models``. ``tokenizer`` counts ``input_len``: ``"server"`` (its ``/tokenize``,
    else words, said so), a ``tokenizer.json`` path, or ``None`` (words). ``repeats=N``: ``.runs``,
    ``.spread``, median summary. Every wait is bounded: ``timeout_s`` per request and per side read,
    ``deadline_s`` per run (default: 4x the warm-up's prediction plus a minute; a given one also covers
    finding the model and fitting the prompts); :class:`~toolkit.errors.BenchmarkFailed` when every warm-up
    request or the first ``stop_after_failures`` (default max(3, concurrency)) fail. A response longer than
    ``max_tokens`` allows, or an SSE event over 8 MiB, is a failed request (``result.errors``).

    Example (``bench`` is the blocking twin)::

        r = bench("http://127.0.0.1:8000", Load(num_prompts=64, max_concurrency=8), progress=False)
        r.summary["median_itl_ms"], r.requests.head()
    """
    load = Load() if load is None else load
    num_prompts, max_concurrency, request_rate = load.num_prompts, load.max_concurrency, load.request_rate
    if repeats < 1 or not timeout_s > 0:
        raise ValueError(f"repeats must be >= 1 and timeout_s > 0, got repeats={repeats}, "
                         f"timeout_s={timeout_s}")
    if deadline_s is not None and not deadline_s > 0:
        raise ValueError(f"deadline_s must be positive seconds, got {deadline_s}")
    url = resolve_url(target)
    server = target.head if isinstance(target, MultiNodeServer) else target if isinstance(target, Server) else None
    if api_key is None and server is not None:
        api_key = server.spec.api_key()  # the key the launch demands; redacted wherever the spec is recorded
    profile = server.release().profile if server is not None else None
    snapshot = (SnapshotPaths(metrics_route(server.spec, profile), profile.info_paths)
                if server is not None and profile is not None else SnapshotPaths())
    workload = make_workload(num_prompts=num_prompts, input_len=load.input_len, output_len=load.output_len,
                             range_ratio=load.range_ratio, dataset=load.dataset, seed=load.seed)
    offsets = arrival_offsets(num_prompts, request_rate, load.burstiness, load.seed)
    slos = parse_goodput_slos(load.goodput)
    headers = dict(DEFAULT_HEADERS, **({"Authorization": f"Bearer {api_key}"} if api_key else {}))
    n_warm = (max_concurrency or min(num_prompts, 64)) if load.warmup is None else load.warmup
    side_timeout_s = min(timeout_s, 30.0)  # a side answer waits no longer than a request may
    prepared_at = time.monotonic()
    before_line = log_mark(server) if server is not None else 0
    async with aiohttp.ClientSession() as aux, StreamPool() as streams:
        try:
            async with asyncio.timeout(deadline_s):  # the deadline covers finding the model and fitting prompts
                if model is None:
                    model = await first_model(aux, url, headers, side_timeout_s)
                if tokenizer is not None and workload.kind == "random":
                    counter = await TokenCounter.open(tokenizer, aux, url, model, headers, side_timeout_s)
                    workload = await fit_prompts(workload, counter, load.seed)
        except TimeoutError:
            if deadline_s is None or time.monotonic() - prepared_at < deadline_s:
                raise
            raise BenchmarkFailed(f"the deadline of {deadline_s:g} s (deadline_s) passed while the model was looked up "
                                  "and the prompts were fitted to token lengths, before any request was sent",
                                  hint="raise deadline_s, pass model=..., or pass tokenizer=None (prompt lengths in "
                                       "words) or a tokenizer.json path") from None
        if deadline_s is not None:
            deadline_s = max(deadline_s - (time.monotonic() - prepared_at), 1e-3)
        settings = ClientSettings(
            url=url, model=model, endpoint=load.endpoint, max_concurrency=max_concurrency, seed=load.seed,
            request_rate=request_rate, burstiness=load.burstiness, warmup=n_warm, ignore_eos=load.ignore_eos,
            temperature=load.temperature, timeout_s=timeout_s, progress=progress, repeats=repeats,
            extra_body=tuple((load.extra_body or {}).items()), goodput_slos_ms=tuple(slos.items()))
        warm = warmup_requests(workload, n_warm, output_len_cap=settings.warmup_output_len)
        warm_errors: tuple[str, ...] = ()
        budget_s = deadline_s
        if warm:
            warm_records, _, _ = await run_requests(streams, settings, warm, headers=headers,
                                                    deadline_s=timeout_s * 2 + 60)
            warm_errors = tuple(r.error for r in warm_records if r.error)
            if not any(r.ok for r in warm_records):
                raise BenchmarkFailed(
                    f"the warm-up failed: all {len(warm_records)} warm-up requests to {url} failed, so the benchmark "
                    "did not run",
                    evidence=[f"request {r.index}: {r.error}" for r in warm_records[:5]],
                    hint="read the first error: a server that is not ready (wait_ready first), a wrong model name "
                         "(model=...), a missing API key (api_key=...), or a server that streams nothing",
                )
            if budget_s is None:
                budget_s = derived_deadline_s(warm_records, workload, max_concurrency, request_rate, timeout_s)
        elif budget_s is None:
            budget_s = timeout_s * math.ceil(num_prompts / (max_concurrency or num_prompts)) + 60
        first_n = stop_after_failures if stop_after_failures is not None else max(3, max_concurrency or 3)
        runs = [await _one_run(streams, aux, settings, workload, offsets, headers, slos, server_log,
                               warm_errors, snapshot, deadline_s=budget_s,
                               label=f"bench {k + 1}/{repeats}" if repeats > 1 else "bench",
                               stop_after_failures=min(first_n, num_prompts)) for k in range(repeats)]
    result = runs[0] if repeats == 1 else _combine(runs)  # with a Server: what its log said (benchmark/log_evidence.py)
    return result if server is None else dataclasses.replace(
        result, evidence=collect_evidence(server, before_line, result.started_at))


async def _one_run(streams: StreamPool, aux: aiohttp.ClientSession, settings: ClientSettings,
                   workload: Workload, offsets: Sequence[float], headers: Mapping[str, str],
                   slos: Mapping[str, float], server_log: LogMetricSource | None,
                   warm_errors: tuple[str, ...], snapshot: SnapshotPaths, *, label: str, deadline_s: float,
                   stop_after_failures: int) -> BenchResult:
    before = await fetch_snapshot(aux, settings.url, metrics_path=snapshot.metrics, info_paths=snapshot.info,
                                  headers=headers, timeout_s=min(5.0, settings.timeout_s))
    bar = progress_bar(total=len(workload.requests), desc=label, unit="req", disable=not settings.progress)
    started = time.time()
    try:
        records, duration, stopped = await run_requests(
            streams, settings, workload.requests, offsets_s=offsets, on_done=lambda _r: bar.update(1),
            headers=headers, deadline_s=deadline_s, stop_after_failures=stop_after_failures)
    finally:
        bar.close()
    if stopped is not None and not any(r.ok for r in records):
        raise BenchmarkFailed(
            f"the benchmark stopped: {stopped}",
            evidence=[f"request {r.index}: {r.error}" for r in records if r.error][:5],
            hint="the server answered no request of this run: read its log (server.log_tail()) and the first error",
        )
    ended = time.time()
    after = await fetch_snapshot(aux, settings.url, metrics_path=snapshot.metrics, info_paths=snapshot.info,
                                 headers=headers, timeout_s=min(5.0, settings.timeout_s))
    view = build_server_view(before, after, records, log_source=server_log,
                             since=datetime.fromtimestamp(started), until=datetime.fromtimestamp(ended))
    summary = summarize(records, duration, goodput_slos_ms=slos, accept_length=view.accept_length)
    return BenchResult(summary=summary, requests=requests_frame(records), workload=workload,
                       settings=settings, server_view=view, records=tuple(records), started_at=started,
                       warmup_errors=warm_errors)


def derived_deadline_s(warm: Sequence[RequestRecord], workload: Workload, max_concurrency: int | None,
                       request_rate: float, timeout_s: float) -> float:
    """A run's deadline from the warm-up's speed: 4x the predicted duration (rounds of ``max_concurrency``
    requests, or the arrival span if longer) plus a minute: it ends a stalled run, not a slow one."""
    ok = [r for r in warm if r.ok]
    ttft = statistics.median(r.chunk_times[0] - r.send_time for r in ok)
    gaps = [(r.chunk_times[-1] - r.chunk_times[0]) / max(len(r.chunk_times) - 1, 1) for r in ok]
    per_token = statistics.median(gaps) if gaps else ttft
    longest = max(r.output_len for r in workload.requests)
    per_request = min(timeout_s, ttft * 2 + longest * max(per_token, 1e-3))
    rounds = math.ceil(len(workload.requests) / (max_concurrency or len(workload.requests)))
    span = 0.0 if math.isinf(request_rate) else len(workload.requests) / request_rate
    return 60.0 + 4.0 * max(rounds * per_request, span + per_request)


def _combine(runs: list[BenchResult]) -> BenchResult:
    """Repeats: the per-metric median as the summary, every run kept, the spread beside."""
    spread = spread_frame([r.summary for r in runs])
    summary = {k: (spread.at[k, "median"] if k in spread.index else runs[0].summary[k]) for k in SUMMARY_KEYS}
    frames = [r.requests.assign(run=i + 1) for i, r in enumerate(runs)]
    last = runs[-1]
    return BenchResult(summary=summary, requests=pd.concat(frames, ignore_index=True), workload=last.workload,
                       settings=last.settings, server_view=last.server_view, started_at=runs[0].started_at,
                       warmup_errors=runs[0].warmup_errors, runs=tuple(runs), spread=spread)


def _run_coroutine(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run on a fresh loop (uvloop when installed); in a worker thread if one is running here."""
    try:
        import uvloop

        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover
        loop_factory = None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(factory())
    box: dict[str, Any] = {}

    def work() -> None:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            box["loop"] = runner.get_loop()
            try:  # a wrong keyword fails in factory(): it too is the caller's error, not a lost thread
                task = box["task"] = runner.get_loop().create_task(factory())
                box["value"] = runner.run(_await(task))
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc

    worker = threading.Thread(target=work, name="toolkit-bench", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        if "loop" in box and "task" in box:
            box["loop"].call_soon_threadsafe(box["task"].cancel)
        worker.join()
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _await(task: asyncio.Task[T]) -> T:
    return await task


def blocking(coroutine_function: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of a coroutine function, with the same signature (shown by ``help``)."""

    @functools.wraps(coroutine_function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return _run_coroutine(lambda: coroutine_function(*args, **kwargs))

    return run


#: :func:`bench_async` for notebooks and scripts: the same arguments, declared once there.
bench = blocking(bench_async)
bench.__name__ = bench.__qualname__ = "bench"


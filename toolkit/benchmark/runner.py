"""``bench()``: the one call a notebook makes; warm up, run, ask the server, summarise.

It works from a plain script and from inside Jupyter's running event loop: there it
runs the benchmark on its own loop in a worker thread that it joins (an interrupt
cancels the run). uvloop drives that loop when it is installed.
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

import aiohttp
import pandas as pd
from tqdm.auto import tqdm

from toolkit.benchmark.client import DEFAULT_HEADERS, ClientSettings, Endpoint, make_session, run_requests
from toolkit.benchmark.metrics import SUMMARY_KEYS, parse_goodput_slos, summarize
from toolkit.benchmark.result import BenchResult, requests_frame, spread_frame
from toolkit.benchmark.server_view import LogMetricSource, build_server_view, fetch_snapshot
from toolkit.benchmark.workload import Workload, arrival_offsets, make_workload, warmup_requests
from toolkit.errors import ToolkitError
from toolkit.server.server import MultiNodeServer, Server

__all__ = ["bench", "bench_async", "resolve_url"]

T = TypeVar("T")
P = ParamSpec("P")
ENDPOINTS = ("completions", "chat")


def resolve_url(target: Server | MultiNodeServer | str) -> str:
    """A base URL from a string or a toolkit ``Server``."""
    url = target.url if isinstance(target, Server | MultiNodeServer) else target
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(
            f"bench() needs a URL like 'http://127.0.0.1:8000' or a Server with .url, got {target!r}"
        )
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


async def _first_model(session: aiohttp.ClientSession, url: str, headers: Mapping[str, str]) -> str:
    try:
        async with session.get(
            f"{url}/v1/models", headers=headers, timeout=aiohttp.ClientTimeout(total=30)
        ) as r:
            body = await r.text()
            if r.status != 200:
                raise ToolkitError(
                    f"{url}/v1/models answered HTTP {r.status}, so no model name could be found",
                    evidence=[body[:300]],
                    hint="pass model=... (or --model)",
                )
            data = (await r.json(content_type=None)).get("data") or []
            return str(data[0]["id"])
    except ToolkitError:
        raise
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise ToolkitError(
            f"could not list the models at {url}/v1/models: {type(exc).__name__}: {exc}",
            hint="check the server is up at that URL, or pass model=... (or --model)",
        ) from exc


async def bench_async(
    target: Any,
    *,
    model: str | None = None,
    endpoint: Endpoint = "completions",
    num_prompts: int = 100,
    max_concurrency: int | None = 1,
    input_len: int | None = 1024,
    output_len: int | None = 128,
    range_ratio: float = 0.0,
    request_rate: float = math.inf,
    burstiness: float = 1.0,
    warmup: int | None = None,
    ignore_eos: bool = True,
    timeout_s: float = 600.0,
    dataset: str | None = None,
    progress: bool = True,
    repeats: int = 1,
    seed: int = 0,
    goodput: str | Sequence[str] | Mapping[str, float] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    temperature: float = 0.0,
    server_log: LogMetricSource | Callable[[datetime, datetime], Iterable[Any]] | None = None,
    api_key: str | None = None,
) -> BenchResult:
    """Benchmark an OpenAI-compatible server as ``vllm bench serve`` would; return a BenchResult.

    ``target`` is a URL or a toolkit ``Server``; ``model=None`` takes the first id from
    ``/v1/models``. ``endpoint`` is ``"completions"`` or ``"chat"``. Lengths: ``input_len``
    in *words* (no tokenizer), ``output_len`` in tokens (``max_tokens``, with ``ignore_eos``);
    ``range_ratio`` follows vLLM (0 = fixed; SGLang's 0 would mean uniform in [1, N]).
    ``request_rate`` (req/s, ``inf`` = all at once) with ``burstiness`` (gamma shape, 1 =
    Poisson). ``warmup=None`` first sends a full batch (``max_concurrency`` requests of at
    most 32 tokens, fresh prompts), outside the results. ``dataset``: a prompt file (one
    per line) or ShareGPT ``.json``. ``repeats=N``: ``.runs`` and ``.spread`` (95 % t
    intervals); ``summary`` is then the median. ``goodput="ttft:200 tpot:50"``: vLLM's
    request goodput. ``server_log``: a callable or object with ``.metric_rows(since,
    until)``, read for the run's window. Failed requests are counted with their error
    (``result.errors``); only bad arguments, or no model name to be had, raise.

    Example (``bench`` is the blocking twin; ``await bench_async(...)`` in async code)::

        r = bench("http://127.0.0.1:8000", num_prompts=64, max_concurrency=8,
                  input_len=32, output_len=512, progress=False)
        r.summary["median_itl_ms"], r.requests.head()
    """
    if endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1 (or None for unlimited), got {max_concurrency}")
    if repeats < 1 or not timeout_s > 0:
        raise ValueError(
            f"repeats must be >= 1 and timeout_s > 0, got repeats={repeats}, timeout_s={timeout_s}"
        )
    url = resolve_url(target)
    workload = make_workload(
        num_prompts=num_prompts,
        input_len=input_len,
        output_len=output_len,
        range_ratio=range_ratio,
        dataset=dataset,
        seed=seed,
    )
    offsets = arrival_offsets(num_prompts, request_rate, burstiness, seed)
    slos = parse_goodput_slos(goodput)
    headers = dict(DEFAULT_HEADERS, **({"Authorization": f"Bearer {api_key}"} if api_key else {}))
    n_warm = (max_concurrency or min(num_prompts, 64)) if warmup is None else warmup
    async with aiohttp.ClientSession() as aux, make_session(max_concurrency) as session:
        if model is None:
            model = await _first_model(aux, url, headers)
        settings = ClientSettings(
            url=url,
            model=model,
            endpoint=endpoint,
            max_concurrency=max_concurrency,
            request_rate=request_rate,
            burstiness=burstiness,
            warmup=n_warm,
            ignore_eos=ignore_eos,
            temperature=temperature,
            timeout_s=timeout_s,
            extra_body=tuple((extra_body or {}).items()),
            goodput_slos_ms=tuple(slos.items()),
            progress=progress,
            seed=seed,
            repeats=repeats,
        )
        warm = warmup_requests(workload, n_warm, output_len_cap=settings.warmup_output_len)
        warm_errors: tuple[str, ...] = ()
        if warm:
            warm_records, _ = await run_requests(session, settings, warm, headers=headers)
            warm_errors = tuple(r.error for r in warm_records if r.error)
        runs = []
        for k in range(repeats):
            runs.append(
                await _one_run(
                    session,
                    aux,
                    settings,
                    workload,
                    offsets,
                    headers,
                    slos,
                    server_log,
                    warm_errors,
                    label=f"bench {k + 1}/{repeats}" if repeats > 1 else "bench",
                )
            )
    return runs[0] if repeats == 1 else _combine(runs)


async def _one_run(
    session: aiohttp.ClientSession,
    aux: aiohttp.ClientSession,
    settings: ClientSettings,
    workload: Workload,
    offsets: Sequence[float],
    headers: Mapping[str, str],
    slos: Mapping[str, float],
    server_log: LogMetricSource | None,
    warm_errors: tuple[str, ...],
    *,
    label: str,
) -> BenchResult:
    before = await fetch_snapshot(aux, settings.url)
    bar = tqdm(
        total=len(workload.requests), desc=label, unit="req", disable=not settings.progress, leave=False
    )
    started = time.time()
    try:
        records, duration = await run_requests(
            session,
            settings,
            workload.requests,
            offsets_s=offsets,
            on_done=lambda _r: bar.update(1),
            headers=headers,
        )
    finally:
        bar.close()
    ended = time.time()
    after = await fetch_snapshot(aux, settings.url)
    view = build_server_view(
        before,
        after,
        records,
        log_source=server_log,
        since=datetime.fromtimestamp(started),
        until=datetime.fromtimestamp(ended),
    )
    summary = summarize(records, duration, goodput_slos_ms=slos, accept_length=view.accept_length)
    return BenchResult(
        summary=summary,
        requests=requests_frame(records),
        workload=workload,
        settings=settings,
        server_view=view,
        records=tuple(records),
        started_at=started,
        warmup_errors=warm_errors,
    )


def _combine(runs: list[BenchResult]) -> BenchResult:
    """Repeats: the per-metric median as the summary, every run kept, the spread beside."""
    spread = spread_frame([r.summary for r in runs])
    summary = {k: (spread.at[k, "median"] if k in spread.index else runs[0].summary[k]) for k in SUMMARY_KEYS}
    frames = [r.requests.assign(run=i + 1) for i, r in enumerate(runs)]
    last = runs[-1]
    return BenchResult(
        summary=summary,
        requests=pd.concat(frames, ignore_index=True),
        workload=last.workload,
        settings=last.settings,
        server_view=last.server_view,
        started_at=runs[0].started_at,
        warmup_errors=runs[0].warmup_errors,
        runs=tuple(runs),
        spread=spread,
    )


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
            task = box["task"] = runner.get_loop().create_task(factory())
            try:
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


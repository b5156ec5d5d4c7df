"""Real values for journal tests: BenchResults built from request records, readiness reports from a
tracker, classified SGLang log lines. No stand-ins: the journal takes the toolkit's own types.

    >>> bench_result(82.5).summary["output_throughput"]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from toolkit.benchmark.client import ClientSettings
from toolkit.benchmark.metrics import RequestRecord, summarize
from toolkit.benchmark.result import BenchResult, requests_frame
from toolkit.benchmark.runner import _combine as combine_repeats  # how bench(repeats=N) combines its runs
from toolkit.benchmark.server_view import ServerView
from toolkit.benchmark.workload import make_workload
from toolkit.logs import LogEvent, MetricRow, classify_lines
from toolkit.server.readiness import ReadinessReport, ReadinessTracker

GLMASR = ("[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: "
          "cannot import name 'GlmAsrConfig' from 'transformers'")
READY = "[2026-02-26 20:31:02] The server is fired up and ready to roll!"
OOM = "[2026-02-26 20:26:09 TP3] RuntimeError: CUDA error: out of memory"


def bench_result(
    tok_s: float, *, n: int = 4, output_tokens: int = 16, ttft_ms: tuple[float, float] = (100.0, 130.0),
    itl_ms: float = 10.0, accept_length: float | None = None, error: str | None = None, model: str = "sim-model",
    max_concurrency: int | None = 1,
) -> BenchResult:
    """A one-run result whose output tok/s is ``tok_s``: ``n`` requests one after another.

    Request ``i`` has a TTFT spread evenly over ``ttft_ms`` and ``output_tokens`` chunks
    ``itl_ms`` apart; ``error`` makes the last request fail with that text.
    """
    records = []
    start = 0.0
    for i in range(n):
        ttft = (ttft_ms[0] + (ttft_ms[1] - ttft_ms[0]) * i / max(n - 1, 1)) / 1000.0
        failed = error is not None and i == n - 1
        chunks = () if failed else tuple(start + ttft + k * itl_ms / 1000.0 for k in range(output_tokens))
        end = (chunks[-1] if chunks else start + ttft) + 0.001
        records.append(RequestRecord(send_time=start, chunk_times=chunks, end_time=end, prompt_tokens=32,
                                     output_tokens=0 if failed else output_tokens, output_tokens_source="usage",
                                     error=error if failed else None, index=i))
        start = end
    done = sum(r.output_tokens for r in records)
    summary = summarize(records, done / tok_s, accept_length=accept_length)
    view = ServerView(accept_length=accept_length, accept_length_source=None if accept_length is None else "server_info")
    return BenchResult(
        summary=summary, requests=requests_frame(records),
        workload=make_workload(num_prompts=n, input_len=32, output_len=output_tokens),
        settings=ClientSettings(url="http://127.0.0.1:30000", model=model, progress=False,
                                max_concurrency=max_concurrency),
        server_view=view, records=tuple(records), started_at=1_772_136_000.0,
    )


def repeated(*tok_s: float, **options: float) -> BenchResult:
    """A result with ``runs``, as ``bench(..., repeats=len(tok_s))`` returns it."""
    return combine_repeats([bench_result(value, **options) for value in tok_s])  # type: ignore[arg-type]


def readiness(*lines: str, ready_after_s: float | None = 312.5) -> ReadinessReport:
    """A start-up report from a real tracker fed classified ``lines`` (and a passing probe, unless None)."""
    tracker = ReadinessTracker(started_at=0.0)
    for at, event in enumerate(classify_lines(list(lines), engine="sglang"), start=1):
        tracker.observe(event, at=float(at))
    if ready_after_s is not None:
        tracker.probe(True, "POST /generate 200", proves_generation=True, at=ready_after_s)
    return tracker.report()


def decode_line(tok_s: float, accept: float, second: int, rank: str = "TP0") -> str:
    minute, sec = divmod(second, 60)
    return (f"[2026-02-26 20:{27 + minute:02d}:{sec:02d} {rank}] Decode batch. #running-req: 1, #token: 1234, "
            f"token usage: 0.01, accept len: {accept:.2f}, cuda graph: True, gen throughput (token/s): {tok_s:.2f}, "
            "#queue-req: 0")


def events(*lines: str) -> list[LogEvent]:
    return classify_lines(list(lines), engine="sglang")


def metric_rows(lines: Sequence[str]) -> list[MetricRow]:
    return [event.metric for event in events(*lines) if event.metric is not None]

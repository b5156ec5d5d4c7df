"""``BenchResult``: a run's summary, its requests, and exactly how it was produced; it renders itself.

With ``repeats=N``, ``runs`` holds every run and ``spread`` per metric the median, the mean and a 95 %
confidence interval **for the mean** (Student's t: ``mean +- t(0.975, N-1) * s / sqrt(N)``, assuming
independent, roughly normal runs; ``NaN`` for one run); ``summary`` then holds the medians.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from toolkit.benchmark.client import ClientSettings
from toolkit.benchmark.log_evidence import ServerEvidence
from toolkit.benchmark.metrics import SUMMARY_KEYS, RequestRecord
from toolkit.benchmark.server_view import ServerView
from toolkit.benchmark.workload import Workload
from toolkit.engines import peer_names
from toolkit.stats import mean_interval

__all__ = ["BenchResult", "requests_frame", "spread_frame"]


def requests_frame(records: Sequence[RequestRecord]) -> pd.DataFrame:
    """One row per request, in milliseconds, times relative to the first send."""
    t0 = min((r.send_time for r in records), default=0.0)
    rows = []
    for r in records:
        itl = np.diff(np.asarray(r.chunk_times, dtype=float)) * 1000.0
        rows.append({
            "index": r.index, "ok": r.ok, "error": r.error,
            "ttft_ms": None if r.ttft_s is None else r.ttft_s * 1000.0,
            "tpot_ms": None if r.tpot_s is None else r.tpot_s * 1000.0,
            "e2el_ms": None if r.e2el_s is None else r.e2el_s * 1000.0,
            "output_tokens": r.output_tokens, "output_tokens_source": r.output_tokens_source,
            "prompt_tokens": r.prompt_tokens, "chunks": len(r.chunk_times), "itl_count": len(itl),
            "itl_mean_ms": float(itl.mean()) if len(itl) else None,
            "itl_max_ms": float(itl.max()) if len(itl) else None, "sent_at_s": r.send_time - t0,
            "ended_at_s": r.end_time - t0, "spec_accept_length": r.spec_accept_length})
    return pd.DataFrame(rows)


def spread_frame(summaries: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per numeric metric over runs: n, median, mean, std, ci95_low/high (t on the mean)."""
    rows = {}
    for key in SUMMARY_KEYS:
        vals = [s.get(key) for s in summaries]
        xs = np.array([v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)],
                      dtype=float)
        if xs.size == 0:
            continue
        mean, low, high = mean_interval(xs.tolist())
        std = float(xs.std(ddof=1)) if xs.size > 1 else math.nan
        rows[key] = {"n": int(xs.size), "median": float(np.median(xs)), "mean": mean, "std": std,
                     "ci95_low": low, "ci95_high": high, **{f"run_{i + 1}": v for i, v in enumerate(vals)}}
    return pd.DataFrame.from_dict(rows, orient="index")


def _json_safe(v: Any) -> Any:
    if isinstance(v, float | np.floating):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, Mapping):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_safe(x) for x in v]
    return None if v is pd.NA else v


# Our keys that a peer prints too (toolkit.engines.bench_names), in the order of the table.
PEER_KEYS = ("output_throughput", "median_ttft_ms", "median_tpot_ms", "median_itl_ms", "median_itl_per_token_ms",
             "mean_itl_ms", "mean_itl_per_token_ms", "median_e2el_ms", "accept_length")


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


@dataclass(frozen=True, eq=False)
class BenchResult:
    """One benchmark (or the median of ``runs``), with the evidence to trust or doubt it."""

    summary: Mapping[str, Any]
    requests: pd.DataFrame = field(repr=False)
    workload: Workload
    settings: ClientSettings
    server_view: ServerView
    records: tuple[RequestRecord, ...] = field(default=(), repr=False)
    started_at: float = 0.0
    warmup_errors: tuple[str, ...] = ()
    runs: tuple[BenchResult, ...] = ()
    spread: pd.DataFrame | None = field(default=None, repr=False)
    #: what the server's log said during the run(s), and its release (``tk.bench`` on a ``Server``)
    evidence: ServerEvidence | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """At least one request completed."""
        return bool(self.summary.get("completed"))

    @property
    def errors(self) -> dict[str, int]:
        """Each distinct error and how many requests hit it, most frequent first."""
        if self.runs:
            return dict(sum((Counter(run.errors) for run in self.runs), Counter[str]()).most_common())
        return dict(Counter(r.error for r in self.records if r.error).most_common())

    @property
    def first_error(self) -> str | None:
        recs = [r for run in self.runs for r in run.records] if self.runs else list(self.records)
        return next((r.error for r in recs if r.error), None)

    def headline(self) -> str:
        s, st = self.summary, self.settings
        done, failed = s.get("completed") or 0, s.get("failed") or 0
        runs = f" (median of {len(self.runs)} runs)" if self.runs else ""
        head = (f"BenchResult{runs}: {_fmt(done)}/{_fmt(done + failed)} completed in "
                f"{_fmt(s.get('duration'))} s | {st.url} {st.model} | {st.endpoint}"
                f" | concurrency {st.max_concurrency or 'unlimited'}"
                f" | rate {'inf' if math.isinf(st.request_rate) else _fmt(st.request_rate)} req/s")
        if not done:
            head += f"\nALL {_fmt(failed)} REQUESTS FAILED. First error: {self.first_error}"
        elif failed:
            head += f"\n{_fmt(failed)} requests failed; most frequent error: {next(iter(self.errors))}"
        return head

    def table_rows(self) -> list[tuple[str, ...]]:
        s, stats = self.summary, ("mean", "median", "p90", "p99")
        labels = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "itl_per_token": "ITL/token", "e2el": "E2EL"}
        rows = [(label, *(_fmt(s.get(f"{stat}_{k}_ms")) for stat in stats)) for k, label in labels.items()]
        return [("metric (ms)", *stats), *rows]

    def peer_rows(self) -> list[tuple[str, str, str, str]]:
        """Which figure of ``vllm bench serve`` and SGLang's ``bench_serving`` (per backend) each key equals
        for this run (``toolkit.engines.bench_names``: vllm 0.33.0 vllm/benchmarks/serve.py, sglang 0.5.23
        python/sglang/benchmark/serving.py); "-" where the peer prints no equal figure."""
        speculative = self.server_view.accept_length is not None
        rows = [("toolkit key", "vllm bench serve", "bench_serving sglang", "bench_serving sglang-oai")]
        peers = [peer_names("vllm bench serve", "vllm", speculative=speculative),
                 peer_names("sglang.bench_serving", "sglang", speculative=speculative),
                 peer_names("sglang.bench_serving", "sglang-oai", speculative=speculative)]
        for key in PEER_KEYS:
            a, b, c = (next((n.printed.rstrip(":") for n in found if n.toolkit_key == key), "-") for found in peers)
            rows.append((key, a, b, c))
        return rows

    def __str__(self) -> str:
        s, sv = self.summary, self.server_view
        lines = [self.headline()]
        if self.ok:
            lines.append(f"  output {_fmt(s['output_throughput'])} tok/s | {_fmt(s['request_throughput'])}"
                         f" req/s | total {_fmt(s['total_token_throughput'])} tok/s"
                         f" | output tokens from {s['output_tokens_source']}")
            lines += ["  " + f"{r[0]:<12}" + "".join(f"{c:>11}" for c in r[1:]) for r in self.table_rows()]
        if sv.accept_length is not None:
            cum = ", server's running average" if sv.cumulative else ""
            lines.append(f"  accept length {sv.accept_length:.3f} (from {sv.accept_length_source}{cum})")
        if self.ok:
            lines.append("  the peers' names for these figures (docs/metrics.md):")
            lines += ["    " + f"{r[0]:<26}" + "".join(f"{c:<33}" for c in r[1:]).rstrip() for r in self.peer_rows()]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "<br>".join(html.escape(x) for x in self.headline().splitlines())
        if not self.ok:
            return f"<div><b>{head}</b></div>"
        rows = self.table_rows()
        cells = "".join("<tr>" + "".join(f"<{t}>{html.escape(c)}</{t}>" for c in r) + "</tr>"
                        for t, r in [("th", rows[0])] + [("td", r) for r in rows[1:]])
        s, sv = self.summary, self.server_view
        extra = (f"output {_fmt(s['output_throughput'])} tok/s &middot; {_fmt(s['request_throughput'])} req/s"
                 f" &middot; tokens from {html.escape(str(s['output_tokens_source']))}")
        if sv.accept_length is not None:
            extra += f" &middot; accept length {sv.accept_length:.3f} ({html.escape(str(sv.accept_length_source))})"
        return f"<div><b>{head}</b><br>{extra}<table>{cells}</table></div>"

    def vllm_style_table(self) -> str:
        """The block ``vllm bench serve`` prints, with our keys' values."""
        s = self.summary
        out = ["{:=^50}".format(" Serving Benchmark Result ")]

        def line(label: str, v: Any) -> None:
            out.append(f"{label:<40} {_fmt(v) if not isinstance(v, int) else v:<10}")

        line("Successful requests:", s["completed"])
        line("Failed requests:", s["failed"])
        line("Maximum request concurrency:", self.settings.max_concurrency or "unlimited")
        line("Benchmark duration (s):", s["duration"])
        line("Total input tokens:", s["total_input_tokens"])
        line("Total generated tokens:", s["total_output_tokens"])
        line("Request throughput (req/s):", s["request_throughput"])
        if s["request_goodput"] is not None:
            line("Request goodput (req/s):", s["request_goodput"])
        line("Output token throughput (tok/s):", s["output_throughput"])
        line("Peak output token throughput (tok/s):", s["max_output_tokens_per_s"])
        line("Peak concurrent requests:", s["max_concurrent_requests"])
        line("Total token throughput (tok/s):", s["total_token_throughput"])
        for name, label, title in (("ttft", "TTFT", "Time to First Token"),
                                   ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
                                   ("itl", "ITL", "Inter-token Latency"),
                                   ("e2el", "E2EL", "End-to-end Latency")):
            out.append(f"{title:-^50}")
            for stat, word in (("mean", "Mean"), ("median", "Median"), ("p99", "P99")):
                line(f"{word} {label} (ms):", s[f"{stat}_{name}_ms"])
        if s["accept_length"] is not None:
            out.append("{:-^50}".format("Speculative Decoding"))
            line("Acceptance length:", s["accept_length"])
        out.append("=" * 50)
        if not self.ok:
            out.append(f"ALL REQUESTS FAILED. First error: {self.first_error}")
        return "\n".join(out)

    def to_dict(self, *, requests: bool = True) -> dict[str, Any]:
        """JSON-safe: summary, settings, workload (no prompt texts), server view, errors."""
        out: dict[str, Any] = {"summary": dict(self.summary), "settings": self.settings.to_dict(),
                               "workload": self.workload.to_dict(), "server_view": self.server_view.to_dict(),
                               "errors": self.errors, "warmup_errors": list(self.warmup_errors),
                               "started_at": self.started_at}
        if requests and not self.runs:
            out["requests"] = self.requests.to_dict(orient="records")
        if self.runs:
            out["runs"] = [run.to_dict(requests=requests) for run in self.runs]
            if self.spread is not None:
                out["spread"] = self.spread.to_dict(orient="index")
        return _json_safe(out)

"""Benchmark metrics as pure formulas over per-request records, named by their source.

ITL and TPOT differ across tools (GuideLLM's "ITL" is vLLM's TPOT, its TPOT includes TTFT). Each
formula here is that of ``vllm bench serve`` (``vllm/benchmarks/serve.py: calculate_metrics``, v0.33.0)
and SGLang's ``bench_serving`` (``sglang/benchmark/serving.py``, v0.5.23):

- **TTFT** = first token chunk's arrival - request sent; **E2EL** = last token chunk's arrival - request
  sent (vLLM's ``latency``: a trailing usage-only chunk or ``[DONE]`` does not extend it).
- **TPOT** = (E2EL - TTFT) / (output_tokens - 1), per request with > 1 output token.
- **ITL** = every gap between successive token chunks, pooled (per *step* under speculative decoding);
  **itl_per_token** spreads each gap over its chunk's tokens (SGLang's ``retokenized_itls``: ``gap / n``
  repeated ``n`` times); without per-chunk counts, over the request's mean tokens per chunk (an estimate).
- Throughputs divide by the run's **duration** (first request sent -> last completion).
- Statistics: ``numpy`` mean, median, population std, ``np.percentile`` linear (both engines); an empty
  sample gives ``None``, not ``0``.
- **request_goodput** (vLLM): requests meeting every SLO (``<=``) per second; <= 1 output token: TPOT 0.
- **max_output_tokens_per_s** (vLLM): most tokens in one 1-second bucket from the first send (a chunk
  counts its tokens, 1 when unknown); **max_concurrent_requests** (vLLM); **concurrency** (SGLang: sum of
  E2EL / duration).

    >>> r = RequestRecord(send_time=0.0, chunk_times=(0.1, 0.2, 0.3), end_time=0.3,
    ...                   prompt_tokens=8, output_tokens=3, output_tokens_source="usage")
    >>> s = summarize([r])
    >>> round(s["mean_ttft_ms"], 3), round(s["mean_tpot_ms"], 3), s["total_output_tokens"]
    (100.0, 100.0, 3)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["RequestRecord", "summarize", "parse_goodput_slos", "SUMMARY_KEYS", "LATENCY_METRICS",
           "STATISTICS"]

LATENCY_METRICS = ("ttft", "tpot", "itl", "itl_per_token", "e2el")
STATISTICS = ("mean", "median", "std", "p90", "p99")
GOODPUT_METRICS = ("ttft", "tpot", "e2el")

# The stable keys of a summary, in order; names follow vLLM's result file.
SUMMARY_KEYS: tuple[str, ...] = (
    "completed", "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
    "request_goodput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
    "max_concurrent_requests", "concurrency",
    *(f"{stat}_{metric}_ms" for metric in LATENCY_METRICS for stat in STATISTICS),
    "mean_tokens_per_chunk", "output_tokens_source", "accept_length",
)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What one request did, in ``time.perf_counter()`` seconds.

    ``chunk_times``: every *token* chunk's arrival (not role-only, usage-only or ``[DONE]``);
    ``chunk_tokens``: per chunk, when the server said; ``output_tokens``: ``usage``, else the counted chunks.
    """

    send_time: float
    chunk_times: tuple[float, ...]
    end_time: float
    prompt_tokens: int
    output_tokens: int
    output_tokens_source: Literal["usage", "chunks"]
    chunk_tokens: tuple[int, ...] | None = None
    error: str | None = None
    index: int = 0
    prompt_tokens_source: Literal["usage", "workload"] = "workload"
    spec_accept_length: float | None = None
    spec_verify_ct: int | None = None

    @property
    def ok(self) -> bool:
        """Completed: no error and at least one token chunk (vLLM's success rule)."""
        return self.error is None and bool(self.chunk_times)

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_times[0] - self.send_time if self.chunk_times else None

    @property
    def e2el_s(self) -> float | None:
        """vLLM's ``latency``: the last token chunk's arrival minus the send time."""
        return self.chunk_times[-1] - self.send_time if self.chunk_times else None

    @property
    def tpot_s(self) -> float | None:
        """(E2EL - TTFT) / (output_tokens - 1); ``None`` with fewer than 2 tokens."""
        if not self.chunk_times or self.output_tokens <= 1:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (self.output_tokens - 1)

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Gaps between successive token chunks."""
        t = self.chunk_times
        return tuple(t[i] - t[i - 1] for i in range(1, len(t)))


def parse_goodput_slos(slos: str | Sequence[str] | Mapping[str, float] | None) -> dict[str, float]:
    """Parse vLLM's ``--goodput`` form, ``"ttft:200 tpot:50 e2el:3000"`` (milliseconds)."""
    if slos is None:
        return {}
    parts = [] if isinstance(slos, Mapping) else slos.split() if isinstance(slos, str) else list(slos)
    bad = next((part for part in parts if ":" not in part), None)
    if bad is not None:
        raise ValueError(f"goodput SLO {bad!r} is not NAME:MILLISECONDS, e.g. 'ttft:200'")
    pairs = slos.items() if isinstance(slos, Mapping) else (part.split(":", 1) for part in parts)
    items: list[tuple[str, Any]] = [(str(name), value) for name, value in pairs]
    out: dict[str, float] = {}
    for name, raw in items:
        if name not in GOODPUT_METRICS:
            raise ValueError(f"unknown goodput SLO {name!r}; valid: {', '.join(GOODPUT_METRICS)}")
        try:
            ms = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"goodput SLO {name}:{raw!r} needs a number of milliseconds") from None
        if not ms > 0:
            raise ValueError(f"goodput SLO {name}:{raw} must be a positive number of milliseconds")
        out[name] = ms
    return out


def _stats(values: np.ndarray | Sequence[float], scale: float = 1000.0) -> dict[str, float | None]:
    """mean, median, std (population), p90, p99 with numpy's linear interpolation."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return dict.fromkeys(STATISTICS, None)
    p90, p99 = np.percentile(a, [90, 99])
    values = (np.mean(a), np.median(a), np.std(a), p90, p99)
    return {stat: float(x) * scale for stat, x in zip(STATISTICS, values, strict=True)}


def _per_token_gaps(rec: RequestRecord, gaps: np.ndarray) -> np.ndarray:
    """SGLang's per-token ITL: each gap divided over its chunk's tokens, repeated per token (without
    per-chunk counts, divided by the request's mean tokens per chunk, once per gap: an estimate)."""
    if rec.chunk_tokens is None:
        chunks = len(rec.chunk_times)
        if rec.output_tokens_source == "usage" and chunks and rec.output_tokens not in (0, chunks):
            return gaps * (chunks / rec.output_tokens)
        return gaps
    counts = np.asarray(rec.chunk_tokens[1:], dtype=np.int64)
    keep = counts > 0  # a chunk that carried no token delivers no per-token gap
    return np.repeat(gaps[keep] / counts[keep], counts[keep])


def summarize(records: Iterable[RequestRecord], duration_s: float | None = None, *,
              goodput_slos_ms: str | Sequence[str] | Mapping[str, float] | None = None,
              accept_length: float | None = None) -> dict[str, Any]:
    """Summarise records into a dict with :data:`SUMMARY_KEYS`, in that order.

    ``duration_s``: the client's wall time (vLLM: just before the first request to the last completion);
    ``None``: latest ``end_time`` minus earliest ``send_time``.
    """
    recs = list(records)
    done = [r for r in recs if r.ok]
    slos = parse_goodput_slos(goodput_slos_ms)
    if duration_s is None and recs:
        duration_s = max(r.end_time for r in recs) - min(r.send_time for r in recs)
    dur = duration_s if duration_s and duration_s > 0 else None

    def per_s(x: float) -> float | None:
        return x / dur if dur else None

    ttfts = np.array([r.ttft_s for r in done], dtype=float)
    e2els = np.array([r.e2el_s for r in done], dtype=float)
    tpots = np.array([t for r in done if (t := r.tpot_s) is not None], dtype=float)
    gaps = [np.diff(np.asarray(r.chunk_times, dtype=float)) for r in done]
    itls = np.concatenate(gaps) if gaps else np.empty(0)
    token_gaps = [_per_token_gaps(r, g) for r, g in zip(done, gaps, strict=True)]
    itls_tok = np.concatenate(token_gaps) if token_gaps else np.empty(0)

    total_in = sum(r.prompt_tokens for r in done)
    total_out = sum(r.output_tokens for r in done)
    total_chunks = sum(len(r.chunk_times) for r in done)

    good = None
    if slos:  # vLLM compares in seconds: slo_ms / 1000 >= observed_s
        observed = [{"ttft": r.ttft_s, "tpot": r.tpot_s or 0.0, "e2el": r.e2el_s} for r in done]
        good = per_s(sum(all(v / 1000.0 >= (o[k] or 0.0) for k, v in slos.items()) for o in observed))

    peak_tokens, peak_requests = _peaks(done)
    sources = {r.output_tokens_source for r in done}
    out: dict[str, Any] = {
        "completed": len(done), "failed": len(recs) - len(done), "duration": duration_s,
        "total_input_tokens": total_in, "total_output_tokens": total_out, "request_goodput": good,
        "request_throughput": per_s(len(done)), "output_throughput": per_s(total_out),
        "total_token_throughput": per_s(total_in + total_out), "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_requests, "concurrency": per_s(float(e2els.sum())) if done else None,
    }
    by_name = {"ttft": ttfts, "tpot": tpots, "itl": itls, "itl_per_token": itls_tok, "e2el": e2els}
    out |= {f"{stat}_{name}_ms": v for name, values in by_name.items() for stat, v in _stats(values).items()}
    out["mean_tokens_per_chunk"] = total_out / total_chunks if total_chunks else None
    out["output_tokens_source"] = (sources.pop() if len(sources) == 1 else "mixed") if sources else None
    out["accept_length"] = accept_length
    return {k: out[k] for k in SUMMARY_KEYS}


def _peaks(done: Sequence[RequestRecord]) -> tuple[float | None, int | None]:
    """vLLM's 1-second buckets from the earliest send: peak tokens and peak requests."""
    if not done:
        return None, None
    t0 = min(r.send_time for r in done)
    t_end = max(r.chunk_times[-1] for r in done)
    n_buckets = int(math.ceil(t_end - t0)) + 1
    tokens = np.zeros(n_buckets)
    active = np.zeros(n_buckets + 1)
    for r in done:
        buckets = (np.asarray(r.chunk_times, dtype=float) - t0).astype(np.int64)
        counts = np.ones(len(buckets)) if r.chunk_tokens is None else np.asarray(r.chunk_tokens, dtype=float)
        np.add.at(tokens, np.clip(buckets, 0, n_buckets - 1), counts)
        first, last = int(r.send_time - t0), int(r.chunk_times[-1] - t0)
        active[first] += 1
        active[min(last, n_buckets - 1) + 1] -= 1
    return float(tokens.max()), int(np.cumsum(active)[:n_buckets].max())

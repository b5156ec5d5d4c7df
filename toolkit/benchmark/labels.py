"""Human labels with units for metric names: one table, used by tables, plots and the post-mortem.

>>> metric_label("median_ttft_ms")
'median TTFT (ms)'
"""

from __future__ import annotations

__all__ = ["metric_label", "shorten_words", "LATENCY_NAMES", "ALIASES"]

LATENCY_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "end-to-end latency"}
LABELS = {
    "output_throughput": "output tok/s", "total_token_throughput": "total tok/s (in + out)",
    "request_throughput": "requests/s", "accept_length": "accept length (tokens/step)",
    "accept_len": "accept length (tokens/step)", "gen_throughput": "generation tok/s",
    "t_s": "seconds since the run's first metric line", "time_to_ready_s": "time to ready (s)",
    # GPU telemetry (kind "gpu") and scraped Prometheus metrics (kind "prometheus"): moves/observed.py
    "gpu_util_pct": "GPU utilisation (%)", "mem_util_pct": "memory-bus utilisation (%)",
    "mem_used_mib": "GPU memory used (MiB)", "sm_clock_mhz": "SM clock (MHz)", "power_w": "GPU power (W)",
    "temperature_c": "GPU temperature (°C)", "running_requests": "running requests",
    "waiting_requests": "waiting requests", "kv_cache_usage": "KV-cache usage (fraction)",
    "spec_accept_length": "accept length (tokens/step, /metrics)", "total_ms": "GPU time (ms)",
    "delta_ms": "change of GPU time (ms)",
}
# Names the log parser may use for the same server metric.
ALIASES = {
    "gen_throughput": ("gen_throughput_tok_s", "generation_throughput", "avg_generation_throughput"),
    "accept_len": ("accept_length", "mean_acceptance_length", "accept_len_tokens"),
}


def metric_label(name: str) -> str:
    """An axis label with units for a metric column: ``median_ttft_ms`` -> ``median TTFT (ms)``."""
    if name in LABELS:
        return LABELS[name]
    if name.endswith("_ms"):
        stem = name.removesuffix("_ms")
        stat, _, base = stem.partition("_") if "_" in stem else ("", "", stem)
        if base in LATENCY_NAMES:
            return f"{stat} {LATENCY_NAMES[base]} (ms)".strip()
        return f"{LATENCY_NAMES.get(stem, stem)} (ms)"
    return name.replace("_", " ")


def shorten_words(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, cut at a word boundary (mid-word reads as a typo).

    >>> shorten_words("Initial import of the simulated source tree", 32)
    'Initial import of the simulated…'
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    whole_words = text[limit - 1] == " " or " " not in head
    cut = head if whole_words or len(head.rsplit(" ", 1)[0]) < limit // 2 else head.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-([") + "…"

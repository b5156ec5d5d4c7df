"""Differences in what the two sides reported over time: the log's metric lines, GPU telemetry, ``/metrics``. Pure.

SGLang's ``Decode batch`` lines carry ``cuda graph`` and ``accept len`` (sglang 0.5.9
managers/scheduler_metrics_mixin.py); vLLM's throughput and ``SpecDecoding metrics`` lines the
running and waiting requests and the mean acceptance length (vllm 0.25-0.33 v1/metrics/loggers.py,
v1/spec_decode/metrics.py). A series differs when its means differ by more than ``rel`` of the
larger and ``floor``; a boolean when it is mostly true on one side and mostly false on the other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.logs import MetricRow
from toolkit.moves.diagnose.difference import Difference, DifferenceKind, same_record

__all__ = ["SeriesRule", "LOG_RULES", "TELEMETRY_RULES", "log_metric_differences", "telemetry_differences",
           "server_metric_differences"]


@dataclass(frozen=True)
class SeriesRule:
    """One field of one kind of row: what it is called, which topic it bears on, when it differs."""

    kinds: tuple[str, ...]
    key: str
    label: str
    topic: str
    rel: float = 0.25
    floor: float = 0.0


LOG_RULES = (
    SeriesRule(("sglang_decode",), "cuda_graph", "cuda graph (decode lines)", "cuda_graphs"),
    SeriesRule(("sglang_decode",), "accept_len", "accept length (decode lines)", "speculation", 0.1, 0.05),
    SeriesRule(("vllm_specdecode",), "mean_acceptance_length", "mean acceptance length", "speculation", 0.1, 0.05),
    SeriesRule(("sglang_decode",), "running_req", "running requests", "load", 0.25, 0.5),
    SeriesRule(("sglang_decode", "sglang_prefill"), "queue_req", "queued requests", "load", 0.25, 0.5),
    SeriesRule(("vllm_throughput",), "running_reqs", "running requests", "load", 0.25, 0.5),
    SeriesRule(("vllm_throughput",), "waiting_reqs", "waiting requests", "load", 0.25, 0.5),
    SeriesRule(("sglang_decode",), "token_usage", "KV-cache token usage", "memory", 0.5, 0.02),
    SeriesRule(("vllm_throughput",), "gpu_kv_cache_usage_pct", "KV-cache usage (%)", "memory", 0.5, 2.0),
)
TELEMETRY_RULES = (
    SeriesRule(("gpu",), "gpu_util_pct", "GPU utilisation (%)", "gpu", 0.15, 5.0),
    SeriesRule(("gpu",), "sm_clock_mhz", "SM clock (MHz)", "gpu", 0.05, 50.0),
    SeriesRule(("gpu",), "power_w", "GPU power (W)", "gpu", 0.15, 20.0),
    SeriesRule(("gpu",), "temperature_c", "GPU temperature (C)", "gpu", 0.15, 5.0),
)


def _values(rows: Sequence[MetricRow], rule: SeriesRule) -> list[tuple[float, MetricRow]]:
    out = []
    for row in rows:
        if row.kind not in rule.kinds:
            continue
        value = row.values.get(rule.key)
        if isinstance(value, bool):
            out.append((1.0 if value else 0.0, row))
        elif isinstance(value, int | float) and not math.isnan(float(value)):
            out.append((float(value), row))
    return out


def _boolean(rows: Sequence[MetricRow], rule: SeriesRule) -> bool:
    return any(isinstance(r.values.get(rule.key), bool) for r in rows if r.kind in rule.kinds)


def _describe(values: list[tuple[float, MetricRow]], boolean: bool) -> str:
    if boolean:
        true = sum(1 for v, _ in values if v)
        if true == len(values):
            return f"True in all {len(values)} lines"
        return f"False in all {len(values)} lines" if true == 0 else f"True in {true} of {len(values)} lines"
    mean = sum(v for v, _ in values) / len(values)
    return f"{mean:.3g} (mean of {len(values)})"


def _evidence(side: str, values: list[tuple[float, MetricRow]], rule: SeriesRule, boolean: bool) -> str:
    value, row = values[len(values) // 2]  # a line from the middle of the runs, past any warm-up
    if not row.line_no:  # sampled, not logged (telemetry, /metrics): the mean says more than one sample
        sources = sorted({r.rank or r.kind for _, r in values})
        mean = sum(v for v, _ in values) / len(values)
        return f"{side}: {rule.label}: mean {mean:.4g} over {len(values)} samples ({', '.join(sources[:4])})"
    shown = ("True" if value else "False") if boolean else f"{value:.4g}"
    return f"{side}: log line {row.line_no}: {rule.label.split(' (')[0]}: {shown}"


def _series_differences(fast: Sequence[MetricRow], slow: Sequence[MetricRow], rules: Sequence[SeriesRule],
                        kind: DifferenceKind) -> list[Difference]:
    out = []
    for rule in rules:
        a, b = _values(fast, rule), _values(slow, rule)
        if not a and not b:
            continue
        boolean = _boolean([*fast, *slow], rule)
        if not a or not b:  # printed on one side only: speculation's accept length, say
            present, side = (a, "fast") if a else (b, "slow")
            text = _describe(present, boolean)
            out.append(Difference(kind, rule.topic, rule.label, text if a else "(not printed)",
                                  text if b else "(not printed)", (_evidence(side, present, rule, boolean),)))
            continue
        mean_a, mean_b = (sum(v for v, _ in a) / len(a)), (sum(v for v, _ in b) / len(b))
        if boolean:
            differs = (mean_a >= 0.5) != (mean_b >= 0.5)
        else:
            gap = abs(mean_a - mean_b)
            differs = gap > rule.floor and gap > rule.rel * max(abs(mean_a), abs(mean_b))
        evidence = (_evidence("fast", a, rule, boolean), _evidence("slow", b, rule, boolean))
        if differs:
            out.append(Difference(kind, rule.topic, rule.label, _describe(a, boolean), _describe(b, boolean),
                                  evidence))
        elif rule.topic in ("cuda_graphs", "load", "gpu"):  # checked and alike: a finding in itself
            out.append(same_record(kind, rule.topic, rule.label, _describe(a, boolean), evidence))
    return out


def log_metric_differences(fast: Sequence[MetricRow], slow: Sequence[MetricRow]) -> list[Difference]:
    """What the engines' own metric lines say differently (CUDA graphs, accept length, load, KV usage)."""
    return _series_differences(fast, slow, LOG_RULES, "log_metric")


def telemetry_differences(fast: Sequence[MetricRow], slow: Sequence[MetricRow]) -> list[Difference]:
    """GPU telemetry (``gpu`` rows) per side: utilisation, clocks, power, temperature."""
    return _series_differences(fast, slow, TELEMETRY_RULES, "telemetry")


def server_metric_differences(fast: Sequence[MetricRow], slow: Sequence[MetricRow], *, rel: float = 0.25
                              ) -> list[Difference]:
    """The scraped ``/metrics`` (``prometheus`` rows): every gauge or rate whose means differ by ``rel``."""
    keys: dict[str, None] = {}
    for row in [*fast, *slow]:
        if row.kind == "prometheus":
            # a counter (``_total``) only grows over a launch: its level says when it was read, not how fast
            keys.update(dict.fromkeys(k for k, v in row.values.items() if isinstance(v, int | float)
                                      and not isinstance(v, bool) and not k.endswith("_total")))
    rules = [SeriesRule(("prometheus",), key, key, topic, rel, 1.0 if topic == "load" else 1e-9)
             for key in keys for topic in (_metric_topic(key),)]
    return [d for d in _series_differences(fast, slow, rules, "server_metrics") if not d.same]


def _metric_topic(key: str) -> str:
    lowered = key.lower()
    for words, topic in ((("spec", "accept", "draft"), "speculation"), (("running", "waiting", "queue"), "load"),
                         (("cache", "usage", "kv"), "memory")):
        if any(w in lowered for w in words):
            return topic
    return "other"

"""An engine's Prometheus series -> the toolkit's server-metric names. Pure.

Pages are parsed by :mod:`toolkit.prometheus_text`. Both engines expose ``/metrics``: vLLM always,
SGLang with ``--enable-metrics`` (sglang 0.5.9 metrics/collector.py:305-397, labels ``model_name,
engine_type, tp_rank, pp_rank, moe_ep_rank`` from managers/scheduler_metrics_mixin.py:114-120).
The names each release uses come from :class:`toolkit.engines.MetricNames`, so this module
never spells an engine's series itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from toolkit.engines import MetricNames
from toolkit.prometheus_text import PromSample

__all__ = ["SERVER_METRIC_KEYS", "server_metric_values"]

SERVER_METRIC_KEYS = ("running_requests", "waiting_requests", "kv_cache_usage", "spec_accept_length",
                      "spec_accepted_tokens_total", "spec_draft_tokens_total", "spec_drafts_total",
                      "generation_tokens_total")
"""The toolkit's names for scraped server metrics (kind ``prometheus`` in the journal)."""


def _series(samples: Iterable[PromSample], name: str | None) -> list[float]:
    if name is None:
        return []
    bare = name.removesuffix("_total")
    # prometheus_client exposes a counter `x` as `x_total`; MetricNames spells counters with `_total`.
    return [s.value for s in samples if s.name in (name, bare + "_total") and not math.isnan(s.value)]


def server_metric_values(samples: Iterable[PromSample], names: MetricNames) -> dict[str, float]:
    """The toolkit's server metrics from one scrape, named by :data:`SERVER_METRIC_KEYS`.

    Gauges and counters of several label sets (DP ranks, vLLM engines) are summed; usage and
    acceptance length are averaged. A series the page lacks is left out (not zero).

    >>> from toolkit.engines import profile_for
    >>> from toolkit.prometheus_text import parse_prometheus
    >>> page = "sglang:num_running_reqs{tp_rank=\\"0\\"} 2\\nsglang:token_usage{tp_rank=\\"0\\"} 0.25"
    >>> server_metric_values(parse_prometheus(page), profile_for("sglang", "0.5.9").metrics)
    {'running_requests': 2.0, 'kv_cache_usage': 0.25}
    """
    samples = list(samples)
    prefix = names.running.split(":", 1)[0]
    wanted: dict[str, tuple[str | None, bool]] = {
        "running_requests": (names.running, False),
        "waiting_requests": (names.waiting, False),
        "kv_cache_usage": (names.kv_cache_usage, True),
        "spec_accept_length": (names.spec_accept_length, True),
        "spec_accepted_tokens_total": (names.spec_accepted_tokens, False),
        "spec_draft_tokens_total": (names.spec_draft_tokens, False),
        "spec_drafts_total": (names.spec_drafts, False),
        # every release of both engines: sglang 0.5.9 metrics/collector.py:1111, vllm 0.33.0 v1/metrics/loggers.py
        "generation_tokens_total": (f"{prefix}:generation_tokens_total", False),
    }
    out: dict[str, float] = {}
    for key, (name, average) in wanted.items():
        values = _series(samples, name)
        if values:
            out[key] = sum(values) / len(values) if average else sum(values)
    return out

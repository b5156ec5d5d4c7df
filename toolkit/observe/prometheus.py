"""Prometheus text pages -> samples, and the engine's series -> the toolkit's server-metric names. Pure.

Both engines expose ``/metrics`` in the Prometheus text format 0.0.4 (prometheus_client):
vLLM always, SGLang with ``--enable-metrics`` (sglang 0.5.9 metrics/collector.py:305-397,
labels ``model_name, engine_type, tp_rank, pp_rank, moe_ep_rank`` from
managers/scheduler_metrics_mixin.py:114-120). A DCGM exporter speaks the same format.
The names each release uses come from :class:`toolkit.engines.MetricNames`, so this module
never spells an engine's series itself.

>>> samples = parse_prometheus('vllm:num_requests_running{engine="0",model_name="m"} 3.0')
>>> samples[0].name, samples[0].labels["engine"], samples[0].value
('vllm:num_requests_running', '0', 3.0)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from toolkit.engines import MetricNames

__all__ = ["PromSample", "parse_prometheus", "SERVER_METRIC_KEYS", "server_metric_values"]

_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?[ \t]+(?P<value>\S+)(?:[ \t]+\S+)?[ \t]*$",
                   re.DOTALL)
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*,?', re.DOTALL)
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

SERVER_METRIC_KEYS = ("running_requests", "waiting_requests", "kv_cache_usage", "spec_accept_length",
                      "spec_accepted_tokens_total", "spec_draft_tokens_total", "spec_drafts_total",
                      "generation_tokens_total")
"""The toolkit's names for scraped server metrics (kind ``prometheus`` in the journal)."""


@dataclass(frozen=True)
class PromSample:
    """One line of a Prometheus page: series name, labels, value (NaN and ±Inf kept as floats)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    value: float = math.nan


def _labels(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    out = {}
    for match in _LABEL.finditer(text):
        value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group(2))
        out[match.group(1)] = value
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)  # accepts NaN, +Inf, -Inf as the format writes them
    except ValueError:
        return None


def parse_prometheus(text: str) -> list[PromSample]:
    """Every sample line of a text page; comments, blank and malformed lines are skipped."""
    out = []
    for raw in text.split("\n"):  # the format separates lines by \n alone: a label may hold \f or \x1c
        line = raw.rstrip("\r").strip(" \t")
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        value = _number(match.group("value"))
        if value is None:
            continue
        out.append(PromSample(match.group("name"), _labels(match.group("labels")), value))
    return out


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

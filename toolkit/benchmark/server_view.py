"""The server's own view of a run: speculative accept length and counters, before and after.

Only the server knows how many draft tokens it accepted. Four sources, in the order we trust them
(the first with a figure gives ``accept_length``):

1. **responses**: SGLang's per-request ``spec_accept_length`` / ``spec_verify_ct`` (in
   ``sglext.spec_tokens_details`` with ``return_spec_tokens_details``, ``meta_info`` or ``usage``),
   pooled as sum(output tokens) / sum(verify steps), else the mean per request.
2. **vllm_metrics**: vLLM's ``/metrics`` counters before and after, as ``vllm bench serve``:
   1 + d(accepted) / d(drafts); per position d(accepted at k) / d(drafts).
3. **sglang_server_info**: ``avg_spec_accept_length`` of SGLang's ``/server_info`` (``/get_server_info``
   on older versions; under ``internal_states[0]`` or ``decode[0]``): a running average, ``cumulative=True``.
4. **server_log**: the log's metric rows (SGLang's ``accept len:``), averaged over the run's window.

An endpoint that is down or absent is listed in ``unavailable``; it never fails the benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toolkit.benchmark.metrics import RequestRecord
from toolkit.logs import MetricRow
from toolkit.prometheus_text import PromSample

__all__ = ["VllmSpecCounters", "vllm_spec_counters", "vllm_spec_delta", "sglang_accept_length",
           "ServerSnapshot", "ServerView", "build_server_view", "LogMetricSource"]


@dataclass(frozen=True, slots=True)
class VllmSpecCounters:
    """vLLM's ``vllm:spec_decode_*_total`` counters, summed over label sets."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    accepted_per_pos: tuple[tuple[int, float], ...]


def vllm_spec_counters(samples: Iterable[PromSample]) -> VllmSpecCounters | None:
    """The spec-decode counters, or ``None`` when the server exposes none (no spec decoding)."""
    drafts = draft_tokens = accepted = 0.0
    per_pos: dict[int, float] = {}
    found = [s for s in samples if s.name.startswith("vllm:spec_decode") and s.name.endswith("_total")]
    for s in found:
        if "num_drafts" in s.name:
            drafts += s.value
        elif "num_draft_tokens" in s.name:
            draft_tokens += s.value
        elif "num_accepted_tokens_per_pos" in s.name:
            pos = s.labels.get("position")
            if pos is not None and pos.isdigit():
                per_pos[int(pos)] = per_pos.get(int(pos), 0.0) + s.value
        elif "num_accepted_tokens" in s.name:
            accepted += s.value
    return VllmSpecCounters(drafts, draft_tokens, accepted, tuple(sorted(per_pos.items()))) if found else None


def vllm_spec_delta(before: VllmSpecCounters, after: VllmSpecCounters) -> dict[str, Any] | None:
    """``vllm bench serve``'s spec-decode stats over the run; ``None`` if nothing was drafted."""
    d_drafts = after.num_drafts - before.num_drafts
    d_tokens = after.num_draft_tokens - before.num_draft_tokens
    d_accepted = after.num_accepted_tokens - before.num_accepted_tokens
    # counters that went back (a restarted server) or accepted more than was drafted: not a measurement (issue 25)
    if not (math.isfinite(d_tokens) and d_tokens > 0 and 0 <= d_drafts <= d_tokens and 0 <= d_accepted <= d_tokens):
        return None
    b, a = dict(before.accepted_per_pos), dict(after.accepted_per_pos)
    positions = sorted(set(a) | set(b)) if d_drafts > 0 else []
    per_pos = [(a.get(p, b.get(p, 0.0)) - b.get(p, 0.0)) / d_drafts for p in positions]
    return {"num_drafts": int(d_drafts), "draft_tokens": int(d_tokens), "accepted_tokens": int(d_accepted),
            "acceptance_rate": d_accepted / d_tokens * 100.0,
            "acceptance_length": 1.0 + d_accepted / d_drafts if d_drafts > 0 else 0.0,
            "per_position_acceptance_rates": per_pos}


def sglang_accept_length(info: Any) -> float | None:
    """``avg_spec_accept_length`` from an SGLang ``/server_info`` body, wherever it sits."""
    if not isinstance(info, Mapping):
        return None
    decode = info.get("decode")
    if isinstance(decode, list) and decode and isinstance(decode[0], Mapping):
        info = decode[0]
    states = info.get("internal_states")
    first = [states[0]] if isinstance(states, list) and states and isinstance(states[0], Mapping) else []
    for place in [*first, info]:
        value = place.get("avg_spec_accept_length")
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1000:  # no NaN, no lie
            return float(value)
    return None


@dataclass(frozen=True)
class ServerSnapshot:
    """What the server's endpoints said at one moment (``None`` = not available)."""

    vllm_spec: VllmSpecCounters | None = None
    sglang_accept_length: float | None = None
    metrics_reachable: bool = False
    server_info_reachable: bool = False
    errors: tuple[str, ...] = ()


#: metric rows of the server's log between two instants (a follower's parsed lines)
LogMetricSource = Callable[[datetime, datetime], Iterable[MetricRow]]


@dataclass(frozen=True)
class ServerView:
    """The server's figures for a run, and where the accept length came from."""

    accept_length: float | None = None
    accept_length_source: str | None = None
    cumulative: bool = False
    per_request_accept_length: float | None = None
    vllm_spec_decode: Mapping[str, Any] | None = None
    sglang_accept_length_before: float | None = None
    sglang_accept_length_after: float | None = None
    log_metrics: Mapping[str, Mapping[str, float]] | None = None
    log_rows: int = 0
    unavailable: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        logs = self.log_metrics
        out.update(vllm_spec_decode=dict(self.vllm_spec_decode) if self.vllm_spec_decode else None,
                   log_metrics={k: dict(v) for k, v in logs.items()} if logs else None,
                   unavailable=list(self.unavailable))
        return out


def per_request_accept_length(records: Sequence[RequestRecord]) -> float | None:
    """Pooled accept length from responses: sum(tokens) / sum(verify steps), else mean."""
    done = [r for r in records if r.ok]
    with_ct = [r for r in done if r.spec_verify_ct]
    if with_ct:
        return sum(r.output_tokens for r in with_ct) / sum(r.spec_verify_ct or 0 for r in with_ct)
    lengths = [r.spec_accept_length for r in done if r.spec_accept_length]
    return sum(lengths) / len(lengths) if lengths else None


def _in_window(ts: Any, since: datetime, until: datetime) -> bool:
    if not isinstance(ts, datetime):
        return False
    if (ts.tzinfo is None) != (since.tzinfo is None):  # compare like with like
        ts = ts.astimezone() if ts.tzinfo is None else ts.astimezone().replace(tzinfo=None)
    return since <= ts <= until


def log_window_metrics(rows: Iterable[MetricRow], since: datetime, until: datetime) -> dict[str, dict[str, float]]:
    """Mean of every numeric value per row kind, over rows timestamped inside the window."""
    sums: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if not _in_window(row.timestamp, since, until):
            continue
        per_kind = sums.setdefault(row.kind, {})
        for key, value in row.values.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                per_kind.setdefault(str(key), []).append(float(value))
    return {k: {key: sum(v) / len(v) for key, v in vals.items()} for k, vals in sums.items() if vals}


def build_server_view(before: ServerSnapshot, after: ServerSnapshot, records: Sequence[RequestRecord] = (), *,
                      log_source: LogMetricSource | None = None, since: datetime | None = None,
                      until: datetime | None = None) -> ServerView:
    """Combine the snapshots, the responses' own figures and log rows into one view."""
    unavailable = list(dict.fromkeys(before.errors + after.errors))
    per_request = per_request_accept_length(records)
    vllm = (vllm_spec_delta(before.vllm_spec, after.vllm_spec)
            if before.vllm_spec and after.vllm_spec else None)
    log_metrics: dict[str, dict[str, float]] | None = None
    n_rows = 0
    if log_source is not None and since is not None and until is not None:
        try:
            rows = list(log_source(since, until))
            n_rows = sum(1 for r in rows if _in_window(r.timestamp, since, until))
            log_metrics = log_window_metrics(rows, since, until)
        except Exception as exc:  # the log hook belongs to someone else: report, never crash
            unavailable.append(f"server log metrics: {type(exc).__name__}: {exc}")
    log_accept = next((value for values in (log_metrics or {}).values() for key, value in values.items()
                       if "accept" in key.lower() and "len" in key.lower()), None)
    candidates: list[tuple[float | None, str, bool]] = [
        (per_request, "responses", False),
        (vllm["acceptance_length"] if vllm else None, "vllm_metrics", False),
        (after.sglang_accept_length, "sglang_server_info", True), (log_accept, "server_log", False)]
    value, source, cumulative = next(((v, s, c) for v, s, c in candidates if v), (None, None, False))
    return ServerView(accept_length=value, accept_length_source=source, cumulative=cumulative,
                      per_request_accept_length=per_request, vllm_spec_decode=vllm,
                      sglang_accept_length_before=before.sglang_accept_length,
                      sglang_accept_length_after=after.sglang_accept_length, log_metrics=log_metrics,
                      log_rows=n_rows, unavailable=tuple(unavailable))

"""Rank the differences by how much of the measured gap each can account for. Pure.

The gap is per output token (``1000/T_slow - 1000/T_fast`` ms for single-stream throughput T); a
profile's milliseconds give a difference its share. Unmeasured differences of the same ``topic``
join as evidence (more kinds of evidence, more certainty); a topic alike on both sides ranks last.

>>> from toolkit.moves.diagnose.difference import Difference, same_record
>>> gap = Gap.from_throughput("output_throughput", 82.0, 60.0, (-24.0, -20.0), beyond_noise=True)
>>> reasons = rank([same_record("env", "environment", "NCCL_ALGO", "Ring"),
...                 Difference("profile", "cuda_graphs", "verify", "a", "b", explains_ms=3.5)], gap)
>>> [(r.topic, round(r.share or 0, 2), r.confidence) for r in reasons]
[('cuda_graphs', 0.78, 'medium'), ('environment', 0.0, 'high')]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from toolkit.moves.diagnose.difference import TOPICS, Difference

__all__ = ["Gap", "Reason", "Confidence", "rank"]

Confidence = Literal["high", "medium", "low"]
_KIND_ORDER = ("profile", "log_metric", "config", "env", "code", "telemetry", "server_metrics")


@dataclass(frozen=True)
class Gap:
    """The measured gap: both sides' means of ``metric``, the interval of (slow - fast), and per token."""

    metric: str
    fast: float
    slow: float
    ci: tuple[float, float]
    beyond_noise: bool
    per_token_ms: float | None  # the slow side's extra ms per output token (throughput metrics only)
    profiled_ms: float | None = None  # the same, as the two profiles saw it (their own time per token)

    @classmethod
    def from_throughput(cls, metric: str, fast: float, slow: float, ci: tuple[float, float], *,
                        beyond_noise: bool) -> Gap:
        per_token = 1000.0 / slow - 1000.0 / fast if fast > 0 and slow > 0 and "throughput" in metric else None
        return cls(metric, fast, slow, ci, beyond_noise, per_token)

    @property
    def base_ms(self) -> float | None:
        """What shares divide by: the profiles' gap per token (it has their overhead), else the bench's."""
        if self.profiled_ms is not None and self.profiled_ms > 0:
            return self.profiled_ms
        return self.per_token_ms

    @property
    def text(self) -> str:
        low, high = self.ci
        interval = "" if math.isnan(low) else f" (95% interval of the difference {low:+.1f} to {high:+.1f})"
        per = f", {self.per_token_ms:+.2f} ms per output token" if self.per_token_ms is not None else ""
        if self.profiled_ms is not None:
            per += f" ({self.profiled_ms:+.2f} in the profiles)"
        ratio = f" = {self.slow / self.fast:.2f}x" if self.fast else ""
        return f"{self.metric}: slow {self.slow:.1f} vs fast {self.fast:.1f}{ratio}{interval}{per}"


@dataclass(frozen=True)
class Reason:
    """One mechanism, ranked: the share of the gap it accounts for, how sure, and the differences behind it."""

    rank: int
    topic: str
    title: str
    share: float | None  # explains_ms / gap per token; None when nothing measured it in milliseconds
    explains_ms: float | None
    confidence: Confidence
    differences: tuple[Difference, ...]
    ruled_out: bool

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of evidence that saw a difference (config, log_metric, profile, ...)."""
        return tuple(dict.fromkeys(d.kind for d in self.differences if not d.same))

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(line for d in self.differences for line in d.evidence)

    @property
    def verdict(self) -> str:
        """``explains ~69% of the gap``, ``does not explain the gap`` or ``differs (not measured)``."""
        if self.ruled_out:
            return "does not explain the gap (the same on both sides)"
        if self.share is None:
            return "differs; its part of the gap is not measured"
        if self.share < 0.05:
            return "differs, but accounts for almost none of the gap"
        return f"explains ~{min(self.share, 9.99):.0%} of the gap"


def _title(topic: str, differences: Sequence[Difference]) -> str:
    if topic == "cuda_graphs":
        slow = " ".join(d.slow for d in differences if d.kind == "profile" and not d.same)
        step = "the speculative verify step" if "verify" in slow else "the forward pass"
        if any(d.kind in ("profile", "log_metric") and not d.same for d in differences):
            return f"{step} runs outside CUDA graphs on the slow side (launch-bound)"
    if topic == "speculation" and any(d.kind == "profile" and not d.same for d in differences):
        return "speculative decoding's draft model adds work to every step"
    return TOPICS[topic]


def _confidence(share: float | None, kinds: int, ruled_out: bool, checked_directly: bool) -> Confidence:
    if ruled_out:
        return "high" if checked_directly else "medium"
    if share is not None and share >= 0.5 and kinds >= 2:
        return "high"
    if (share is not None and share >= 0.2) or kinds >= 2:
        return "medium"
    return "low"


def _score(reason: Reason) -> tuple[int, float, int]:
    if reason.ruled_out:
        return (1, 0.0, 0)
    # unmeasured but differing: ranked as if it explained a little, more with more kinds of evidence
    share = reason.share if reason.share is not None else 0.1 * min(len(reason.kinds), 3)
    return (0, -max(share, 0.0), -len(reason.kinds))


def rank(differences: Sequence[Difference], gap: Gap) -> tuple[Reason, ...]:
    """Group the differences by topic and rank the topics by the share of ``gap`` they account for."""
    by_topic: dict[str, list[Difference]] = {}
    for difference in differences:
        by_topic.setdefault(difference.topic, []).append(difference)
    reasons = []
    for topic, unordered in by_topic.items():
        found = sorted(unordered, key=lambda d: (d.same, _KIND_ORDER.index(d.kind)))
        differing = [d for d in found if not d.same]
        measured = [d.explains_ms for d in differing if d.explains_ms is not None]
        explains = sum(measured) if measured else None
        share = max(explains / gap.base_ms, 0.0) if explains is not None and gap.base_ms else None
        ruled_out = not differing
        kinds = len({d.kind for d in differing})
        checked = any(d.kind in ("env", "code", "profile") for d in found)
        reasons.append(Reason(0, topic, _title(topic, found), 0.0 if ruled_out else share, explains,
                              _confidence(share, kinds, ruled_out, checked), tuple(found), ruled_out))
    reasons.sort(key=_score)
    return tuple(replace(reason, rank=i) for i, reason in enumerate(reasons, start=1))

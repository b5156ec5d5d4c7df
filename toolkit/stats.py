"""Is B really faster than A, or is it noise? Pure statistics for A/B benchmark comparison.

A flag that buys 1 % is invisible behind run-to-run spread, so every comparison carries Welch's t
interval for the difference of means (unequal variances, small samples) and says ``within_noise``
unless it excludes zero. No SciPy: Student's t comes from the regularized incomplete beta function
(Numerical Recipes' continued fraction), checked against tabulated quantiles in the tests.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Comparison", "ComparisonVerdict", "compare_samples", "metric_direction", "mean_interval", "t_cdf",
           "t_quantile", "knee", "MIN_EFFECT"]

ComparisonVerdict = Literal["a_faster", "b_faster", "within_noise"]
MIN_EFFECT = 0.01
"""The smallest relative change that counts: a move's default ``min_effect``, and the post-mortem's line between a
difference beyond noise and one too small to matter."""


@dataclass(frozen=True)
class Comparison:
    """B against A for one metric: ``diff = mean_b - mean_a``, ``ratio = mean_b / mean_a``,
    ``ci_low``/``ci_high`` bounding ``diff`` (NaN with fewer than two samples on a side)."""

    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    diff: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    confidence: float
    higher_is_better: bool
    verdict: ComparisonVerdict
    reason: str
    method: str = "welch_t"

    @property
    def ratio_ci(self) -> tuple[float, float]:
        """The interval for ``diff`` expressed as ratios of ``mean_a`` (first-order)."""
        if self.mean_a == 0:
            return (math.nan, math.nan)
        return (1 + self.ci_low / self.mean_a, 1 + self.ci_high / self.mean_a)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for aa in (even, odd):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (df may be fractional)."""
    if math.isinf(df):
        return 0.5 * math.erfc(-t / math.sqrt(2))
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with ``t_cdf(t, df) == p``, by bisection (monotone, 80 halvings: exact enough)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie strictly between 0 and 1, got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(80):
        mid = (low + high) / 2.0
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2.0


def _numbers(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def mean_interval(values: Sequence[float | None], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval of the mean (NaN and None dropped; NaN bounds under two values).

    The one t-interval of the toolkit: tables, plots and bench repeats.

    >>> [round(v, 2) for v in mean_interval([80.0, 82.0, 81.0])]
    [81.0, 78.52, 83.48]
    """
    xs = _numbers(values)
    if not xs:
        return (math.nan, math.nan, math.nan)
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return (mean, math.nan, math.nan)
    # Not statistics.stdev: on Python 3.11 it raises AttributeError for an inf value (this gives NaN bounds).
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    half = t_quantile((1 + confidence) / 2, len(xs) - 1) * sd / math.sqrt(len(xs))
    return (mean, mean - half, mean + half)


def metric_direction(name: str) -> bool | None:
    """True when more is better (throughput, accept length), False for latencies and failures, else None."""
    lowered = name.lower()
    if "throughput" in lowered or lowered in {"accept_length", "accept_len", "completed"} or "tok_s" in lowered:
        return True
    if lowered.endswith(("_ms", "_s")) or lowered in {"duration", "failed", "errors"}:
        return False
    return None


def compare_samples(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95,
                    higher_is_better: bool = True) -> Comparison:
    """Compare repeated measurements ``a`` (the reference) and ``b``; Welch's t interval on the means.

    >>> c = compare_samples([82.1, 83.0, 82.6], [59.4, 60.8, 61.0])
    >>> c.verdict, round(c.ratio, 2)
    ('a_faster', 0.73)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1 (e.g. 0.95), got {confidence}")
    xs, ys = _numbers(a), _numbers(b)
    if not xs or not ys:
        raise ValueError(f"both samples need at least one number; got {len(xs)} for a and {len(ys)} for b")
    mean_a, mean_b = statistics.fmean(xs), statistics.fmean(ys)
    diff = mean_b - mean_a
    ratio = mean_b / mean_a if mean_a != 0 else math.nan

    def result(ci_low: float, ci_high: float, p_value: float, verdict: ComparisonVerdict, reason: str) -> Comparison:
        return Comparison(n_a=len(xs), n_b=len(ys), mean_a=mean_a, mean_b=mean_b, diff=diff, ratio=ratio,
                          ci_low=ci_low, ci_high=ci_high, p_value=p_value, confidence=confidence,
                          higher_is_better=higher_is_better, verdict=verdict, reason=reason)

    if len(xs) < 2 or len(ys) < 2:
        return result(math.nan, math.nan, math.nan, "within_noise",
                      "fewer than two samples on a side: noise is unknown")
    va, vb = statistics.variance(xs) / len(xs), statistics.variance(ys) / len(ys)
    se = math.sqrt(va + vb)
    if se == 0.0:
        ci_low = ci_high = diff
        p_value = 1.0 if diff == 0 else 0.0
    else:
        df = (va + vb) ** 2 / (va**2 / (len(xs) - 1) + vb**2 / (len(ys) - 1))
        half = t_quantile(0.5 + confidence / 2.0, df) * se
        ci_low, ci_high = diff - half, diff + half
        p_value = 2.0 * (1.0 - t_cdf(abs(diff) / se, df))
    if ci_low <= 0.0 <= ci_high:
        return result(ci_low, ci_high, p_value, "within_noise",
                      f"the {confidence:.0%} interval of the difference includes zero")
    b_better = (diff > 0) == higher_is_better
    return result(ci_low, ci_high, p_value, "b_faster" if b_better else "a_faster",
                  f"the {confidence:.0%} interval of the difference excludes zero")


def knee(xs: Sequence[float], ys: Sequence[float], *, growth: float = 0.10) -> float | None:
    """Where a curve stops growing: the first ``x`` beyond which ``y`` never rises more than ``growth``.

    ``xs`` ascending (concurrencies), ``ys`` their means. None when it still grows at its last step, or
    has fewer than three points.

    >>> knee([1, 4, 16, 32], [40.0, 150.0, 310.0, 318.0])
    16
    >>> knee([1, 4, 16], [40.0, 150.0, 600.0]) is None
    True
    """
    if len(xs) != len(ys):
        raise ValueError(f"knee needs one y per x; got {len(xs)} xs and {len(ys)} ys")
    if len(xs) < 3:
        return None
    for i, (x, y) in enumerate(zip(xs[:-1], ys[:-1], strict=True)):
        if max(ys[i + 1:]) <= y * (1.0 + growth):
            return x
    return None

"""Good, bad, or measure again? The noise-aware judge of a commit's benchmark samples, pure.

The first judge skipped a commit whose samples straddled the threshold; on a busy machine that was
the commit just before the regression and the bisection returned no answer
(tests/test_bisect_driver.py failed so in a fresh clone). So :func:`assess` says how sure it is
(Student-t, with the noise pooled over every commit so far), and the driver measures more, then
takes the likelier side.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolkit.moves.bisect.gitparse import CommitVerdict
from toolkit.stats import t_cdf, t_quantile

__all__ = ["Judgement", "Noise", "judge", "assess", "pool_noise", "standard_error", "threshold_for"]

#: The standard error of a median of n >= 3 normal samples is about 1.2533 s / sqrt(n).
_MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)


@dataclass(frozen=True)
class Noise:
    """A run-to-run standard deviation in metric units, with its degrees of freedom (0: unknown)."""

    sd: float = math.nan
    df: int = 0


@dataclass(frozen=True)
class Judgement:
    """A verdict and its numbers; undecided, ``verdict`` is the likelier side, ``confidence`` how likely."""

    verdict: CommitVerdict
    reason: str
    median: float | None = None
    threshold: float | None = None
    margin: float | None = None
    n: int = 0
    confidence: float | None = None
    decided: bool = True


def pool_noise(sample_sets: Iterable[Sequence[float]]) -> Noise:
    """The run-to-run spread pooled over several commits' samples (each about its own mean).

    >>> pool_noise([[82.0, 84.0], [60.0, 61.0, 62.0]])
    Noise(sd=1.1547005383792515, df=3)
    """
    squares, df = 0.0, 0
    for samples in sample_sets:
        values = [float(x) for x in samples if not math.isnan(float(x))]
        if len(values) >= 2:
            squares += _own_spread(values) ** 2 * (len(values) - 1)
            df += len(values) - 1
    return Noise(math.sqrt(squares / df), df) if df else Noise()


def _own_spread(values: Sequence[float]) -> float:
    """The standard deviation; from five samples on 1.4826 x MAD, so that one stalled run does not set it."""
    own = statistics.stdev(values)
    if len(values) >= 5:
        centre = statistics.median(values)
        mad = statistics.median(abs(x - centre) for x in values)
        own = 1.4826 * mad if mad > 0 else own
    return own


def _spread(values: Sequence[float], noise: Noise) -> tuple[float, int]:
    """The spread to judge ``values`` by and its degrees of freedom: pooled with ``noise``, not below own."""
    n = len(values)
    own = _own_spread(values) if n >= 2 else math.nan
    df = (n - 1 if n >= 2 else 0) + noise.df
    squares = ((n - 1) * own**2 if n >= 2 else 0.0) + (noise.df * noise.sd**2 if noise.df else 0.0)
    if not df:
        return math.nan, 0
    pooled = math.sqrt(squares / df)
    return (max(pooled, own) if n >= 2 else pooled), df


def standard_error(samples: Sequence[float], noise: Noise = Noise()) -> float:
    """The standard error of the median of ``samples`` (NaN dropped), their spread pooled with ``noise``.

    >>> round(standard_error([82.0, 84.0], Noise(1.0, 8)), 3)
    1.0
    """
    values = [float(x) for x in samples if not math.isnan(float(x))]
    sd, _ = _spread(values, noise)
    return sd * (_MEDIAN_EFFICIENCY if len(values) >= 3 else 1.0) / math.sqrt(len(values)) if values else math.nan


def threshold_for(good_ref: float, bad_ref: float | None, threshold: float | None, relative_drop: float | None,
                  lower_is_better: bool) -> float:
    """``threshold``, else ``good_ref`` degraded by ``relative_drop``, else halfway to ``bad_ref``."""
    if bad_ref is not None and (bad_ref < good_ref if lower_is_better else bad_ref > good_ref):
        kind = "lower" if lower_is_better else "higher"
        raise ValueError(
            f"bad_ref {bad_ref:g} is better than good_ref {good_ref:g} for a {kind}-is-better metric; "
            f"swap them or pass lower_is_better={not lower_is_better}"
        )
    if threshold is not None:
        return float(threshold)
    if relative_drop is not None:
        if not 0 < relative_drop < 1:
            raise ValueError(f"relative_drop is a fraction between 0 and 1, got {relative_drop}")
        return good_ref * (1 + relative_drop) if lower_is_better else good_ref * (1 - relative_drop)
    if bad_ref is not None:
        return (good_ref + bad_ref) / 2
    raise ValueError("give threshold=, relative_drop= or bad_ref= so that good and bad can be told apart")


def judge(samples: Sequence[float], **options: object) -> CommitVerdict:
    """good, bad or skip: :func:`assess`'s verdict when decided, skip when it would need more samples.

    >>> judge([82.1, 81.7, 82.4], good_ref=82.5, bad_ref=60.0)
    'good'
    >>> judge([], good_ref=82.5, bad_ref=60.0)  # the server failed to start
    'skip'
    """
    judgement = assess(samples, **options)  # type: ignore[arg-type]
    return judgement.verdict if judgement.decided else "skip"


def assess(samples: Sequence[float], *, good_ref: float, bad_ref: float | None = None,
           threshold: float | None = None, relative_drop: float | None = None, lower_is_better: bool = False,
           min_samples: int = 1, noise: Noise = Noise(), threshold_se: float = 0.0,
           confidence: float = 0.99) -> Judgement:
    """Judge samples of a metric (tok/s by default; ``lower_is_better`` for latency).

    The median's standard error takes the larger of its own spread and ``noise``, plus ``threshold_se``;
    no samples or a NaN (the server failed) is ``skip``.

    >>> j = assess([71.9, 72.3], good_ref=72.0, bad_ref=60.0, noise=Noise(0.8, 10))
    >>> j.verdict, j.decided, round(j.confidence, 4)
    ('good', True, 1.0)
    >>> j = assess([67.2, 64.9], good_ref=72.0, bad_ref=60.0, noise=Noise(2.5, 10))
    >>> j.verdict, j.decided, j.reason
    ('good', False, 'median 66.05, 95% interval 62.26..69.84, overlaps the threshold 66 (P(good) = 0.51)')
    """
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must lie between 0.5 and 1 (e.g. 0.99), got {confidence}")
    limit = threshold_for(good_ref, bad_ref, threshold, relative_drop, lower_is_better)
    values = [float(x) for x in samples]
    if not values or any(math.isnan(x) for x in values):
        return Judgement("skip", "no usable samples: the server failed to start or the benchmark failed",
                         threshold=limit, n=len(values))
    n, median = len(values), statistics.median(values)
    distance = (limit - median) if lower_is_better else (median - limit)  # > 0: on the good side
    _, pooled_df = _spread(values, noise)
    if n < min_samples or not pooled_df:
        why = f"only {n} of {min_samples} samples" if n < min_samples else "one sample and no noise estimate yet"
        return Judgement("good" if distance >= 0 else "bad", why, median, limit, None, n, 0.5, False)
    se = math.hypot(standard_error(values, noise), threshold_se)
    p_good = t_cdf(distance / se, pooled_df) if se > 0 else (1.0 if distance > 0 else 0.0 if distance < 0 else 0.5)
    verdict: CommitVerdict = "good" if p_good >= 0.5 else "bad"
    sure = max(p_good, 1.0 - p_good)
    half = t_quantile(0.975, pooled_df) * se
    shown = f"median {median:.4g}, 95% interval {median - half:.4g}..{median + half:.4g}"
    level = t_quantile(confidence, pooled_df) * se
    if sure >= confidence and distance != 0:
        side = "below" if median < limit else "above"
        return Judgement(verdict, f"{shown}, {side} the threshold {limit:.4g} (P({verdict}) = {sure:.4g})",
                         median, limit, level, n, sure, True)
    return Judgement(verdict, f"{shown}, overlaps the threshold {limit:.4g} (P(good) = {p_good:.2g})",
                     median, limit, level, n, sure, False)

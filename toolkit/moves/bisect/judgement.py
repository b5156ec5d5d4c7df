"""Good, bad or skip? The noise-aware judge of a commit's benchmark samples, pure.

A throughput number from one run is noisy; a verdict is only given when the median
clears the threshold by a margin and the samples do not straddle it. Otherwise the
commit is skipped, which the planner routes around, rather than judged by a coin flip
that would send the search down the wrong half.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.moves.bisect.gitparse import CommitVerdict

__all__ = ["Judgement", "judge", "assess"]


@dataclass(frozen=True)
class Judgement:
    """A verdict and the numbers behind it, for the journal."""

    verdict: CommitVerdict
    reason: str
    median: float | None = None
    threshold: float | None = None
    margin: float | None = None
    n: int = 0


def judge(
    samples: Sequence[float],
    *,
    good_ref: float,
    bad_ref: float | None = None,
    threshold: float | None = None,
    relative_drop: float | None = None,
    margin: float | None = None,
    lower_is_better: bool = False,
    min_samples: int = 1,
) -> CommitVerdict:
    """good, bad or skip for one commit's benchmark samples (see :func:`assess`).

    >>> judge([82.1, 81.7, 82.4], good_ref=82.5, bad_ref=60.0)
    'good'
    >>> judge([], good_ref=82.5, bad_ref=60.0)  # the server failed to start
    'skip'
    """
    return assess(
        samples,
        good_ref=good_ref,
        bad_ref=bad_ref,
        threshold=threshold,
        relative_drop=relative_drop,
        margin=margin,
        lower_is_better=lower_is_better,
        min_samples=min_samples,
    ).verdict


def assess(
    samples: Sequence[float],
    *,
    good_ref: float,
    bad_ref: float | None = None,
    threshold: float | None = None,
    relative_drop: float | None = None,
    margin: float | None = None,
    lower_is_better: bool = False,
    min_samples: int = 1,
) -> Judgement:
    """Judge samples of a metric (tok/s by default; ``lower_is_better`` for latency).

    The threshold is ``threshold`` if given, else ``good_ref`` degraded by
    ``relative_drop`` (a drop for throughput, a rise for latency), else halfway
    between ``good_ref`` and ``bad_ref``. ``margin`` (metric units) defaults to a
    tenth of the distance from ``good_ref`` to the threshold.

    - no samples, or a NaN (the server failed to start, the benchmark broke): skip;
    - fewer than ``min_samples``: skip;
    - the median within ``threshold ± margin``: skip (undecidable);
    - the samples straddle the band (min and max for up to 4 samples, the quartiles
      from 5 on, so one outlier does not veto): skip;
    - otherwise good or bad by the side of the band the median is on.
    """
    limit = _threshold(good_ref, bad_ref, threshold, relative_drop, lower_is_better)
    band = abs(good_ref - limit) / 10 if margin is None else margin
    if band < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    values = [float(x) for x in samples]
    if not values or any(math.isnan(x) for x in values):
        return Judgement(
            "skip",
            "no usable samples: the server failed to start or the benchmark failed",
            threshold=limit,
            margin=band,
            n=len(values),
        )
    median = statistics.median(values)
    if len(values) < min_samples:
        return Judgement(
            "skip", f"only {len(values)} of {min_samples} samples", median, limit, band, len(values)
        )
    low_edge, high_edge = limit - band, limit + band
    if low_edge < median < high_edge or (band == 0 and median == limit):
        reason = f"median {median:g} is within {limit:g} ± {band:g}: undecidable"
        return Judgement("skip", reason, median, limit, band, len(values))
    if len(values) >= 5:
        quartiles = statistics.quantiles(values, n=4, method="inclusive")
        spread_low, spread_high = quartiles[0], quartiles[2]
    else:
        spread_low, spread_high = min(values), max(values)
    if spread_low <= low_edge and spread_high >= high_edge:
        reason = f"samples {spread_low:g}..{spread_high:g} straddle {limit:g} ± {band:g}: too noisy to call"
        return Judgement("skip", reason, median, limit, band, len(values))
    better = median <= low_edge if lower_is_better else median >= high_edge
    side = "below" if median < limit else "above"
    verdict: CommitVerdict = "good" if better else "bad"
    return Judgement(
        verdict, f"median {median:g} is {side} {limit:g} ± {band:g}", median, limit, band, len(values)
    )


def _threshold(
    good_ref: float, bad_ref: float | None, threshold: float | None, relative_drop: float | None, lower: bool
) -> float:
    if bad_ref is not None and (bad_ref < good_ref if lower else bad_ref > good_ref):
        kind = "lower" if lower else "higher"
        raise ValueError(
            f"bad_ref {bad_ref:g} is better than good_ref {good_ref:g} for a {kind}-is-better metric; "
            f"swap them or pass lower_is_better={not lower}"
        )
    if threshold is not None:
        return float(threshold)
    if relative_drop is not None:
        if not 0 < relative_drop < 1:
            raise ValueError(f"relative_drop is a fraction between 0 and 1, got {relative_drop}")
        return good_ref * (1 + relative_drop) if lower else good_ref * (1 - relative_drop)
    if bad_ref is not None:
        return (good_ref + bad_ref) / 2
    raise ValueError("give threshold=, relative_drop= or bad_ref= so that good and bad can be told apart")

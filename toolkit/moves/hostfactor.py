"""The host as a factor: is one node slower than the others, and is B better than A on the same node? Pure.

A slow node must be seen, not mistaken for a slow flag. :func:`host_effects` fits ``log(value) =
configuration + host + noise`` by least squares. :func:`paired_comparison` judges B against A from blocks
(an A and a B launch on one host, side by side in time), so a host's speed and a slow drift cancel.

>>> runs = [("A", "n1", 80.0), ("B", "n1", 120.0), ("A", "n2", 81.0), ("B", "n2", 121.0),
...         ("A", "n3", 60.0), ("B", "n3", 91.0), ("A", "n1", 80.5), ("B", "n3", 90.0)]
>>> print(host_effects(runs).text)
host effect: n3 runs at 0.75x the other hosts (95% CI 0.74x to 0.76x): a slow node (the others agree: n1 0.99x, n2 1.01x)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.stats import MIN_EFFECT, Comparison, mean_interval, t_cdf, t_quantile

__all__ = ["HostEffect", "HostEffects", "host_effects", "paired_comparison"]


@dataclass(frozen=True)
class HostEffect:
    """One host against the others on the same configurations: ``ratio`` < 1 is slower (for throughput)."""

    host: str
    ratio: float
    low: float
    high: float
    runs: int
    beyond_noise: bool


@dataclass(frozen=True)
class HostEffects:
    """Every host's effect, whether hosts could be told from configurations at all, and one line of text."""

    effects: tuple[HostEffect, ...]
    identifiable: bool
    text: str

    def of(self, host: str) -> HostEffect | None:
        return next((e for e in self.effects if e.host == host), None)


def _components(rows: Sequence[tuple[str, str, float]]) -> int:
    """Connected groups of hosts, joined by configurations that ran on both."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for config, host, _ in rows:
        parent[find("c:" + config)] = find("h:" + host)
    return len({find("h:" + host) for _, host, _ in rows})


def host_effects(rows: Sequence[tuple[str, str, float]], *, confidence: float = 0.95,
                 min_effect: float = MIN_EFFECT, slower: str = "slow") -> HostEffects | None:
    """Host effects from ``(configuration, host, value)`` runs; None with fewer than two hosts.

    ``slower`` names a host whose ratio is below 1: ``"slow"`` for throughput, ``"fast"`` for latencies.
    """
    kept = [(c, h, float(v)) for c, h, v in rows if v is not None and math.isfinite(float(v)) and float(v) > 0]
    hosts = list(dict.fromkeys(h for _, h, _ in kept))
    if len(hosts) < 2:
        return None
    if _components(kept) > 1:
        return HostEffects((), False, "host effect: unknown: each configuration ran on one host only, so a slow host "
                                      "and a slow configuration look alike; spread repeats over hosts "
                                      "(repeats >= 2 with relaunch_each_repeat=True)")
    configs = list(dict.fromkeys(c for c, _, _ in kept))
    # Design: one column per configuration, then H-1 host columns in sum-to-zero coding.
    coded = _coding(len(hosts), len(configs), len(configs) + len(hosts) - 1)
    x = np.array([coded[hosts.index(host)] for _, host, _ in kept])
    for row, (config, _, _) in enumerate(kept):
        x[row, configs.index(config)] = 1.0
    y = np.log([v for _, _, v in kept])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    df = len(kept) - int(np.linalg.matrix_rank(x))
    residual = y - x @ beta
    fit = _Fit(beta, np.linalg.pinv(x.T @ x) * (float(residual @ residual) / df if df > 0 else math.nan), df,
               coded, confidence, min_effect)
    flagged: list[int] = []  # peel off the odd hosts one by one, so a slow node does not make the rest look fast
    while len(flagged) < len(hosts) - 1:
        typical = [i for i in range(len(hosts)) if i not in flagged]
        worst = max(typical, key=lambda i: abs(fit.estimate(i, [j for j in typical if j != i])[0]))
        if not fit.effect("", worst, [j for j in typical if j != worst], 0).beyond_noise:
            break
        flagged.append(worst)
    typical = [i for i in range(len(hosts)) if i not in flagged]
    effects = []
    for index, host in enumerate(hosts):
        reference = typical if index in flagged else [j for j in typical if j != index]
        runs = sum(1 for _, h, _ in kept if h == host)
        effects.append(fit.effect(host, index, reference or [index], runs))
    return HostEffects(tuple(effects), True, _sentence(effects, flagged, confidence, df, slower))


@dataclass(frozen=True)
class _Fit:
    beta: np.ndarray
    cov: np.ndarray
    df: int
    coded: np.ndarray  # row j: the coefficients that make host j's effect (sum-to-zero coding)
    confidence: float
    min_effect: float

    def estimate(self, index: int, reference: list[int]) -> tuple[float, float]:
        """log(host[index] / mean of the reference hosts) and its standard error."""
        contrast = self.coded[index] - self.coded[reference].mean(axis=0)
        se = math.sqrt(max(float(contrast @ self.cov @ contrast), 0.0)) if self.df > 0 else math.nan
        return float(contrast @ self.beta), se

    def effect(self, host: str, index: int, reference: list[int], runs: int) -> HostEffect:
        estimate, se = self.estimate(index, reference)
        ratio = math.exp(estimate)
        if self.df <= 0 or reference == [index]:
            return HostEffect(host, ratio, math.nan, math.nan, runs, False)
        half = t_quantile(0.5 + self.confidence / 2, self.df) * se
        low, high = math.exp(estimate - half), math.exp(estimate + half)
        beyond = not low <= 1.0 <= high and abs(ratio - 1.0) >= self.min_effect
        return HostEffect(host, ratio, low, high, runs, beyond)


def _coding(hosts: int, configs: int, width: int) -> np.ndarray:
    coded = np.zeros((hosts, width))
    for j in range(hosts - 1):
        coded[j, configs + j] = 1.0
    coded[hosts - 1, configs:] = -1.0
    return coded


def _sentence(effects: list[HostEffect], flagged: list[int], confidence: float, df: int, slower: str) -> str:
    if df <= 0:
        return "host effect: noise unknown (no run left over to measure it); repeat the runs to see the hosts"
    if not flagged:
        worst = max(effects, key=lambda e: abs(math.log(e.ratio)))
        ci = "" if math.isnan(worst.low) else f", {confidence:.0%} CI {worst.low:.2f}x to {worst.high:.2f}x"
        return f"host effect: none beyond noise (largest: {worst.host} at {worst.ratio:.2f}x the other hosts{ci})"
    parts = []
    for index in flagged:
        e = effects[index]
        kind = slower if e.ratio < 1 else ("fast" if slower == "slow" else "slow")
        parts.append(f"{e.host} runs at {e.ratio:.2f}x the other hosts ({confidence:.0%} CI {e.low:.2f}x to "
                     f"{e.high:.2f}x): a {kind} node")
    rest = ", ".join(f"{e.host} {e.ratio:.2f}x" for i, e in enumerate(effects) if i not in flagged)
    return f"host effect: {'; '.join(parts)} (the others agree: {rest})"


def paired_comparison(blocks: Sequence[tuple[Sequence[float], Sequence[float]]], *, confidence: float = 0.95,
                      higher_is_better: bool = True) -> Comparison:
    """B against A from ``(a_values, b_values)`` blocks: the mean per-block difference and its t-interval.

    A block missing a side counts in the means only. Under two complete blocks the interval is NaN.

    >>> c = paired_comparison([([80.0], [120.0]), ([60.0], [91.0]), ([81.0], [121.0])])
    >>> c.verdict, round(c.ratio, 2), c.method
    ('b_faster', 1.5, 'paired_t_by_block')
    """
    a_all = [float(v) for a, _ in blocks for v in a if math.isfinite(float(v))]
    b_all = [float(v) for _, b in blocks for v in b if math.isfinite(float(v))]
    if not a_all or not b_all:
        raise ValueError(f"both sides need at least one number; got {len(a_all)} for a and {len(b_all)} for b")
    diffs = []
    for a, b in blocks:
        fa, fb = [float(v) for v in a if math.isfinite(float(v))], [float(v) for v in b if math.isfinite(float(v))]
        if fa and fb:
            diffs.append(statistics.fmean(fb) - statistics.fmean(fa))
    mean_a, mean_b = statistics.fmean(a_all), statistics.fmean(b_all)
    diff, low, high = mean_interval(diffs, confidence) if diffs else (mean_b - mean_a, math.nan, math.nan)
    ratio = (mean_a + diff) / mean_a if mean_a else math.nan

    def result(p_value: float, verdict: str, reason: str) -> Comparison:
        return Comparison(n_a=len(a_all), n_b=len(b_all), mean_a=mean_a, mean_b=mean_a + diff, diff=diff,
                          ratio=ratio, ci_low=low, ci_high=high, p_value=p_value, confidence=confidence,
                          higher_is_better=higher_is_better, verdict=verdict, reason=reason,  # type: ignore[arg-type]
                          method="paired_t_by_block")

    if len(diffs) < 2:
        return result(math.nan, "within_noise", "fewer than two blocks with both sides: noise is unknown")
    sd = statistics.stdev(diffs)
    p_value = 1.0 if sd == 0 and diff == 0 else 0.0 if sd == 0 else \
        2.0 * (1.0 - t_cdf(abs(diff) / (sd / math.sqrt(len(diffs))), len(diffs) - 1))
    if math.isnan(low) or low <= 0.0 <= high:
        return result(p_value, "within_noise",
                      f"the {confidence:.0%} interval of the paired difference ({len(diffs)} blocks) includes zero")
    b_better = (diff > 0) == higher_is_better
    return result(p_value, "b_faster" if b_better else "a_faster",
                  f"the {confidence:.0%} interval of the paired difference ({len(diffs)} blocks) excludes zero")

"""Is there anything to bisect? The good and bad ends, measured, must differ beyond noise: pure.

The seed's "an old commit gave the same baseline" is where a bisection would name a random commit,
so the interval of the medians' difference must exclude zero and reach ``min_effect``, and the judge
must call each end what it is. Welch's interval with two samples a side called a 12 % regression
(73.3, 69.5 vs 63.1, 63.4, a busy machine) noise: hence medians and a robust spread.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from toolkit.errors import ToolkitError
from toolkit.moves.bisect.judgement import Noise, assess, pool_noise, standard_error
from toolkit.moves.bisect.result import NothingToBisect, Probe
from toolkit.stats import MIN_EFFECT, t_cdf, t_quantile

__all__ = ["References", "check_references"]


@dataclass(frozen=True)
class References:
    """The two ends as the judge will use them, and the ends' probes with their verdicts."""

    good_ref: float
    bad_ref: float
    threshold: float
    margin: float  # the threshold's 95% half-width, from the ends' noise
    probes: tuple[Probe, Probe]
    threshold_se: float = 0.0
    noise: Noise = Noise()
    confidence: float = 1.0  # that the bad end really is worse (one-sided t on the medians' difference)


def check_references(good: Probe, bad: Probe, *, metric: str, threshold: float | None = None,
                     relative_drop: float | None = None, lower_is_better: bool = False,
                     min_effect: float = MIN_EFFECT) -> References:
    """The references for the judge, or :class:`NothingToBisect` / :class:`ToolkitError` saying why not.

    >>> def end(samples, role):
    ...     return Probe(0, 0, "c0ffee", "s", role, tuple(samples), "skip", "")
    >>> refs = check_references(end([82.4, 82.9], "good_ref"), end([60.1, 60.8], "bad_ref"), metric="tok/s")
    >>> round(refs.threshold, 2), refs.probes[1].verdict, refs.confidence > 0.99
    (71.55, 'bad', True)
    """
    for probe, which in ((good, "good"), (bad, "bad")):
        finite = [x for x in probe.samples if not math.isnan(x)]
        if probe.error is not None or not finite:
            raise ToolkitError(
                f"the {which} end {probe.commit[:12]} ({probe.subject}) could not be measured: "
                f"{probe.error or 'no benchmark run gave a value'}",
                hint="a bisection needs both ends to run; check the spec and the build on that commit",
            )
    good_ref, bad_ref = good.median, bad.median
    change = (bad_ref - good_ref) / good_ref if good_ref else math.inf
    worse = change > 0 if lower_is_better else change < 0
    numbers = [f"good {good.commit[:12]}: {metric} {_list(good.samples)} (median {good_ref:.4g})",
               f"bad  {bad.commit[:12]}: {metric} {_list(bad.samples)} (median {bad_ref:.4g})"]
    noise_text, confidence, could_resolve = None, 1.0, False
    if len(good.samples) >= 2 and len(bad.samples) >= 2:
        # Each median's standard error from its own robust spread: one stalled run must not hide a regression.
        se = math.hypot(standard_error(good.samples), standard_error(bad.samples))
        df = len(good.samples) + len(bad.samples) - 2
        diff = bad_ref - good_ref
        half = t_quantile(0.975, df) * se
        numbers.append(f"95% interval of the medians' difference bad - good: {diff - half:+.4g} .. {diff + half:+.4g}")
        sure = t_cdf(abs(diff) / se, df) if se > 0 else 1.0
        confidence = sure if worse else 1.0 - sure
        if diff - half <= 0.0 <= diff + half:
            noise_text = "the 95% interval of the difference includes zero"
            room = (diff + half) if lower_is_better else -(diff - half)
            could_resolve = room >= min_effect * abs(good_ref)
    if noise_text is None and abs(change) < min_effect:
        noise_text = f"{abs(change):.2%} is under min_effect={min_effect:g}"
    if noise_text is not None:
        raise NothingToBisect(
            f"the good and bad ends differ by {bad_ref - good_ref:+.4g} {metric} ({change:+.1%}), within noise "
            f"({noise_text}): there is no regression to bisect",
            good_samples=good.samples, bad_samples=bad.samples, evidence=numbers, could_resolve=could_resolve,
            hint=(f"a regression of {min_effect:.0%} or more is still possible, but {len(good.samples)} runs a side "
                  "cannot tell it from noise: raise max_repeats= (or the plan's repeats), or lengthen its bench so that each "
                  "run is steadier" if could_resolve else
                  "the slowdown is not in this commit range (the seed's 'old commit, same baseline'); "
                  "look at flags, environment or the workload instead, or raise repeats="),
        )
    if not worse:
        raise NothingToBisect(
            f"the bad end is better than the good end ({metric} {bad_ref:.4g} vs {good_ref:.4g}): "
            "nothing to bisect",
            good_samples=good.samples, bad_samples=bad.samples, evidence=numbers,
            hint="check that good= and bad= are the right way round (and lower_is_better= for latencies)")
    noise = pool_noise([good.samples, bad.samples])
    se_good, se_bad = standard_error(good.samples, noise), standard_error(bad.samples, noise)
    threshold_se = (0.0 if threshold is not None else (1 - (relative_drop or 0)) * se_good
                    if relative_drop is not None else math.hypot(se_good, se_bad) / 2)
    judged = []
    for probe, expected in ((good, "good"), (bad, "bad")):
        judgement = assess(probe.samples, good_ref=good_ref, bad_ref=bad_ref, threshold=threshold,
                           relative_drop=relative_drop, lower_is_better=lower_is_better, noise=noise,
                           threshold_se=threshold_se)
        if judgement.verdict != expected:
            raise NothingToBisect(
                f"the judge would not call the {expected} end {expected}: {judgement.reason}",
                good_samples=good.samples, bad_samples=bad.samples, evidence=numbers,
                hint="the threshold lies beyond the measured regression; lower relative_drop= or threshold=, "
                     "or leave both out to split the difference")
        judged.append(dataclasses.replace(probe, verdict=judgement.verdict, reason=judgement.reason,
                                          judgement=judgement, confidence=judgement.confidence))
    first = judged[0].judgement
    if first is None or first.threshold is None:  # assess always sets it
        raise RuntimeError(f"the judge gave no threshold for {good.commit[:12]}")
    return References(good_ref, bad_ref, first.threshold, 1.96 * threshold_se, (judged[0], judged[1]),
                      threshold_se, noise, confidence)


def _list(samples: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{x:.4g}" for x in samples) + "]"

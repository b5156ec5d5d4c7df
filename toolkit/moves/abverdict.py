"""What an A/B test says, pure: the order of its launches on one host, the sides' names, the verdict and its sentence."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from toolkit.benchmark.labels import metric_label
from toolkit.moves.params import param_text, spec_differences
from toolkit.moves.schedule import Side, ab_queues
from toolkit.server.spec import ServerSpec
from toolkit.stats import Comparison

if TYPE_CHECKING:
    from toolkit.journal import StepVerdict

__all__ = ["ABVerdict", "Expectation", "schedule", "ab_verdict", "side_labels", "value_label", "ab_sentence", "journal_verdict"]

ABVerdict = Literal["a_faster", "b_faster", "within_noise"]  # "faster": better on the metric
# What a hypothesis predicts: one side better, or only "changed" (a commit comparison: either way confirms it).
Expectation = Literal["a_faster", "b_faster", "changed"]


def schedule(repeats: int, *, interleave: bool, reuse_launch: bool) -> list[tuple[Side, int]]:
    """The launches in order on one host, as (side, benchmark runs on that launch).

    >>> schedule(3, interleave=True, reuse_launch=False)
    [('a', 1), ('b', 1), ('b', 1), ('a', 1), ('a', 1), ('b', 1)]
    """
    return [(slot.side, slot.benches) for slot in ab_queues(repeats, 1, interleave=interleave,
                                                             reuse_launch=reuse_launch)[0]]


def ab_verdict(comparison: Comparison, min_effect: float) -> tuple[ABVerdict, str]:
    """The verdict and why: beyond noise only if the interval excludes no change and the change is >= min_effect."""
    if comparison.verdict == "within_noise":
        return "within_noise", comparison.reason
    if not math.isnan(comparison.ratio) and abs(comparison.ratio - 1.0) < min_effect:
        return "within_noise", (f"the difference, {abs(comparison.ratio - 1):.1%}, is below min_effect="
                                f"{min_effect:.0%}: too small to matter, though the interval excludes zero")
    return comparison.verdict, comparison.reason


def side_labels(spec_a: ServerSpec, spec_b: ServerSpec) -> tuple[str, str]:
    """Names for the sides from what differs: ``("prefill", "decode")``; ``("A", "B")`` if nothing does."""
    diff_b = spec_differences(spec_a, spec_b)
    if not diff_b:
        return "A", "B"
    reverse = spec_differences(spec_b, spec_a)
    return (", ".join(param_text(n, reverse.get(n)) for n in diff_b),
            ", ".join(param_text(n, v) for n, v in diff_b.items()))


#: One side's name, naming the parameter: a bare ``decode`` does not say which flag it is (issue 14).
value_label = param_text


def ab_sentence(comparison: Comparison, verdict: ABVerdict, reason: str, label_a: str, label_b: str,
                metric: str) -> str:
    """One sentence: ``decode is 2.06x prefill on output tok/s (...; 95% CI of the ratio ...): beyond noise``."""
    c = comparison
    low, high = c.ratio_ci
    paired = c.method == "paired_t_by_block"
    unknown = "fewer than two blocks: noise unknown" if paired else "one run per side: noise unknown"
    ci = unknown if math.isnan(low) else f"{c.confidence:.0%} CI of the ratio {low:.2f}x to {high:.2f}x"
    head = (f"{label_b} is {c.ratio:.2f}x {label_a} on {metric_label(metric)} "
            f"({_number(c.mean_b)} vs {_number(c.mean_a)}; {ci}; {c.n_b}+{c.n_a} runs{', paired by host' if paired else ''})")
    if verdict == "within_noise":
        return f"{head}: within noise ({reason})"
    return f"{head}: {label_b if verdict == 'b_faster' else label_a} better beyond noise"


def _number(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def journal_verdict(verdict: ABVerdict, expect: Expectation | None) -> StepVerdict | None:
    """The B step's verdict: confirmed if ``expect`` held beyond noise (``changed``: any change held)."""
    if expect is None:
        return None
    if expect == "changed":
        return "refuted" if verdict == "within_noise" else "confirmed"
    if verdict == "within_noise":
        return "inconclusive"
    return "confirmed" if verdict == expect else "refuted"

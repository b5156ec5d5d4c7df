"""A/B statistics: the t distribution against tables, and verdicts on clear gaps versus noise."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.stats import compare_samples, mean_interval, metric_direction, t_cdf, t_quantile


@pytest.mark.parametrize(
    ("df", "expected"), [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042), (math.inf, 1.960)]
)
def test_t_quantile_matches_the_table(df: float, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_t_cdf_is_symmetric_and_centred() -> None:
    assert t_cdf(0.0, 3) == pytest.approx(0.5)
    assert t_cdf(-2.0, 5) == pytest.approx(1 - t_cdf(2.0, 5))
    assert t_cdf(-2.0, 5) == pytest.approx(0.05097, abs=1e-5)


def test_the_eagle3_regression_is_not_noise() -> None:
    c = compare_samples([82.1, 83.0, 82.6], [59.4, 60.8, 61.0])
    assert c.verdict == "a_faster"
    assert c.ratio == pytest.approx(0.7315, abs=1e-3)
    assert c.ci_low < c.diff < c.ci_high < 0
    assert c.p_value < 0.001


def test_a_one_percent_change_within_spread_is_noise() -> None:
    c = compare_samples([82.1, 83.0, 82.6, 81.5], [82.4, 82.8, 81.9, 83.3])
    assert c.verdict == "within_noise"
    assert c.ci_low < 0 < c.ci_high


def test_latency_direction_flips_the_verdict() -> None:
    faster = compare_samples([12.1, 12.3, 12.2], [10.9, 11.0, 11.1], higher_is_better=False)
    assert faster.verdict == "b_faster"
    assert compare_samples([12.1, 12.3, 12.2], [10.9, 11.0, 11.1]).verdict == "a_faster"


def test_single_runs_say_nothing_about_noise() -> None:
    c = compare_samples([82.0], [60.0])
    assert c.verdict == "within_noise" and "fewer than two" in c.reason
    assert math.isnan(c.ci_low) and c.ratio == pytest.approx(60 / 82)


def test_identical_repeats_with_a_gap_are_decisive() -> None:
    assert compare_samples([80.0, 80.0], [90.0, 90.0]).verdict == "b_faster"


def test_bad_input_is_explained() -> None:
    with pytest.raises(ValueError, match="at least one number"):
        compare_samples([], [1.0])
    with pytest.raises(ValueError, match="confidence"):
        compare_samples([1.0, 2.0], [1.0, 2.0], confidence=95)


@pytest.mark.parametrize(
    ("name", "higher"),
    [
        ("output_throughput", True),
        ("accept_length", True),
        ("median_ttft_ms", False),
        ("p99_itl_ms", False),
        ("label", None),
    ],
)
def test_metric_direction(name: str, higher: bool | None) -> None:
    assert metric_direction(name) is higher


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(1, 1000), min_size=2, max_size=12),
    st.lists(st.floats(1, 1000), min_size=2, max_size=12),
)
def test_interval_always_contains_the_observed_difference(a: list[float], b: list[float]) -> None:
    c = compare_samples(a, b)
    assert c.ci_low <= c.diff + 1e-9 and c.diff - 1e-9 <= c.ci_high
    assert (c.verdict == "within_noise") == (c.ci_low <= 0 <= c.ci_high)


def test_mean_interval_of_an_infinite_value_is_infinite_with_no_interval() -> None:
    # a ratio over a zero baseline is inf; statistics.stdev raised AttributeError on it (Python 3.11)
    mean, low, high = mean_interval([1.0, math.inf])
    assert mean == math.inf and math.isnan(low) and math.isnan(high)

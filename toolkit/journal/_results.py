"""``journal.results()``: one row per configuration, the figures a person reads first, rounded for people.

Issue 14: the wide frame (one row per run, 66 columns) hid tok/s among the per-run details. TTFT and ITL
are the median over runs of each run's median; tok/s has its 95 % CI (:func:`toolkit.stats.mean_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from toolkit.benchmark.labels import metric_label
from toolkit.stats import mean_interval

__all__ = ["configurations"]

THROUGHPUT = "output_throughput"
CI = "± 95% CI"
# (summary key, digits): what a person compares, rounded to what the noise allows
_FIGURES = ((THROUGHPUT, 1), ("median_ttft_ms", 1), ("median_itl_ms", 2))
_OPTIONAL = (("accept_length", 2),)


def _numbers(column: pd.Series) -> list[float]:
    return [float(v) for v in column if isinstance(v, int | float) and not isinstance(v, bool)
            and math.isfinite(float(v))]


def _rounded(value: float, digits: int) -> float:
    return round(value, digits) if math.isfinite(value) else math.nan


def _median(values: Sequence[float]) -> float:
    return float(pd.Series(values, dtype="float64").median()) if values else math.nan


def _verdicts(runs: pd.DataFrame) -> str:
    """The verdicts of the steps that ran this configuration, in order; a failed step says so."""
    steps = runs.drop_duplicates("step_id")
    words = [v if isinstance(v, str) else s for v, s in zip(steps["verdict"], steps["status"], strict=True)
             if isinstance(v, str) or s != "done"]
    return ", ".join(dict.fromkeys(words))


def configurations(wide: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (``label``), in the order of its first run."""
    optional = [(key, digits) for key, digits in _OPTIONAL if key in wide.columns and _numbers(wide[key])]
    several_hosts = "host" in wide.columns and wide["host"].dropna().nunique() > 1
    columns = ["configuration", "runs", metric_label(THROUGHPUT), CI, *(metric_label(k) for k, _ in _FIGURES[1:]),
               *(metric_label(k) for k, _ in optional), "verdict", "steps", *(["hosts"] if several_hosts else [])]
    rows = []
    for label, runs in wide.groupby("label", sort=False, dropna=False):
        tok_s = _numbers(runs[THROUGHPUT]) if THROUGHPUT in runs.columns else []
        mean, low, high = mean_interval(tok_s)
        row: dict[str, object] = {"configuration": label, "runs": len(runs), metric_label(THROUGHPUT):
                                  _rounded(mean, 1), CI: _rounded((high - low) / 2, 1)}
        for key, digits in (*_FIGURES[1:], *optional):
            values = _numbers(runs[key]) if key in runs.columns else []
            row[metric_label(key)] = _rounded(_median(values), digits)
        row["verdict"] = _verdicts(runs)
        row["steps"] = ", ".join(f"#{seq}" for seq in dict.fromkeys(runs["seq"]))
        if several_hosts:  # a fan-out: where each configuration ran, since a slow node looks like a slow flag
            row["hosts"] = ", ".join(str(h) for h in dict.fromkeys(runs["host"].dropna()))
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)

"""What differs between two steps, runs or configurations: spec first, then metrics with b/a (pure).

A label names every run with that label, so repeats recorded in several steps pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from toolkit.journal._frames import RESULT_BASE_COLUMNS, WORKLOAD_COLUMNS
from toolkit.journal.adapters import FLAG_PREFIX, column_name, spec_parameters
from toolkit.server.naming import ENV_PREFIX, diff
from toolkit.stats import compare_samples, metric_direction

__all__ = ["Side", "resolve_side", "compare_frames"]

COMPARE_COLUMNS = ["section", "name", "a", "b", "diff", "ratio", "n_a", "n_b", "verdict"]
ABSENT = "(absent)"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a name, its runs (rows of ``results``) and its spec's parameters."""

    name: str
    runs: pd.DataFrame
    parameters: dict[str, str]


def _spec_of(steps: pd.DataFrame, step_id: int) -> dict[str, str]:
    match = steps[steps["step_id"] == step_id]
    return spec_parameters(match.iloc[0]["spec"]) if len(match) else {}


def resolve_side(selector: int | str, steps: pd.DataFrame, results: pd.DataFrame) -> Side:
    """Find the runs and the spec a selector names; a wrong name lists the valid ones."""
    text = str(selector)
    if isinstance(selector, int) or text.startswith("step:"):
        step_id = int(text.removeprefix("step:"))
        if step_id not in set(steps["step_id"]):
            raise ValueError(f"no step {step_id} in this investigation; steps are {sorted(steps['step_id'])}")
        return Side(f"step {step_id}", results[results["step_id"] == step_id], _spec_of(steps, step_id))
    if text.startswith("run:"):
        run_id = int(text.removeprefix("run:"))
        runs = results[results["run_id"] == run_id]
        if runs.empty:
            raise ValueError(f"no run {run_id} in this investigation; runs are {sorted(results['run_id'])}")
        return Side(f"run {run_id}", runs, _spec_of(steps, int(runs.iloc[0]["step_id"])))
    runs = results[results["label"] == text]
    if not runs.empty:
        return Side(text, runs, _spec_of(steps, int(runs.iloc[-1]["step_id"])))
    named = steps[(steps["title"] == text) | (steps["label"] == text)]
    if not named.empty:
        step_id = int(named.iloc[-1]["step_id"])
        return Side(text, results[results["step_id"] == step_id], _spec_of(steps, step_id))
    labels = sorted(set(results["label"].dropna()) | set(steps["title"].dropna()))
    raise ValueError(f"nothing in this investigation is called {text!r}; use a step id, 'run:ID', or one of: "
                     f"{labels}")


def _numeric_metrics(runs: pd.DataFrame, skip: set[str]) -> dict[str, list[float]]:
    columns = [c for c in runs.columns if c not in skip and not c.startswith((FLAG_PREFIX, ENV_PREFIX))]
    found = {column: [float(v) for v in runs[column] if isinstance(v, int | float) and not isinstance(v, bool)
                      and not math.isnan(float(v))] for column in columns}
    return {column: values for column, values in found.items() if values}


def compare_frames(a: Side, b: Side) -> pd.DataFrame:
    """The rows of ``journal.compare``: spec differences, then every metric with diff, b/a and a verdict."""
    rows: list[dict[str, Any]] = [
        {"section": "spec", "name": column_name(change.name), "a": ABSENT if change.before is None else change.before,
         "b": ABSENT if change.after is None else change.after}
        for change in diff(a.parameters, b.parameters)]
    skip = set(RESULT_BASE_COLUMNS) | set(WORKLOAD_COLUMNS)
    metrics_a, metrics_b = _numeric_metrics(a.runs, skip), _numeric_metrics(b.runs, skip)
    for name in [m for m in metrics_a if m in metrics_b] + [m for m in metrics_b if m not in metrics_a]:
        xs, ys = metrics_a.get(name, []), metrics_b.get(name, [])
        mean_a = sum(xs) / len(xs) if xs else math.nan
        mean_b = sum(ys) / len(ys) if ys else math.nan
        direction = metric_direction(name)
        verdict = (compare_samples(xs, ys, higher_is_better=direction).verdict
                   if direction is not None and len(xs) >= 2 and len(ys) >= 2 else None)
        rows.append({"section": "metric", "name": name, "a": mean_a, "b": mean_b, "diff": mean_b - mean_a,
                     "ratio": mean_b / mean_a if mean_a else math.nan, "n_a": len(xs), "n_b": len(ys),
                     "verdict": verdict})
    frame = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    frame[["n_a", "n_b"]] = frame[["n_a", "n_b"]].astype("Int64")
    frame.attrs["a"], frame.attrs["b"] = a.name, b.name
    return frame

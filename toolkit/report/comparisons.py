"""Which results a post-mortem may compare: one configuration per spec label *and* workload (pure).

"vs baseline" only under the same workload; a concurrency sweep is a curve with its knee, not a set of
comparisons (docs/postmortem.md, "Like with like").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolkit.report.workload import CONCURRENCY, KEY_COLUMNS, describe, differing, key, varying_text
from toolkit.stats import MIN_EFFECT, compare_samples, knee, mean_interval

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["THROUGHPUT", "baseline_label", "configurations", "with_config_names", "Curve", "curves", "curve_points"]

THROUGHPUT = "output_throughput"
_VERDICTS = {"a_faster": "slower beyond noise", "b_faster": "faster beyond noise", "within_noise": "within noise"}


def baseline_label(steps: pd.DataFrame, results: pd.DataFrame) -> str | None:
    """The label of the first run of the first ``baseline`` step (else of the first step with runs)."""
    if results.empty or THROUGHPUT not in results.columns:
        return None
    ids = list(steps.loc[steps["kind"] == "baseline", "step_id"]) + list(steps["step_id"])
    for step_id in ids:
        runs = results[results["step_id"] == step_id]
        if not runs.empty:
            return str(runs.iloc[0]["label"])
    return None


def _groups(results: pd.DataFrame) -> list[tuple[str, dict[str, Any], pd.DataFrame]]:
    """(label, workload, runs) in the order of each group's first run."""
    keys = [(str(label), key(row)) for label, row in zip(results["label"], results.to_dict("records"), strict=True)]
    columns = [column for column in (*KEY_COLUMNS, "workload:url") if column in results.columns]
    groups = [(group[0], results[[k == group for k in keys]]) for group in dict.fromkeys(keys)]
    return [(label, {column: runs.iloc[0][column] for column in columns}, runs) for label, runs in groups]


def _parameters(runs: pd.DataFrame) -> dict[str, str]:
    """The first run's ``flag:--x`` / ``env:X`` / ``commit`` values, the simulator's own knobs left out."""
    first = runs.iloc[0]
    columns = [c for c in runs.columns if (c == "commit" or c.startswith(("flag:", "env:")))
               and not c.startswith(("flag:--sim-", "flag:--source-dir"))]
    return {c.removeprefix("flag:"): str(first[c]) for c in columns
            if first[c] is not None and str(first[c]) not in ("nan", "None", "<NA>")}


def _on_top_of(label: str, runs: pd.DataFrame, base: pd.DataFrame) -> str:
    """What a configuration runs with besides what its label names, against the baseline: an A/B side
    ``--speculative-attention-mode=decode`` runs on top of EAGLE-3 (issue 28). "" when nothing else differs."""
    mine, theirs = _parameters(runs), _parameters(base)
    if not any(name in label or (name == "commit" and value[:8] in label) for name, value in mine.items()):
        return ""  # a label that names no parameter ("EAGLE-3, 2 steps") is the change itself, on top of nothing
    extra = [f"{name}={value}" if not name.startswith("commit") else f"commit {value[:10]}"
             for name, value in mine.items() if theirs.get(name) != value and name not in label
             and not (name == "commit" and value[:8] in label)]
    extra += [f"without {name}" for name in theirs if name not in mine and name not in label]
    return ", ".join(extra[:4]) + (f" and {len(extra) - 4} more" if len(extra) > 4 else "")


def _requests(runs: pd.DataFrame) -> int | None:
    if "completed" not in runs.columns:
        return None
    values = runs["completed"].dropna()
    return int(values.astype("int64").sum()) if len(values) else None


def _named(label: str, varying: str) -> str:
    """``label · varying``, without the words the label already says: a step titled "..., concurrency 32" is not
    "..., concurrency 32 · concurrency 32, 64 prompts"."""
    words = [w for w in varying.split(", ") if not re.search(rf"(?<![\w.]){re.escape(w)}(?![\w.])", label)]
    return f"{label} · {', '.join(words)}" if words else label


def configurations(results: pd.DataFrame, baseline: str | None) -> list[dict[str, Any]]:
    """One row per (label, workload): mean, sd, 95 % interval, requests, and the ratio to the same-workload baseline."""
    if results.empty or THROUGHPUT not in results.columns:
        return []
    groups = _groups(results)
    varying = differing([w for _, w, _ in groups])
    base_runs = {key(w): runs[THROUGHPUT].dropna().astype("float64").tolist()
                 for label, w, runs in groups if label == baseline}
    base_frames = {key(w): runs for label, w, runs in groups if label == baseline}
    rows = []
    for label, workload, runs in groups:
        tok_s = runs[THROUGHPUT].dropna().astype("float64")
        mean, low, high = mean_interval(tok_s.tolist())
        name = _named(label, varying_text(workload, varying)) if varying else label
        row: dict[str, Any] = {
            "label": label, "name": name, "workload": workload, "workload_text": describe(workload),
            "varying_text": varying_text(workload, varying) if varying else "",
            "steps": ", ".join(f"#{s}" for s in dict.fromkeys(runs["seq"])), "runs": len(runs),
            "run_ids": list(runs["run_id"]), "requests": _requests(runs), "mean": mean,
            "sd": tok_s.std() if len(tok_s) > 1 else None, "ci": (high - low) / 2 if len(tok_s) > 1 else None,
            "is_baseline": label == baseline}
        for column in ("median_ttft_ms", "median_itl_ms", "median_tpot_ms", "accept_length"):
            row[column] = runs[column].mean() if column in runs.columns else None
        base = base_runs.get(key(workload), [])
        if label != baseline and len(tok_s) and base:
            comparison = compare_samples(base, tok_s.tolist())
            single = min(comparison.n_a, comparison.n_b) < 2  # one run on a side: no spread, no noise verdict
            row["on_top_of"] = _on_top_of(label, runs, base_frames[key(workload)])
            # beyond noise but under MIN_EFFECT: true, and too small for the moves' verdicts to count it
            small = comparison.verdict != "within_noise" and abs(comparison.ratio - 1) < MIN_EFFECT
            row.update(ratio=comparison.ratio, ratio_ci=None if single else comparison.ratio_ci,
                       verdict=("unknown: " + ("ran once" if comparison.n_b < 2 else "the baseline ran once"))
                       if single else _VERDICTS[comparison.verdict] + (f", under {MIN_EFFECT:.0%}" if small else ""),
                       verdict_code=comparison.verdict, single=single, small=small)
        elif label != baseline and baseline is not None:
            row["no_baseline"] = True  # the baseline never ran this workload: nothing to compare with
        rows.append(row)
    return rows


def with_config_names(frame: pd.DataFrame, configs: list[dict[str, Any]]) -> pd.DataFrame:
    """``frame`` (runs, requests or metric lines, with ``run_id``) labelled by configuration name, for plots."""
    if "run_id" not in frame.columns or not any(c["name"] != c["label"] for c in configs):
        return frame
    names = {run_id: c["name"] for c in configs for run_id in c["run_ids"]}
    labels = [names.get(run_id, label) for run_id, label in zip(frame["run_id"], frame["label"], strict=True)]
    return frame.assign(label=labels)


@dataclass(frozen=True)
class Curve:
    """One label's output tok/s (and median TTFT) against concurrency, all else equal."""

    label: str
    concurrency: tuple[float, ...]
    tok_s: tuple[float, ...]
    ttft_ms: tuple[float, ...]
    runs: tuple[int, ...]
    knee: float | None

    def sentence(self) -> str:
        def at(i: int) -> str:
            return f"{self.tok_s[i]:.1f} tok/s at concurrency {self.concurrency[i]:g}"

        if self.knee is None:
            return (f"\u201c{self.label}\u201d: output tok/s still grows at the highest concurrency measured, "
                    f"from {at(0)} to {at(-1)}: no knee within the sweep.")
        i = self.concurrency.index(self.knee)
        beyond = (f"; beyond it, {at(-1)} ({self.tok_s[-1] / self.tok_s[i] - 1:+.0%})"
                  if i < len(self.concurrency) - 1 else "")
        return (f"\u201c{self.label}\u201d: output tok/s stops growing at concurrency {self.knee:g} "
                f"({at(i)}, from {at(0)}){beyond}, while median TTFT goes from {self.ttft_ms[0]:.0f} ms "
                f"to {self.ttft_ms[-1]:.0f} ms.")


def curves(configs: list[dict[str, Any]]) -> list[Curve]:
    """Per label, a concurrency sweep (3+ concurrencies, all else equal), with its knee."""
    out = []
    for label in dict.fromkeys(c["label"] for c in configs):
        points = [c for c in configs if c["label"] == label and c["workload"].get(CONCURRENCY) is not None]
        others = {tuple(v for k, v in zip(KEY_COLUMNS, key(c["workload"]), strict=True)
                        if k not in (CONCURRENCY, "workload:num_prompts")) for c in points}
        if len({c["workload"][CONCURRENCY] for c in points}) < 3 or len(others) != 1:
            continue
        by_c: dict[float, list[dict[str, Any]]] = {}
        for c in points:
            by_c.setdefault(float(c["workload"][CONCURRENCY]), []).append(c)
        xs = sorted(by_c)
        tok = [sum(c["mean"] * c["runs"] for c in by_c[x]) / sum(c["runs"] for c in by_c[x]) for x in xs]
        ttft = [float(by_c[x][0]["median_ttft_ms"] or float("nan")) for x in xs]
        runs = [sum(c["runs"] for c in by_c[x]) for x in xs]
        out.append(Curve(label, tuple(xs), tuple(tok), tuple(ttft), tuple(runs), knee(xs, tok)))
    return out


def curve_points(found: list[Curve]) -> tuple[pd.DataFrame, dict[str, float | None]]:
    """The curves as ``plots.concurrency_curves`` draws them: one row per point, and each label's knee."""
    import pandas as pd

    rows = [{"label": c.label, "concurrency": x, "tok_s": y, "ttft_ms": t}
            for c in found for x, y, t in zip(c.concurrency, c.tok_s, c.ttft_ms, strict=True)]
    return pd.DataFrame(rows, columns=["label", "concurrency", "tok_s", "ttft_ms"]), {c.label: c.knee for c in found}

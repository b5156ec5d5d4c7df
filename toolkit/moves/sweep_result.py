"""What a sweep returns: a tidy DataFrame of runs, the failures with their evidence, a plot, a repr."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.errors import ToolkitError
from toolkit.moves.hostfactor import HostEffects, host_effects
from toolkit.moves.params import Variant
from toolkit.moves.trial import LaunchPhases, RunOutcome
from toolkit.stats import mean_interval, metric_direction

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SweepResult", "SweepFailure", "outcome_row", "failure_row", "runs_frame", "phases_frame"]


@dataclass(frozen=True, eq=False)
class SweepFailure:
    """A combination that failed: its launch, readiness or benchmark error, with the evidence."""

    variant: Variant
    error: BaseException
    step_id: int | None
    runs_done: int

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.error.evidence if isinstance(self.error, ToolkitError) else ()

    @property
    def hint(self) -> str | None:
        return self.error.hint if isinstance(self.error, ToolkitError) else None

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {_text(self.error)}"

    def __repr__(self) -> str:
        where = f" (journal step {self.step_id})" if self.step_id is not None else ""
        return f"FAILED {self.variant.title}{where}: {self.message}"


def outcome_row(outcome: RunOutcome, **columns: object) -> dict[str, object]:
    """One tidy row for a run: ``columns`` first, then run facts, then every summary metric."""
    summary = dict(outcome.result.summary)
    ok = bool(summary.get("completed", 1))
    return {**columns, "repeat": outcome.repeat, "launch": outcome.launch, "status": "ok" if ok else "failed",
            "error": None if ok else outcome.result.first_error,
            "time_to_ready_s": outcome.time_to_ready_s, "server_pid": outcome.server_pid,
            "step_id": outcome.step_id, "run_id": outcome.run_id, "metric_lines": outcome.metric_lines, **summary}


def failure_row(error: BaseException, step_id: int | None, repeat: int, **columns: object) -> dict[str, object]:
    """The row a failed launch or run leaves in a tidy frame: no metrics, the error text."""
    text = _text(error)
    return {**columns, "repeat": repeat, "launch": None, "status": "failed",
            "error": f"{type(error).__name__}: {text.splitlines()[0] if text else ''}", "step_id": step_id}


def _text(error: BaseException) -> str:
    return error.message if isinstance(error, ToolkitError) else str(error)


@dataclass(frozen=True, eq=False)
class SweepResult:
    """Every run of a sweep as one tidy DataFrame (``frame``), the failures, and the journal steps.

    ``frame``: one row per run (and per failure): the varied parameters, ``host``, run facts, every summary
    metric. ``phases``: per launch, where its time went (:class:`~toolkit.moves.trial.LaunchPhases`).
    """

    variants: tuple[Variant, ...]
    frame: pd.DataFrame
    failures: tuple[SweepFailure, ...]
    step_ids: tuple[int | None, ...]
    params: tuple[str, ...]
    phases: pd.DataFrame | None = None

    def table(self, metric: str = "output_throughput") -> pd.DataFrame:
        """Per combination: runs, mean, 95 % CI and the ratio to the first combination that ran."""
        import pandas as pd

        rows, reference = [], None
        for variant in self.variants:
            runs = self.frame[(self.frame["combination"] == variant.index) & (self.frame["status"] == "ok")]
            values = list(runs[metric]) if metric in runs else []
            mean, low, high = mean_interval(values)
            failed = any(f.variant.index == variant.index for f in self.failures)
            if reference is None and not math.isnan(mean):
                reference = mean
            rows.append({"label": variant.label, "runs": len(values), "mean": mean, "ci95_low": low,
                         "ci95_high": high, "ratio": mean / reference if reference else math.nan,
                         "status": "failed" if failed else "ok"})
        return pd.DataFrame(rows)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts that ran something, in order of first appearance."""
        column = self.frame.get("host", [])
        return tuple(dict.fromkeys(str(h) for h in column if isinstance(h, str)))

    def host_effects(self, metric: str = "output_throughput") -> HostEffects | None:
        """Each host against the others on the same combinations (None with one host)."""
        if metric not in self.frame:
            return None
        ok = self.frame[self.frame["status"] == "ok"]
        rows = [(str(c), str(h), float(v)) for c, h, v in zip(ok["combination"], ok["host"], ok[metric], strict=True)
                if isinstance(v, int | float)]
        return host_effects(rows, slower="fast" if metric_direction(metric) is False else "slow")

    def __repr__(self) -> str:
        ok = len(self.variants) - len({f.variant.index for f in self.failures})
        lines = [f"SweepResult: {len(self.variants)} combinations, {ok} ran, {len(self.failures)} failed"
                 f" (output tok/s: mean [95% CI] over runs, ratio to the first)"]
        table = self.table()
        width = max([len(v.label) for v in self.variants] + [5])
        for row in table.itertuples():
            ci = "" if math.isnan(row.ci95_low) else f" [{row.ci95_low:.1f}, {row.ci95_high:.1f}]"
            mean = "-" if math.isnan(row.mean) else f"{row.mean:.1f}{ci}"
            ratio = "" if math.isnan(row.ratio) else f"  {row.ratio:.2f}x"
            lines.append(f"  {row.label:<{width}}  {row.runs} run{'s' if row.runs != 1 else ' '}  {mean}{ratio}"
                         + ("  FAILED" if row.status == "failed" else ""))
        lines += [f"  {failure!r}" for failure in self.failures]
        if len(self.hosts) > 1 and (effects := self.host_effects()) is not None:
            lines.append(f"  on {len(self.hosts)} hosts; {effects.text}")
        return "\n".join(lines)


def runs_frame(rows: list[dict[str, object]], leading: Sequence[str]) -> pd.DataFrame:
    """Rows as a DataFrame: ``leading`` columns, then run facts (ids as nullable integers), then metrics."""
    import pandas as pd

    first = [*leading, "repeat", "launch", "status", "error", "time_to_ready_s", "server_pid", "step_id", "run_id",
             "metric_lines"]
    frame = pd.DataFrame(rows)
    for column in first:
        if column not in frame:
            frame[column] = None
    frame = frame[first + [c for c in frame.columns if c not in first]]
    for column in ("repeat", "launch", "server_pid", "step_id", "run_id", "metric_lines"):
        frame[column] = frame[column].astype("Int64")
    return frame


def phases_frame(timings: Sequence[tuple[int, int, LaunchPhases]]) -> pd.DataFrame:
    """One row per launch: ``combination``, ``launch``, ``host``, then seconds per phase and ``total_s``."""
    import pandas as pd

    rows = [{"combination": combination, "launch": launch, "host": phases.host,
             **{f"{name}_s": phases.seconds.get(name, 0.0) for name in LaunchPhases.PHASES}, "total_s": phases.total}
            for combination, launch, phases in sorted(timings, key=lambda t: (t[0], t[1]))]
    return pd.DataFrame(rows, columns=["combination", "launch", "host", *(f"{n}_s" for n in LaunchPhases.PHASES),
                                       "total_s"])

"""The investigation as pictures: the timeline of steps, a bisection, the environment of every rank."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from toolkit.benchmark.labels import metric_label
from toolkit.views.plots._figure import (
    VERDICT_COLORS,
    cell_text,
    empty,
    new_figure,
    require,
    short,
    step_outcome,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["timeline", "bisect", "env_matrix"]

_PROBE_COLORS = {"good": "#2e7d32", "bad": "#c62828", "skip": "#9e9e9e", "untested": "#bdbdbd"}
# envcheck.STATUS_CODES' statuses; anything else is drawn as "other".
_ENV_COLORS = {"ok": "#a5d6a7", "overridden": "#ffe082", "missing": "#ef9a9a", "unreadable": "#b0bec5",
               "other": "#e0e0e0"}


#: Above this many steps the timeline counts outcomes per time bin instead: a bar and a label per step
#: (10,000 of them) is unreadable and took most of a 150 s report (issue 20); the report's tables list the steps.
LABELLED_STEPS = 60


def timeline(steps: pd.DataFrame, *, title: str | None = None) -> Figure:
    """The investigation's steps in time: one bar per step, coloured by verdict, hypothesis beside it.

    Over ``LABELLED_STEPS`` steps: stacked bars of the outcomes finished in each of 60 time bins.
    """
    from matplotlib.patches import Patch

    require(steps, ["seq", "title", "started_at", "finished_at"], "timeline()")
    n = len(steps)
    labelled = n <= LABELLED_STEPS
    fig, ax = new_figure(13.0, max(2.5, 0.45 * n + 1.8) if labelled else 4.5, style="white")
    ax.set_title(title or "Investigation timeline: hypotheses and verdicts")
    ax.set_xlabel("minutes since the first step")
    ax.set_ylabel("step")
    if n == 0:
        empty(ax, "no steps recorded")
        return fig
    start = steps["started_at"].min()
    begin_s = (steps["started_at"] - start).dt.total_seconds()
    end_s = (steps["finished_at"].fillna(steps["started_at"]) - start).dt.total_seconds()
    last = float(end_s.max())
    scale, unit = ((1.0, "seconds") if last < 120 else (60.0, "minutes") if last < 3 * 3600
                   else (3600.0, "hours"))
    ax.set_xlabel(f"{unit} since the first step")
    begin, end = (begin_s / scale).tolist(), (end_s / scale).tolist()
    span = max(max(end), 1e-3)
    columns = [c for c in ("status", "verdict", "kind") if c in steps.columns]
    outcomes = [step_outcome(row) for row in steps[columns].to_dict("records")]  # no Series per row
    widths = [max(e - b, span * 0.012) for b, e in zip(begin, end, strict=True)]
    seen = list(dict.fromkeys(outcomes))
    if not labelled:  # aggregate before plotting: how many steps of each outcome ended in each time bin
        _outcome_counts(ax, end, outcomes, seen, span, n, unit)
        return fig
    for outcome in seen:
        rows = [i for i, o in enumerate(outcomes) if o == outcome]
        ax.barh(rows, [widths[i] for i in rows], left=[begin[i] for i in rows], color=VERDICT_COLORS[outcome],
                height=0.6)
    notes = []
    for outcome, row in zip(outcomes, steps.to_dict("records"), strict=True):
        first, second = ("error", "hypothesis") if outcome == "failed" else ("hypothesis", "error")
        note = short(cell_text(row.get(first)).split("\n")[0], 60) or short(row.get(second), 60)
        notes.append(f"{outcome}: {note}" if note else outcome)
    ax.set_yticks(range(n), [f"#{row.seq} {short(row.title, 38)}" for row in steps.itertuples()])
    ax.invert_yaxis()
    ax.set_xlim(0, span * 1.02)
    right = ax.twinx()  # each step's outcome and hypothesis at the right edge, not stretching the axis
    right.set_ylim(ax.get_ylim())
    right.set_yticks(range(n), notes, fontsize=8, color="#424242")
    right.tick_params(axis="y", length=0)
    right.grid(False)
    ax.legend(handles=[Patch(color=VERDICT_COLORS[o], label=o) for o in seen], loc="upper center",
              bbox_to_anchor=(0.5, -0.12 if n > 3 else -0.25), ncol=len(seen), fontsize=8, frameon=False)
    return fig


def _outcome_counts(ax: Any, end: list[float], outcomes: list[str], seen: list[str], span: float, n: int,
                    unit: str) -> None:
    """Stacked bars: steps finished per time bin, by outcome (the many-steps timeline)."""
    from matplotlib.patches import Patch

    bins = 60
    width = span / bins
    counts = {o: [0] * bins for o in seen}
    for finished, outcome in zip(end, outcomes, strict=True):
        counts[outcome][min(int(finished / width), bins - 1)] += 1
    left = [i * width for i in range(bins)]
    bottom = [0] * bins
    for outcome in seen:
        ax.bar(left, counts[outcome], width=width, bottom=bottom, align="edge", color=VERDICT_COLORS[outcome],
               linewidth=0)
        bottom = [b + c for b, c in zip(bottom, counts[outcome], strict=True)]
    ax.set_ylabel(f"steps finished per {width:.2g} {unit} (of {n:,})")
    ax.set_xlim(0, span)
    ax.legend(handles=[Patch(color=VERDICT_COLORS[o], label=o) for o in seen], loc="upper right", fontsize=8)


def bisect(probes: pd.DataFrame, threshold: float | None = None, *, x: str = "commit",
           y: str = "output_throughput", status: str = "status", title: str | None = None) -> Figure:
    """Bisection probes in commit order (oldest left) against the metric, good/bad/skip coloured.

    One row per probed commit: ``commit``, the metric, ``status``; an ``order`` column sets the order.
    """
    require(probes, [x, y, status], "bisect()")
    data = probes.sort_values("order") if "order" in probes.columns else probes
    fig, ax = new_figure(max(6.0, 0.6 * len(data) + 2.5), 4.5)
    ax.set_title(title or f"Bisection: {metric_label(y)} per commit")
    ax.set_xlabel("commit (oldest → newest)")
    ax.set_ylabel(metric_label(y))
    if data.empty:
        empty(ax, "no probes yet")
        return fig
    positions = list(range(len(data)))
    values = data[y].astype("float64").tolist()
    finite = [v for v in values if not math.isnan(v)]
    floor = threshold if threshold is not None else (min(finite) if finite else 0.0)
    ax.plot(positions, values, color="#bdbdbd", linewidth=1, zorder=1)
    for outcome in _PROBE_COLORS:
        picked = [(p, v) for p, v, s in zip(positions, values, data[status], strict=True)
                  if str(s or "untested") == outcome]
        if picked:
            xs, ys = zip(*picked, strict=True)
            ys = tuple(floor if math.isnan(v) else v for v in ys)
            ax.scatter(xs, ys, s=60, color=_PROBE_COLORS[outcome], label=outcome, zorder=2,
                       marker="x" if outcome == "skip" else "o")
    if threshold is not None:
        ax.axhline(threshold, color="#424242", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
    ax.set_xticks(positions, [str(c)[:8] for c in data[x]], rotation=45, horizontalalignment="right")
    ax.legend(loc="best", fontsize=8)
    return fig


def env_matrix(env: pd.DataFrame, *, variable: str = "variable", process: str = "process",
               status: str = "status", value: str = "actual", title: str | None = None) -> Figure:
    """Environment variables × processes: ok green, overridden amber, missing red; values annotated.

    Did rank TP5 get ``NCCL_ALGO``? Takes ``envcheck.EnvReport.frame`` (``actual``, else ``value``), redacted.
    """
    import numpy as np
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    require(env, [variable, process, status], "env_matrix()")
    if value not in env.columns and "value" in env.columns:
        value = "value"
    names = list(_ENV_COLORS)
    variables = list(dict.fromkeys(env[variable].astype(str)))
    processes = list(dict.fromkeys(env[process].astype(str)))
    fig, ax = new_figure(max(5.0, 1.3 * len(processes) + 3.0), max(2.5, 0.45 * len(variables) + 1.5), "white")
    ax.set_title(title or "Environment per process: ok / overridden / missing")
    if env.empty:
        empty(ax, "no environment observed")
        return fig
    codes = np.full((len(variables), len(processes)), float(names.index("missing")))
    annot = np.full(codes.shape, "(missing)", dtype=object)
    for row in env.to_dict(orient="records"):
        i, j = variables.index(str(row[variable])), processes.index(str(row[process]))
        state = str(row[status])
        codes[i, j] = names.index(state) if state in names else names.index("other")
        annot[i, j] = "(missing)" if state == "missing" else short(row.get(value), 16)
    sns.heatmap(codes, cmap=ListedColormap([_ENV_COLORS[n] for n in names]), vmin=-0.5, vmax=len(names) - 0.5,
                annot=annot, fmt="", cbar=False, linewidths=0.5, linecolor="white", ax=ax,
                xticklabels=processes, yticklabels=variables, annot_kws={"fontsize": 8})
    ax.set_xlabel("process (rank)")
    ax.set_ylabel("environment variable")
    ax.tick_params(axis="y", labelrotation=0)
    present = {names[int(c)] for c in codes.flat}
    ax.legend(handles=[Patch(color=_ENV_COLORS[n], label=n) for n in names if n in present],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig

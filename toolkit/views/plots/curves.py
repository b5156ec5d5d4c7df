"""A sweep over a workload dimension as curves: output tok/s and median TTFT against concurrency.

Concurrencies are one curve, not configurations to compare (issue 28: notebook 07's post-mortem compared
concurrency 32 with a baseline at 1); the knee (:func:`toolkit.stats.knee`) is marked on both panels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolkit.benchmark.labels import shorten_words
from toolkit.views.plots._figure import figure_class, require

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["concurrency_curves"]


def concurrency_curves(points: pd.DataFrame, knees: Mapping[str, float | None], *,
                       title: str | None = None) -> Figure:
    """One line per ``label`` through (``concurrency``, ``tok_s``) and (``concurrency``, ``ttft_ms``).

    ``knees``: a label's knee concurrency (None: still growing), drawn dotted in the label's colour.
    """
    import seaborn as sns

    require(points, ["label", "concurrency", "tok_s", "ttft_ms"], "concurrency_curves()")
    fig = figure_class()(figsize=(10.0, 4.0), dpi=100, layout="constrained")
    with sns.axes_style("whitegrid"):
        tok_ax, ttft_ax = fig.subplots(1, 2)
    palette = sns.color_palette("colorblind", max(points["label"].nunique(), 1))
    ticks = sorted(points["concurrency"].unique())
    for color, (label, rows) in zip(palette, points.groupby("label", sort=False), strict=False):
        rows = rows.sort_values("concurrency")
        name = shorten_words(str(label), 40)
        tok_ax.plot(rows["concurrency"], rows["tok_s"], marker="o", color=color, label=name)
        ttft_ax.plot(rows["concurrency"], rows["ttft_ms"], marker="o", color=color, label=name)
        at = knees.get(str(label))
        if at is not None:
            for ax in (tok_ax, ttft_ax):
                ax.axvline(at, color=color, linestyle=":", linewidth=1.4)
            tok_ax.plot([], [], color=color, linestyle=":", label=f"knee of {name}: concurrency {at:g}")
    for ax, ylabel in ((tok_ax, "output tok/s (mean over runs)"), (ttft_ax, "median TTFT (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{c:g}" for c in ticks])
        ax.set_xlabel("max concurrency (requests in flight)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
    tok_ax.set_title("Output throughput against concurrency")
    ttft_ax.set_title("Median time to first token against concurrency")
    tok_ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.18), fontsize=8, ncols=2, frameon=False)
    if title:
        fig.suptitle(title)
    return fig

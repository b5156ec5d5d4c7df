"""Runs as pictures: throughput per configuration, latency distributions, server metrics over time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.benchmark.labels import ALIASES, LATENCY_NAMES, metric_label
from toolkit.views.plots._figure import (
    empty,
    legend_outside,
    new_figure,
    require,
    rotate_long_ticks,
    t_interval,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["throughput", "latency_ecdf", "server_metrics"]


def throughput(results: pd.DataFrame, x: str = "label", hue: str | None = None, *,
               y: str = "output_throughput", baseline: float | str | None = None, title: str | None = None,
               baseline_name: str = "baseline") -> Figure:
    """Output tok/s per configuration: every repeat as a dot, mean ± 95 % CI, a baseline line.

    ``baseline``: a number or a value of ``x`` whose mean is the line; means are annotated with their ratio
    to it (0.73x). ``baseline_name`` names it: an A/B's reference is its side A, not the baseline (issue 28).
    """
    import seaborn as sns

    require(results, [x, y, hue], "throughput()")
    data = results.dropna(subset=[y]).copy()
    data[x] = data[x].astype(str)
    order = list(dict.fromkeys(data[x]))
    fig, ax = new_figure(max(6.0, 1.3 * len(order) + 2.5), 4.8)
    ax.set_title(title or f"{metric_label(y).capitalize()} per configuration (dots: repeats; bars: 95% CI)")
    if data.empty:
        empty(ax, "no benchmark runs recorded")
    else:
        n_hue = data[hue].nunique() if hue else 1
        sns.stripplot(data=data, x=x, y=y, hue=hue, order=order, dodge=bool(hue), jitter=0.08, size=6,
                      alpha=0.55, ax=ax, legend=False, **({} if hue else {"color": "#1f77b4"}))
        sns.pointplot(data=data, x=x, y=y, hue=hue, order=order, errorbar=t_interval, linestyle="none",
                      markers="D", capsize=0.12, dodge=(0.8 - 0.8 / n_hue) if hue else False, ax=ax,
                      **({} if hue else {"color": "black"}))
    reference = None
    if isinstance(baseline, str):
        rows = data[data[x] == baseline]
        if rows.empty:
            raise ValueError(f"baseline {baseline!r} is not a value of column {x!r}; values are {order}")
        reference = float(rows[y].mean())
    elif baseline is not None:
        reference = float(baseline)
    if reference is not None:
        ax.axhline(reference, color="#c62828", linestyle="--", linewidth=1.2,
                   label=f"{baseline_name} {reference:.1f} {metric_label(y)}")
        if not hue and reference:
            means = data.groupby(x, sort=False)[y].mean()
            for position, name in enumerate(order):
                ax.annotate(f"{means[name]:.1f} ({means[name] / reference:.2f}x)", (position, means[name]),
                            xytext=(18, 0), textcoords="offset points", va="center", fontsize=8)
        ax.legend(loc="best", fontsize=8, title=hue)
    ax.set_xlabel("configuration" if x == "label" else x)
    ax.set_ylabel(metric_label(y))
    ax.set_ylim(bottom=0)
    rotate_long_ticks(ax, order)
    return fig


def latency_ecdf(requests: pd.DataFrame, metric: str = "ttft_ms", hue: str | None = "label", *,
                 log_x: bool = False, title: str | None = None) -> Figure:
    """ECDF of a per-request latency (``ttft_ms``, ``tpot_ms``, ``e2el_ms``) or of pooled ``itl_ms`` gaps.

    ITL cells hold one list of gaps per request (vLLM/SGLang: gaps between streamed chunks, pooled), exploded.
    """
    import seaborn as sns

    require(requests, [metric, hue], "latency_ecdf()")
    data = requests[[c for c in (metric, hue) if c is not None]].copy()
    if hue:  # how many requests stand behind each curve (3 requests draw a staircase, not a distribution)
        data[hue] = data[hue].astype(str)
        counts = data.dropna(subset=[metric])[hue].value_counts()
        data[hue] = [f"{value} (n={counts.get(value, 0)} requests)" for value in data[hue]]
    if data[metric].map(lambda v: isinstance(v, list | tuple)).any():
        data = data.explode(metric)
    data[metric] = data[metric].astype("float64")
    data = data.dropna(subset=[metric])
    fig, ax = new_figure(9.0, 4.5)
    name = LATENCY_NAMES.get(metric.removesuffix("_ms"), metric)
    pooled = metric == "itl_ms"
    ax.set_title(title or f"{name} distribution per configuration"
                 + ("\n(per streamed chunk: gaps between chunks, all requests pooled)" if pooled else ""))
    if data.empty:
        empty(ax, f"no {name} values recorded")
    else:
        sns.ecdfplot(data=data, x=metric, hue=hue, ax=ax, log_scale=log_x or None)
        legend_outside(fig, ax, "configuration")
    ax.set_xlabel(metric_label(metric) + (" per chunk" if pooled else ""))
    ax.set_ylabel("fraction of inter-chunk gaps" if pooled else "fraction of requests")
    return fig


def server_metrics(metric_rows: pd.DataFrame, y: str = "gen_throughput", *, hue: str | None = "label",
                   x: str = "t_s", title: str | None = None) -> Figure:
    """A server-side metric (``gen_throughput``, ``accept_len``) over the run, one line per run."""
    import seaborn as sns

    fig, ax = new_figure(7.5, 4.2)
    ax.set_ylabel(metric_label(y))
    if metric_rows.empty:
        empty(ax, "no metric lines recorded")
        ax.set_title(title or f"{metric_label(y)} over time (server log)")
        ax.set_xlabel(metric_label(x))
        return fig
    column = next((c for c in (y, *ALIASES.get(y, ())) if c in metric_rows.columns), None)
    if column is None:
        numeric = [c for c in metric_rows.columns if c not in ("step_id", "run_id", "line_no", "t_s")
                   and str(metric_rows[c].dtype) in ("float64", "int64", "Float64", "Int64")]
        raise ValueError(f"server_metrics() has no column {y!r}; numeric columns are {numeric}")
    x = x if x in metric_rows.columns else "line_no"
    data = metric_rows.dropna(subset=[column])
    if hue in data.columns:
        data[hue] = data[hue].astype(str)
    sns.lineplot(data=data, x=x, y=column, hue=hue if hue in data.columns else None, marker="o", markersize=4,
                 errorbar=None, ax=ax)
    ax.set_title(title or f"{metric_label(y).capitalize()} over time (server log)")
    ax.set_xlabel(metric_label(x) if x == "t_s" else "log line")
    ax.set_ylim(bottom=0)  # an accept length of 1.80-1.98 drawn from 1.80 looked like a collapse (issue 28)
    legend_outside(fig, ax, "run")
    return fig



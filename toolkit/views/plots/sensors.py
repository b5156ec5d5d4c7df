"""What a run saw besides its numbers: GPU telemetry beside throughput, server metrics, kernels, profiles."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolkit.benchmark.labels import ALIASES, metric_label
from toolkit.views.plots._figure import empty, figure_class, new_figure, require, short

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["telemetry", "server_metrics_over_time", "kernels", "profile_phases", "profile_comparison", "WHERE_COLORS"]

WHERE_COLORS = {"CUDA graph": "#2e7d32", "eager": "#c62828", "mixed": "#f5a623", "—": "#9e9e9e"}
_LOG_THROUGHPUT = ("gen_throughput", *ALIASES["gen_throughput"])


def _runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``run``: label and run id, so repeats stay apart (``decode, run 10``: ``#10`` names a step)."""
    data = frame.copy()
    ids = data["run_id"].astype("Int64").astype(str) if "run_id" in data.columns else ""
    data["run"] = data["label"].astype(str).map(lambda s: short(s, 40)) + ", run " + ids
    return data


def _panels(rows: int, width: float, height: float) -> tuple[Figure, list[Axes]]:
    import seaborn as sns

    fig = figure_class()(figsize=(width, height), dpi=100, layout="constrained")
    with sns.axes_style("whitegrid"):
        axes = fig.subplots(rows, 1, sharex=True)
    return fig, list(axes) if rows > 1 else [axes]


def telemetry(metric_lines: pd.DataFrame, *, title: str | None = None) -> Figure:
    """GPU utilisation and power over each run (mean over the GPUs) above the log's generation throughput.

    ``metric_lines``: ``journal.metric_lines()``; one colour per run; simulated samples say so in the title.
    """
    import seaborn as sns

    require(metric_lines, ["kind", "label"], "telemetry()")
    gpu = metric_lines[metric_lines["kind"] == "gpu"]
    fig, axes = _panels(3, 9.0, 8.0)
    simulated = "simulated" in gpu.columns and bool(gpu["simulated"].fillna(False).astype(bool).any())
    axes[0].set_title(title or ("GPU telemetry per run" + (" (SIMULATED GPUs)" if simulated else "")))
    if gpu.empty:
        for ax in axes:
            empty(ax, "no GPU telemetry recorded (tk.observed(...) samples it)")
        return fig
    data = _runs(gpu)
    columns = [c for c in ("gpu_util_pct", "power_w") if c in data.columns]
    # one point per sample time: the mean over the GPUs (per-GPU lines of an 8-GPU host are unreadable)
    data = data.groupby(["run", "t_s"], sort=False)[columns].mean().reset_index()
    for ax, column in zip(axes[:2], ("gpu_util_pct", "power_w"), strict=True):
        if column in data.columns and data[column].notna().any():
            sns.lineplot(data=data.dropna(subset=[column]), x="t_s", y=column, hue="run", estimator=None,
                         errorbar=None, ax=ax, legend=ax is axes[0])
        else:
            empty(ax, f"the GPUs reported no {metric_label(column)}")
        ax.set_ylabel(metric_label(column))
    throughput = metric_lines[metric_lines["run_id"].isin(gpu["run_id"].unique())]
    found = next((c for c in _LOG_THROUGHPUT if c in throughput.columns and throughput[c].notna().any()), None)
    if found is None:
        empty(axes[2], "the server log has no throughput lines for these runs")
    else:
        sns.lineplot(data=_runs(throughput.dropna(subset=[found])), x="t_s", y=found, hue="run", marker="o",
                     markersize=4, errorbar=None, ax=axes[2], legend=False)
    axes[2].set_ylabel("generation tok/s (server log)")
    axes[2].set_xlabel(metric_label("t_s"))
    axes[0].set_ylim(0, 105)
    _figure_legend(fig, axes[0])
    return fig


def _figure_legend(fig: Figure, ax: Axes) -> None:
    """One legend for all panels, right of them (an axes legend would stretch its own panel)."""
    legend = ax.get_legend()
    if legend is None:
        return
    handles, labels = ax.get_legend_handles_labels()
    legend.remove()
    fig.legend(handles, labels, loc="outside right upper", title="run", fontsize=8)


_SERVER_SERIES = (("running_requests", "running_req"), ("waiting_requests", "queue_req"),
                  ("kv_cache_usage", None), ("spec_accept_length", "accept_len"))


def server_metrics_over_time(metric_lines: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Scraped ``/metrics`` (kind ``prometheus``) per run, lines; the log's metric lines on the same axes, dots."""
    import seaborn as sns

    require(metric_lines, ["kind", "label"], "server_metrics_over_time()")
    scraped = metric_lines[metric_lines["kind"] == "prometheus"]
    series = [(s, log) for s, log in _SERVER_SERIES if s in scraped.columns and scraped[s].notna().any()]
    fig, axes = _panels(max(len(series), 1), 9.0, 2.3 * max(len(series), 1) + 0.8)
    axes[0].set_title(title or "Server metrics over each run (/metrics lines, log metric lines as dots)")
    if not series:
        empty(axes[0], "no /metrics scrapes recorded (SGLang needs --enable-metrics)")
        return fig
    data = _runs(scraped)
    logs = _runs(metric_lines[metric_lines["run_id"].isin(scraped["run_id"].unique())
                              & metric_lines["kind"].isin(["sglang_decode", "vllm_throughput"])])
    for ax, (column, log_column) in zip(axes, series, strict=True):
        sns.lineplot(data=data.dropna(subset=[column]), x="t_s", y=column, hue="run", errorbar=None, ax=ax,
                     legend=ax is axes[0], drawstyle="steps-post")
        if log_column and log_column in logs.columns and logs[log_column].notna().any():
            sns.scatterplot(data=logs.dropna(subset=[log_column]), x="t_s", y=log_column, hue="run", ax=ax,
                            legend=False, s=18, marker="o", alpha=0.6)
        ax.set_ylabel(metric_label(column))
    axes[-1].set_xlabel(metric_label("t_s"))
    _figure_legend(fig, axes[0])
    return fig


def kernels(table: pd.DataFrame, *, top: int = 15, title: str | None = None) -> Figure:
    """A profile's top kernels (``Profile.kernels()``) by GPU time, bars coloured by where they ran."""
    require(table, ["phase", "kernel", "total_ms", "where"], "kernels()")
    data = table.head(top)
    fig, ax = new_figure(9.0, 0.38 * max(len(data), 3) + 1.4)
    ax.set_title(title or f"Top {len(data)} kernels by GPU time (green: inside a CUDA graph, red: eager)")
    if data.empty:
        empty(ax, "the profile holds no kernels")
        return fig
    names = [f"{row.phase}: {short(row.kernel, 55)}" for row in data.itertuples()]
    colors = [WHERE_COLORS.get(str(w), "#9e9e9e") for w in data["where"]]
    ax.barh(range(len(data)), data["total_ms"], color=colors)
    ax.set_yticks(range(len(data)), names, fontsize=8)
    ax.invert_yaxis()
    for i, row in enumerate(data.itertuples()):
        ax.annotate(f"{row.share_pct:.1f}%  {row.calls} calls", (row.total_ms, i), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_xlabel(metric_label("total_ms"))
    return fig


def profile_phases(phases: Mapping[str, pd.DataFrame], *, title: str | None = None) -> Figure:
    """GPU ms per phase for each profile (``{label: profile.phases()}``): solid inside CUDA graphs, hatched eager."""
    fig, ax = new_figure(8.0, 0.9 * max(len(phases), 1) + 1.8)
    ax.set_title(title or "GPU time per phase (solid: inside CUDA graphs; hatched: launched eagerly)")
    if not phases:
        empty(ax, "no profiles")
        return fig
    order = ["prefill", "draft", "verify", "draft_extend", "decode", "batched step", "(unknown)"]
    palette = {"prefill": "#1f77b4", "draft": "#9467bd", "verify": "#d62728", "draft_extend": "#8c564b",
               "decode": "#2ca02c", "batched step": "#17becf", "(unknown)": "#7f7f7f"}
    seen: set[str] = set()
    for y, table in enumerate(phases.values()):
        left = 0.0
        rows = {str(r.phase): r for r in table.itertuples()}
        for phase in [p for p in order if p in rows] + [p for p in rows if p not in order]:
            row = rows[phase]
            graph_ms = row.gpu_ms * row.graph_time_pct / 100.0
            color = palette.get(phase, "#7f7f7f")
            name = phase if phase not in seen else None
            seen.add(phase)
            ax.barh(y, graph_ms, left=left, color=color, label=name)
            ax.barh(y, row.gpu_ms - graph_ms, left=left + graph_ms, color="white", edgecolor=color, hatch="///")
            left += row.gpu_ms
    ax.set_yticks(range(len(phases)), [short(k, 40) for k in phases], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("GPU time in the profile (ms)")
    if seen:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="phase")
    else:
        empty(ax, "the profiles hold no GPU kernels (a CPU-only trace?)")
    return fig


def profile_comparison(frame: pd.DataFrame, *, top: int = 15, title: str | None = None) -> Figure:
    """Kernels whose GPU time changed most between two profiles (``compare_profiles(a, b)``), labelled how."""
    require(frame, ["phase", "kernel", "delta_ms", "moved"], "profile_comparison()")
    data = frame.head(top)
    label_a, label_b = frame.attrs.get("label_a", "A"), frame.attrs.get("label_b", "B")
    fig, ax = new_figure(10.0, 0.4 * max(len(data), 3) + 1.6)
    ax.set_title(title or f"GPU time change per kernel\n{short(label_a, 45)} → {short(label_b, 45)}", fontsize=10)
    if data.empty:
        empty(ax, "nothing to compare")
        return fig
    colors = ["#2e7d32" if "into CUDA graph" in str(m) else "#c62828" if "out of" in str(m) else
              "#1f77b4" if float(d) < 0 else "#f5a623" for m, d in zip(data["moved"], data["delta_ms"], strict=True)]
    ax.barh(range(len(data)), data["delta_ms"], color=colors)
    names = [f"{r.phase}: {short(r.kernel, 44)}  [{short(str(r.moved).replace(label_a, 'A').replace(label_b, 'B'), 24)}]"
             for r in data.itertuples()]
    ax.set_yticks(range(len(data)), names, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(metric_label("delta_ms") + " (green: into a CUDA graph, red: out of one)")
    return fig

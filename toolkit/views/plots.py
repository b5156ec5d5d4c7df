"""DataFrame -> seaborn figure, for the pictures a person would rather look at than read.

Each function takes the journal's tidy DataFrames (no SQL, no SSH) and returns a
``matplotlib.figure.Figure`` built without pyplot: nothing global is touched, no GUI
backend is needed (headless kernels and CI render the same), no figure is left open in
pyplot's registry, and Jupyter shows the returned figure once. Save with
``fig.savefig("x.png")``.

Styles are applied per figure (``sns.axes_style``), never with ``sns.set_theme``, so
importing this module changes nobody's plots. Axis labels carry units ("output tok/s",
"ms"); error bars are Student-t confidence intervals of the mean over repeats, the same
statistics as :mod:`toolkit.stats`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolkit.redaction import redact_text
from toolkit.stats import t_quantile

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["throughput", "latency_ecdf", "server_metrics", "timeline", "bisect", "env_matrix", "metric_label",
           "VERDICT_COLORS"]

VERDICT_COLORS = {
    "confirmed": "#2e7d32", "refuted": "#9e9e9e", "inconclusive": "#f5a623", "failed": "#c62828",
    "interrupted": "#8e24aa", "running": "#90caf9", "no verdict": "#1f77b4", "note": "#90a4ae",
}
_PROBE_COLORS = {"good": "#2e7d32", "bad": "#c62828", "skip": "#9e9e9e", "untested": "#bdbdbd"}
# envcheck.STATUS_CODES' statuses; anything else is drawn as "other".
_ENV_COLORS = {"ok": "#a5d6a7", "overridden": "#ffe082", "missing": "#ef9a9a", "unreadable": "#b0bec5",
               "other": "#e0e0e0"}
_LATENCY_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "end-to-end latency"}
_LABELS = {
    "output_throughput": "output tok/s", "total_token_throughput": "total tok/s (in + out)",
    "request_throughput": "requests/s", "accept_length": "accept length (tokens/step)",
    "accept_len": "accept length (tokens/step)", "gen_throughput": "generation tok/s",
    "t_s": "seconds since the run's first metric line", "time_to_ready_s": "time to ready (s)",
}
# Names the log parser may use for the same server metric.
_ALIASES = {
    "gen_throughput": ("gen_throughput_tok_s", "generation_throughput", "avg_generation_throughput"),
    "accept_len": ("accept_length", "mean_acceptance_length", "accept_len_tokens"),
}


def metric_label(name: str) -> str:
    """An axis label with units for a metric column: ``median_ttft_ms`` -> ``median TTFT (ms)``."""
    if name in _LABELS:
        return _LABELS[name]
    if name.endswith("_ms"):
        stem = name.removesuffix("_ms")
        stat, _, base = stem.partition("_") if "_" in stem else ("", "", stem)
        if base in _LATENCY_NAMES:
            return f"{stat} {_LATENCY_NAMES[base]} (ms)".strip()
        return f"{_LATENCY_NAMES.get(stem, stem)} (ms)"
    return name.replace("_", " ")


@functools.cache
def _figure_class() -> type[Figure]:
    """A Figure that shows itself in a notebook as a PNG.

    The plots never touch pyplot (no global figure registry, nothing left open, headless by
    construction), so IPython's inline backend, which pyplot's import installs, is never
    there to display them: the figure renders itself instead.
    """
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            FigureCanvasAgg(self).print_png(buffer)
            return buffer.getvalue()

    return NotebookFigure


def _new_figure(width: float, height: float, style: str = "whitegrid") -> tuple[Figure, Axes]:
    import seaborn as sns

    fig = _figure_class()(figsize=(width, height), dpi=100, layout="constrained")
    with sns.axes_style(style):
        ax = fig.add_subplot()
    return fig, ax


def _require(frame: pd.DataFrame, columns: Sequence[str | None], what: str) -> None:
    missing = [c for c in columns if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs the column(s) {missing}; the DataFrame has {list(frame.columns)}")


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#757575")


def _t_interval(values: Any) -> tuple[float, float]:
    xs = [float(v) for v in values]
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return (mean, mean)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    half = t_quantile(0.975, len(xs) - 1) * sd / math.sqrt(len(xs))
    return (mean - half, mean + half)


def _rotate_long_ticks(ax: Axes, labels: Sequence[str]) -> None:
    if sum(len(s) for s in labels) > 60:
        for tick in ax.get_xticklabels():
            tick.set_rotation(20)
            tick.set_horizontalalignment("right")


def throughput(
    results: pd.DataFrame, x: str = "label", hue: str | None = None, *, y: str = "output_throughput",
    baseline: float | str | None = None, title: str | None = None,
) -> Figure:
    """Output tok/s per configuration: every repeat as a dot, mean ± 95 % CI, a baseline line.

    ``baseline`` is a number (tok/s) or a value of ``x`` whose mean becomes the line; each
    mean is then annotated with its ratio to it (0.73x).
    """
    import seaborn as sns

    _require(results, [x, y, hue], "throughput()")
    data = results.dropna(subset=[y]).copy()
    data[x] = data[x].astype(str)
    order = list(dict.fromkeys(data[x]))
    fig, ax = _new_figure(max(6.0, 1.3 * len(order) + 2.5), 4.8)
    ax.set_title(title or f"{metric_label(y).capitalize()} per configuration (dots: repeats; bars: 95% CI)")
    if data.empty:
        _empty(ax, "no benchmark runs recorded")
    else:
        n_hue = data[hue].nunique() if hue else 1
        sns.stripplot(data=data, x=x, y=y, hue=hue, order=order, dodge=bool(hue), jitter=0.08, size=6,
                      alpha=0.55, ax=ax, legend=False, **({} if hue else {"color": "#1f77b4"}))
        sns.pointplot(data=data, x=x, y=y, hue=hue, order=order, errorbar=_t_interval, linestyle="none",
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
                   label=f"baseline {reference:.1f} {metric_label(y)}")
        if not hue and reference:
            means = data.groupby(x, sort=False)[y].mean()
            for position, name in enumerate(order):
                ax.annotate(f"{means[name]:.1f} ({means[name] / reference:.2f}x)", (position, means[name]),
                            xytext=(18, 0), textcoords="offset points", va="center", fontsize=8)
        ax.legend(loc="best", fontsize=8, title=hue)
    ax.set_xlabel("configuration" if x == "label" else x)
    ax.set_ylabel(metric_label(y))
    ax.set_ylim(bottom=0)
    _rotate_long_ticks(ax, order)
    return fig


def latency_ecdf(
    requests: pd.DataFrame, metric: str = "ttft_ms", hue: str | None = "label", *, log_x: bool = False,
    title: str | None = None,
) -> Figure:
    """ECDF of a per-request latency (``ttft_ms``, ``tpot_ms``, ``e2el_ms``) or of pooled ``itl_ms`` gaps.

    ITL cells hold one list of gaps per request (vLLM/SGLang definition: gaps between streamed
    chunks, pooled over requests); they are exploded so every gap counts once.
    """
    import seaborn as sns

    _require(requests, [metric, hue], "latency_ecdf()")
    data = requests[[c for c in (metric, hue) if c is not None]].copy()
    if data[metric].map(lambda v: isinstance(v, list | tuple)).any():
        data = data.explode(metric)
    data[metric] = data[metric].astype("float64")
    data = data.dropna(subset=[metric])
    if hue:
        data[hue] = data[hue].astype(str)
    fig, ax = _new_figure(7.0, 4.5)
    name = _LATENCY_NAMES.get(metric.removesuffix("_ms"), metric)
    pooled = metric == "itl_ms"
    ax.set_title(title or f"{name} distribution per configuration" + (" (all gaps pooled)" if pooled else ""))
    if data.empty:
        _empty(ax, f"no {name} values recorded")
    else:
        sns.ecdfplot(data=data, x=metric, hue=hue, ax=ax, log_scale=log_x or None)
        legend = ax.get_legend()
        if legend is not None:
            legend.set_title("configuration")
    ax.set_xlabel(metric_label(metric))
    ax.set_ylabel("fraction of inter-token gaps" if pooled else "fraction of requests")
    return fig


def _resolve_alias(frame: pd.DataFrame, y: str) -> str:
    if y in frame.columns:
        return y
    for alias in _ALIASES.get(y, ()):
        if alias in frame.columns:
            return alias
    numeric = [c for c in frame.columns if c not in ("step_id", "run_id", "line_no", "t_s")
               and str(frame[c].dtype) in ("float64", "int64", "Float64", "Int64")]
    raise ValueError(f"server_metrics() has no column {y!r}; numeric columns are {numeric}")


def server_metrics(
    metric_rows: pd.DataFrame, y: str = "gen_throughput", *, hue: str | None = "label", x: str = "t_s",
    title: str | None = None,
) -> Figure:
    """A server-side metric (``gen_throughput``, ``accept_len``) over the run, one line per run."""
    import seaborn as sns

    fig, ax = _new_figure(7.5, 4.2)
    if metric_rows.empty:
        _empty(ax, "no metric lines recorded")
        ax.set_title(title or f"{metric_label(y)} over time (server log)")
        ax.set_xlabel(metric_label(x))
        ax.set_ylabel(metric_label(y))
        return fig
    column = _resolve_alias(metric_rows, y)
    data = metric_rows.copy()
    if x not in data.columns:
        x = "line_no"
    data = data.dropna(subset=[column])
    if hue in data.columns:
        data[hue] = data[hue].astype(str)
    sns.lineplot(data=data, x=x, y=column, hue=hue if hue in data.columns else None, marker="o", markersize=4,
                 errorbar=None, ax=ax)
    ax.set_title(title or f"{metric_label(y).capitalize()} over time (server log)")
    ax.set_xlabel(metric_label(x) if x == "t_s" else "log line")
    ax.set_ylabel(metric_label(y))
    if ax.get_legend() is not None:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), title="run", fontsize=8)
    return fig


def _text(value: Any) -> str:
    """'' for None/NaN/NA, else the redacted string: DataFrame cells are often missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or repr(value) in ("<NA>", "NaT"):
        return ""
    return redact_text(str(value))


def _outcome(row: Any) -> str:
    if row.get("status") in ("failed", "interrupted", "running"):
        return str(row["status"])
    verdict = _text(row.get("verdict"))
    if verdict in VERDICT_COLORS:
        return verdict
    return "note" if row.get("kind") == "note" else "no verdict"


def _short(value: Any, limit: int) -> str:
    text = " ".join(_text(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _time_unit(span_s: float) -> tuple[float, str]:
    if span_s < 120:
        return 1.0, "seconds"
    return (60.0, "minutes") if span_s < 3 * 3600 else (3600.0, "hours")


def timeline(steps: pd.DataFrame, *, title: str | None = None) -> Figure:
    """The investigation's steps in time: one bar per step, coloured by verdict, hypothesis beside it.

    Confirmed green, refuted grey, inconclusive amber, failed red, interrupted purple.
    """
    from matplotlib.patches import Patch

    _require(steps, ["seq", "title", "started_at", "finished_at"], "timeline()")
    n = len(steps)
    fig, ax = _new_figure(11.0, max(2.5, 0.45 * n + 1.5), style="white")
    ax.set_title(title or "Investigation timeline: hypotheses and verdicts")
    ax.set_xlabel("minutes since the first step")
    ax.set_ylabel("step")
    if n == 0:
        _empty(ax, "no steps recorded")
        return fig
    start = steps["started_at"].min()
    begin_s = (steps["started_at"] - start).dt.total_seconds()
    end_s = (steps["finished_at"].fillna(steps["started_at"]) - start).dt.total_seconds()
    scale, unit = _time_unit(float(end_s.max()))
    ax.set_xlabel(f"{unit} since the first step")
    begin, end = begin_s / scale, end_s / scale
    span = max(float(end.max()), 1e-3)
    seen: dict[str, None] = {}
    for i, (_, row) in enumerate(steps.iterrows()):
        outcome = _outcome(row)
        seen[outcome] = None
        width = max(float(end.iloc[i] - begin.iloc[i]), span * 0.012)
        ax.barh(i, width, left=float(begin.iloc[i]), color=VERDICT_COLORS[outcome], height=0.6)
        first, second = ("error", "hypothesis") if outcome == "failed" else ("hypothesis", "error")
        note = _short(_text(row.get(first)).split("\n")[0], 70) or _short(row.get(second), 70)
        text = f"{outcome}: {note}" if note else outcome
        ax.annotate(text, (float(begin.iloc[i]) + width, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8, color="#424242")
    ax.set_yticks(range(n), [f"#{row.seq} {_short(row.title, 38)}" for row in steps.itertuples()])
    ax.invert_yaxis()
    ax.set_xlim(0, span * 1.9 + 0.05)  # room for the hypothesis text
    ax.legend(handles=[Patch(color=VERDICT_COLORS[o], label=o) for o in seen], loc="lower right", fontsize=8)
    return fig


def bisect(
    probes: pd.DataFrame, threshold: float | None = None, *, x: str = "commit", y: str = "output_throughput",
    status: str = "status", title: str | None = None,
) -> Figure:
    """Bisection probes in commit order (oldest left) against the metric, good/bad/skip coloured.

    ``probes`` has one row per probed commit: ``commit``, the metric, and ``status``
    (good, bad, skip, untested). An ``order`` column, if present, sets the commit order.
    """
    _require(probes, [x, y, status], "bisect()")
    data = probes.sort_values("order") if "order" in probes.columns else probes
    fig, ax = _new_figure(max(6.0, 0.6 * len(data) + 2.5), 4.5)
    ax.set_title(title or f"Bisection: {metric_label(y)} per commit")
    ax.set_xlabel("commit (oldest → newest)")
    ax.set_ylabel(metric_label(y))
    if data.empty:
        _empty(ax, "no probes yet")
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
    ax.set_xticks(positions, [str(c)[:8] for c in data[x]])
    for tick in ax.get_xticklabels():
        tick.set_rotation(45)
        tick.set_horizontalalignment("right")
    ax.legend(loc="best", fontsize=8)
    return fig


def env_matrix(
    env: pd.DataFrame, *, variable: str = "variable", process: str = "process", status: str = "status",
    value: str = "actual", title: str | None = None,
) -> Figure:
    """Environment variables × processes: ok green, overridden amber, missing red; values annotated.

    The question it answers at a glance: did rank TP5 get ``NCCL_ALGO``? Takes
    ``envcheck.EnvReport.frame`` as it is (``actual`` holds the value; a ``value`` column
    is used when there is no ``actual``). Values are redacted.
    """
    import numpy as np
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    _require(env, [variable, process, status], "env_matrix()")
    if value not in env.columns and "value" in env.columns:
        value = "value"
    names = list(_ENV_COLORS)
    variables = list(dict.fromkeys(env[variable].astype(str)))
    processes = list(dict.fromkeys(env[process].astype(str)))
    fig, ax = _new_figure(max(5.0, 1.3 * len(processes) + 3.0), max(2.5, 0.45 * len(variables) + 1.5), "white")
    ax.set_title(title or "Environment per process: ok / overridden / missing")
    if env.empty:
        _empty(ax, "no environment observed")
        return fig
    codes = np.full((len(variables), len(processes)), float(names.index("missing")))
    annot = np.full(codes.shape, "(missing)", dtype=object)
    for row in env.itertuples(index=False):
        i, j = variables.index(str(getattr(row, variable))), processes.index(str(getattr(row, process)))
        state = str(getattr(row, status))
        codes[i, j] = names.index(state) if state in names else names.index("other")
        shown = getattr(row, value, None) if value in env.columns else None
        annot[i, j] = "(missing)" if state == "missing" else _short(shown, 16)
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

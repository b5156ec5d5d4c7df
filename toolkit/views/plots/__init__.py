"""DataFrames and results -> seaborn figures, for the pictures a person would rather look at than read.

Each function returns a ``matplotlib.figure.Figure`` built without pyplot: nothing global is
touched, no GUI backend is needed (headless kernels and CI render the same), no figure is left
open in pyplot's registry, and Jupyter shows the returned figure once (it renders itself as a
PNG). Save with ``fig.savefig("x.png")``.

Styles are applied per figure (``sns.axes_style``), never with ``sns.set_theme``, so importing
this package changes nobody's plots. Axis labels carry units ("output tok/s", "ms"); error bars
are Student-t confidence intervals of the mean over repeats (:func:`toolkit.stats.mean_interval`).

- :mod:`.runs`: ``throughput``, ``latency_ecdf``, ``server_metrics`` (journal DataFrames);
- :mod:`.curves`: ``concurrency_curves`` (a sweep over concurrency, its knee marked);
- :mod:`.story`: ``timeline``, ``bisect``, ``env_matrix``;
- :mod:`.results`: ``ab``, ``sweep``, ``bisection``, ``env`` (the toolkit's result objects);
- :mod:`.sensors`: ``telemetry``, ``server_metrics_over_time``, ``kernels``, ``profile_phases``,
  ``profile_comparison`` (what a run saw besides its numbers, and profiles);
- :mod:`.diagnosis`: ``diagnosis`` (a diagnosis's ranked reasons and its profiles per output token).
"""

from __future__ import annotations

from toolkit.benchmark.labels import metric_label
from toolkit.views.plots._figure import VERDICT_COLORS
from toolkit.views.plots.curves import concurrency_curves
from toolkit.views.plots.diagnosis import diagnosis
from toolkit.views.plots.results import ab, bisection, env, sweep
from toolkit.views.plots.runs import latency_ecdf, server_metrics, throughput
from toolkit.views.plots.sensors import (
           kernels,
           profile_comparison,
           profile_phases,
           server_metrics_over_time,
           telemetry,
)
from toolkit.views.plots.story import bisect, env_matrix, timeline

__all__ = ["throughput", "latency_ecdf", "server_metrics", "timeline", "bisect", "env_matrix", "ab", "sweep",
           "bisection", "env", "metric_label", "VERDICT_COLORS", "telemetry", "server_metrics_over_time", "kernels",
           "profile_phases", "profile_comparison", "concurrency_curves", "diagnosis"]

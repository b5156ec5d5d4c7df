"""DataFrames and results -> seaborn figures, for the pictures a person would rather look at than read.

Each function returns a ``matplotlib.figure.Figure`` built without pyplot: nothing global touched, no
GUI backend needed, nothing left open; it renders itself as a PNG in Jupyter. Styles are per figure
(``sns.axes_style``, never ``sns.set_theme``), so importing this changes nobody's plots. Error bars are
Student-t intervals of the mean over repeats (:func:`toolkit.stats.mean_interval`).
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

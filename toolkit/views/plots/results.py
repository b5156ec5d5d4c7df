"""The toolkit's own results as pictures: an A/B test, a sweep, a bisection, an env check.

Results hold data; drawing them is a view's job, here.

>>> ab = tk.compare_flag(host, eagle, "--speculative-attention-mode", "prefill", "decode")  # doctest: +SKIP
>>> tk.plots.ab(ab)                                                                        # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.benchmark.labels import metric_label
from toolkit.moves.abtest import ABResult
from toolkit.moves.bisect.result import BisectResult
from toolkit.moves.envcheck.report import EnvReport
from toolkit.moves.sweep_result import SweepResult
from toolkit.views.plots._figure import short
from toolkit.views.plots.runs import throughput
from toolkit.views.plots.story import bisect, env_matrix

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ab", "sweep", "bisection", "env"]


def ab(result: ABResult, metric: str | None = None, *, by_host: bool = False) -> Figure:
    """Both sides' runs as dots with mean ± 95 % CI, A as the baseline line, ratios annotated.

    ``by_host`` colours the runs by the host they ran on (a slow node shows as its own colour).
    """
    data = result.frame[result.frame["status"] == "ok"]
    title = result.summary_text if len(result.summary_text) < 110 else None
    return throughput(data, x="label", hue="host" if by_host else None, y=metric or result.metric,
                      baseline=result.label_a, title=title, baseline_name=f"side A ({result.label_a})")


def sweep(result: SweepResult, metric: str = "output_throughput", *, baseline: float | str | None = None,
          by_host: bool = False) -> Figure:
    """Every run as a dot and each combination's mean ± 95 % CI (per host with ``by_host``)."""
    frame = result.frame
    data = frame[frame["status"] == "ok"] if "status" in frame else frame
    varied = ", ".join(result.params) or "configuration"
    return throughput(data, x="label", hue="host" if by_host else None, y=metric, baseline=baseline,
                      title=f"{metric_label(metric).capitalize()} by {varied}" + (" and host" if by_host else ""))


def bisection(result: BisectResult, *, title: str | None = None) -> Figure:
    """The metric per probed commit (oldest left), good/bad/skip coloured, threshold dashed."""
    data = result.frame.rename(columns={"median": result.metric})
    if title is None and result.first_bad:
        title = f"Bisection: first bad {result.first_bad[:8]} {short(result.first_bad_subject, 60)}".strip()
    return bisect(data, result.threshold, y=result.metric, status="verdict", title=title)


def env(report: EnvReport, *, title: str | None = None) -> Figure:
    """Variables x processes coloured by status, values annotated."""
    return env_matrix(report.frame, title=title)

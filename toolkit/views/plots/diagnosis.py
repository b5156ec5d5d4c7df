"""A diagnosis drawn: how much of the gap each reason accounts for, and where the profiles' time per token went."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolkit.moves.diagnose import Diagnosis
from toolkit.views.plots._figure import empty, figure_class, short

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["diagnosis"]

_CONFIDENCE = {"high": "#c62828", "medium": "#f5a623", "low": "#90a4ae"}


def diagnosis(record: Diagnosis | Mapping[str, Any], *, top: int = 8) -> Figure:
    """Left: the share of the gap per ranked reason (colour: confidence; grey at 0: ruled out).
    Right: each side's profiled milliseconds per output token, per group of work (solid busy, hatched idle).

    ``record``: a :class:`~toolkit.moves.diagnose.Diagnosis` or its JSON record (``load_diagnosis(folder)``).
    """
    data = record.to_dict() if isinstance(record, Diagnosis) else dict(record)
    import seaborn as sns

    height = 0.45 * max(min(len(data.get("reasons", [])), top), 3) + 2.0
    fig = figure_class()(figsize=(13.0, height), dpi=100, layout="constrained")
    with sns.axes_style("whitegrid"):
        left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    fig.suptitle(short(str(data.get("summary", "")), 140), fontsize=9)
    reasons = list(data.get("reasons", []))[:top]
    if not data.get("gap", {}).get("beyond_noise"):
        empty(left, "no difference beyond noise: nothing to rank")
    elif not reasons:
        empty(left, "no differences were seen")
    else:
        labels = [f"{r['rank']}. {short(r['title'], 60)}" for r in reasons]
        shares = [100.0 * (r["share"] or 0.0) for r in reasons]
        colors = ["#bdbdbd" if r["ruled_out"] else _CONFIDENCE.get(r["confidence"], "#90a4ae") for r in reasons]
        left.barh(range(len(reasons)), shares, color=colors)
        for y, r in enumerate(reasons):
            text = "ruled out" if r["ruled_out"] else ("not measured" if r["share"] is None else f"{shares[y]:.0f}%")
            left.text(max(shares[y], 0.0) + 1.0, y, text, va="center", fontsize=8)
        left.set_yticks(range(len(reasons)), labels, fontsize=8)
        left.invert_yaxis()
        left.set_xlabel("share of the gap per output token (%)")
        left.set_title("reasons, ranked (colour: confidence)", fontsize=9)
    profiles = data.get("profiles", {})
    if not profiles:
        empty(right, "no profiles (no gap, or profile_bench=None)")
        return fig
    palette = {"forward": "#d62728", "draft": "#9467bd"}
    sides = list(profiles)
    labelled: set[str] = set()
    for y, side in enumerate(sides):
        tokens = max(int(profiles[side]["output_tokens"]), 1)
        x = 0.0
        for group, time in profiles[side]["groups"].items():
            busy, idle = time["busy_ms"] / tokens, time["idle_ms"] / tokens
            color = palette.get(group, "#7f7f7f")
            first = group not in labelled
            labelled.add(group)
            right.barh(y, busy, left=x, color=color, label=f"{group} busy" if first else None)
            right.barh(y, idle, left=x + busy, color="white", edgecolor=color, hatch="///",
                       label=f"{group} idle between kernels" if first else None)
            x += busy + idle
    right.set_yticks(range(len(sides)), sides)
    right.invert_yaxis()
    right.set_xlabel("profiled ms per output token")
    right.set_title("where each side's time per token went", fontsize=9)
    right.legend(loc="lower right", fontsize=7)
    return fig

"""The figure every plot draws on, and the small helpers they share (private to views.plots)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolkit.benchmark.labels import shorten_words
from toolkit.redaction import redact_text
from toolkit.stats import mean_interval

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

VERDICT_COLORS = {
    "confirmed": "#2e7d32", "refuted": "#9e9e9e", "inconclusive": "#f5a623", "failed": "#c62828",
    "interrupted": "#8e24aa", "running": "#90caf9", "no verdict": "#1f77b4", "measured": "#64b5f6",
    "note": "#90a4ae",
}


@functools.cache
def figure_class() -> type[Figure]:
    """A Figure that shows itself in a notebook as a PNG (without pyplot, no inline backend shows it)."""
    import io

    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    class NotebookFigure(Figure):
        """Draws every text as plain text: a step titled ``--log /tmp/sgl-$$.log`` once aborted the whole
        post-mortem with mathtext's ParseException (issue 25); tick labels made in the draw take the rc."""

        def draw(self, renderer: Any) -> None:
            for text in self.findobj(Text):
                text.set_parse_math(False)
            with matplotlib.rc_context({"text.parse_math": False}):
                super().draw(renderer)

        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            FigureCanvasAgg(self).print_png(buffer)
            return buffer.getvalue()

    return NotebookFigure


def new_figure(width: float, height: float, style: str = "whitegrid") -> tuple[Figure, Axes]:
    import seaborn as sns

    fig = figure_class()(figsize=(width, height), dpi=100, layout="constrained")
    with sns.axes_style(style):
        ax = fig.add_subplot()
    return fig, ax


def legend_outside(fig: Figure, ax: Axes, title: str) -> None:
    """The axes' legend beside them (inside, it covered the curves: issue 28), or below them when a label is
    long enough to squeeze the axes to a strip (the demo's ITL and server-metric plots)."""
    legend = ax.get_legend()
    if legend is None:
        return
    texts = [text.get_text() for text in legend.get_texts()]
    entries = [(handle, text) for handle, text in zip(legend.legend_handles, texts, strict=True)
               if handle is not None]
    handles, labels = [handle for handle, _ in entries], [text for _, text in entries]
    legend.remove()
    if max(map(len, labels), default=0) <= 45:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=title, fontsize=8)
    else:
        fig.set_figheight(fig.get_figheight() + 0.2 * len(entries))
        fig.legend(handles, labels, loc="outside lower left", title=title, fontsize=8)


def require(frame: pd.DataFrame, columns: Sequence[str | None], what: str) -> None:
    missing = [c for c in columns if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs the column(s) {missing}; the DataFrame has {list(frame.columns)}")


def empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#757575")


def t_interval(values: Any) -> tuple[float, float]:
    """seaborn's errorbar: the 95 % Student-t interval of the mean (a point for one value)."""
    mean, low, high = mean_interval([float(v) for v in values])
    return (mean, mean) if math.isnan(low) else (low, high)


def rotate_long_ticks(ax: Axes, labels: Sequence[str]) -> None:
    """Long category labels wrapped onto lines under their tick (rotated ones ran off the figure's edge)."""
    if sum(len(s) for s in labels) > 60:
        ax.set_xticks(range(len(labels)), [wrap_label(s, 18) for s in labels], fontsize=9)


def wrap_label(label: str, width: int) -> str:
    """``label`` on (at most 3) lines of about ``width`` characters, broken at spaces and hyphens, then after ``=``.

    >>> wrap_label("--speculative-attention-mode=decode", 18)
    '--speculative-\\nattention-\\nmode=decode'
    """
    import textwrap

    lines = []
    for line in textwrap.wrap(label, width, break_long_words=False) or [""]:
        head, sep, tail = line.partition("=")
        lines += [head + sep, tail] if len(line) > width and sep and tail else [line]
    return "\n".join(lines[:3]) + ("…" if len(lines) > 3 else "")


def cell_text(value: Any) -> str:
    """'' for None/NaN/NA, else the redacted string: DataFrame cells are often missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or repr(value) in ("<NA>", "NaT"):
        return ""
    return redact_text(str(value))


def step_outcome(row: Any) -> str:
    if row.get("status") in ("failed", "interrupted", "running"):
        return str(row["status"])
    verdict = cell_text(row.get("verdict"))
    if verdict in VERDICT_COLORS:
        return verdict
    if row.get("kind") == "note":
        return "note"
    return "no verdict" if cell_text(row.get("hypothesis")) else "measured"  # a baseline, an A side: no hypothesis


def short(value: Any, limit: int) -> str:
    return shorten_words(cell_text(value), limit)



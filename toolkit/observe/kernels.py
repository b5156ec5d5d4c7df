"""Kernel tables: which kernels took the GPU's time, how often, inside CUDA graphs or not, per phase.

Comparing two tables (prefill-mode verify against decode-mode verify) shows which kernels moved: into or
out of CUDA graphs, slower, faster, new or gone.

>>> from toolkit.observe.trace import KernelCall
>>> calls = [KernelCall("void gemm<1>()", 0, 30.0, True, "decode"), KernelCall("void attn()", 40, 10.0, False, "verify")]
>>> kernel_table(calls)[["phase", "kernel", "calls", "share_pct", "where"]].to_dict("records")[0]
{'phase': 'decode', 'kernel': 'gemm', 'calls': 1, 'share_pct': 75.0, 'where': 'CUDA graph'}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from toolkit.observe.trace import KernelCall

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["KERNEL_COLUMNS", "PHASE_COLUMNS", "kernel_table", "phase_table", "compare_kernel_tables", "where_label"]

KERNEL_COLUMNS = ["phase", "kernel", "calls", "total_ms", "mean_us", "share_pct", "in_graph_pct", "where"]
PHASE_COLUMNS = ["phase", "calls", "gpu_ms", "share_pct", "graph_time_pct", "where"]


def where_label(in_graph_pct: float) -> str:
    """``CUDA graph`` (every call), ``eager`` (none) or ``mixed``."""
    if in_graph_pct >= 99.95:
        return "CUDA graph"
    return "eager" if in_graph_pct <= 0.05 else "mixed"


def kernel_table(calls: Sequence[KernelCall], *, top: int | None = None) -> pd.DataFrame:
    """Per (phase, kernel short name): calls, GPU ms, mean µs, share of all kernel time, % calls in a graph.

    Largest GPU time first; phase ``""`` (the trace does not say) is shown as ``(unknown)``.
    """
    import pandas as pd

    if not calls:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    frame = pd.DataFrame({"phase": [c.phase or "(unknown)" for c in calls], "kernel": [c.short_name for c in calls],
                          "dur_us": [c.dur_us for c in calls], "graph": [c.in_graph for c in calls]})
    total_us = float(frame["dur_us"].sum()) or 1.0
    table = frame.groupby(["phase", "kernel"], sort=False).agg(
        calls=("dur_us", "size"), total_us=("dur_us", "sum"), graph_calls=("graph", "sum")).reset_index()
    table["total_ms"] = table["total_us"] / 1000.0
    table["mean_us"] = table["total_us"] / table["calls"]
    table["share_pct"] = 100.0 * table["total_us"] / total_us
    table["in_graph_pct"] = 100.0 * table["graph_calls"] / table["calls"]
    table["where"] = table["in_graph_pct"].map(where_label)
    table = table.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    table = table[KERNEL_COLUMNS]
    return table.head(top).reset_index(drop=True) if top is not None else table


def phase_table(calls: Sequence[KernelCall]) -> pd.DataFrame:
    """Per phase: kernel calls, GPU ms, share of kernel time, % of its kernel time inside CUDA graphs."""
    import pandas as pd

    if not calls:
        return pd.DataFrame(columns=PHASE_COLUMNS)
    frame = pd.DataFrame({"phase": [c.phase or "(unknown)" for c in calls], "dur_us": [c.dur_us for c in calls],
                          "graph_us": [c.dur_us if c.in_graph else 0.0 for c in calls]})
    total_us = float(frame["dur_us"].sum()) or 1.0
    table = frame.groupby("phase", sort=False).agg(calls=("dur_us", "size"), gpu_us=("dur_us", "sum"),
                                                   graph_us=("graph_us", "sum")).reset_index()
    table["gpu_ms"] = table["gpu_us"] / 1000.0
    table["share_pct"] = 100.0 * table["gpu_us"] / total_us
    table["graph_time_pct"] = 100.0 * table["graph_us"] / table["gpu_us"].where(table["gpu_us"] > 0, 1.0)
    table["where"] = table["graph_time_pct"].map(where_label)
    return table.sort_values("gpu_us", ascending=False, kind="stable").reset_index(drop=True)[PHASE_COLUMNS]


def _moved(row: pd.Series, label_a: str, label_b: str) -> str:
    if row["calls_a"] == 0:
        return f"only in {label_b}"
    if row["calls_b"] == 0:
        return f"only in {label_a}"
    if row["where_a"] != row["where_b"]:
        if row["where_b"] == "CUDA graph":
            return "into CUDA graph"
        if row["where_a"] == "CUDA graph":
            return "out of CUDA graph"
        return f"{row['where_a']} -> {row['where_b']}"
    ratio = row["mean_us_b"] / row["mean_us_a"] if row["mean_us_a"] else float("inf")
    if ratio > 1.1:
        return f"slower per call ({ratio:.2f}x)"
    if ratio < 1 / 1.1:
        return f"faster per call ({ratio:.2f}x)"
    return "same"


def compare_kernel_tables(a: pd.DataFrame, b: pd.DataFrame, *, label_a: str = "A",
                          label_b: str = "B") -> pd.DataFrame:
    """Which kernels moved from profile A to profile B, largest change of GPU time first.

    ``delta_ms`` is B's GPU time minus A's, each in its own window: capture the same number of steps.
    """
    import pandas as pd

    keys = ["phase", "kernel"]
    keep = keys + ["calls", "total_ms", "mean_us", "in_graph_pct", "where"]
    merged = pd.merge(a[keep], b[keep], on=keys, how="outer", suffixes=("_a", "_b"))
    merged = merged.fillna({f"{column}_{side}": empty for side in "ab" for column, empty in
                            (("calls", 0), ("total_ms", 0.0), ("mean_us", 0.0), ("where", "—"))})
    merged = merged.astype({"calls_a": "int64", "calls_b": "int64"})
    merged["delta_ms"] = merged["total_ms_b"] - merged["total_ms_a"]
    merged["moved"] = merged.apply(lambda row: _moved(row, label_a, label_b), axis=1) if len(merged) else []
    order = merged["delta_ms"].abs().sort_values(ascending=False, kind="stable").index
    columns = keys + ["calls_a", "calls_b", "total_ms_a", "total_ms_b", "delta_ms", "where_a", "where_b", "moved"]
    out = merged.loc[order, columns].reset_index(drop=True)
    out.attrs.update(label_a=label_a, label_b=label_b)
    return out

"""Post-mortem sections for what runs saw beside their numbers (cache, GPUs, /metrics, outputs), and profiles.

A cold cache must never be compared with a warm one by accident, and a speed-up that changes greedy
outputs is not a speed-up: both are said beside the numbers.
"""

from __future__ import annotations

import math
import re
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from toolkit.moves.profile import profiles_dir
from toolkit.observe.cache import cache_state
from toolkit.observe.kernels import compare_kernel_tables
from toolkit.observe.torch_profile import Profile, load_profile
from toolkit.report.capping import cap, left_out
from toolkit.report.diagnosis import diagnosis_section
from toolkit.report.document import Block, Bullets, Heading, Paragraph, Table, figure, num
from toolkit.views import plots

if TYPE_CHECKING:
    import pandas as pd

    from toolkit.journal import Journal

__all__ = ["observation_sections", "runs_table", "equivalence_section", "profile_section", "profile_notes"]

_PROFILE_NOTE = re.compile(r"^profile: (\S+)", re.MULTILINE)


def _num(value: Any, digits: int = 1) -> str:
    text = num(value, digits)
    # 0.00016 of the KV cache is not 0.000 (issue 28): a small value keeps two significant digits
    return f"{float(value):.2g}" if text and float(value) and not text.strip("-0.") else text


def _mean(frame: pd.DataFrame, column: str, how: str = "mean") -> float | None:
    if column not in frame.columns or frame[column].dropna().empty:
        return None
    values = frame[column].dropna().astype("float64")
    return float(values.max() if how == "max" else values.mean())


def runs_table(results: pd.DataFrame, metrics: pd.DataFrame) -> list[Block]:
    """One row per benchmark run: cache state, GPU telemetry, server metrics and output equivalence."""
    blocks: list[Block] = [Heading("Every run: cache, GPUs, server metrics, outputs")]
    if results.empty:
        return blocks + [Paragraph("No benchmark runs were recorded.", True)]
    if metrics.empty or "kind" not in metrics.columns:
        metrics = metrics.assign(kind=None, run_id=None)
    rows, simulated = [], False
    # one pass over the metric rows, not one filter per run (10,000 runs x every row: minutes, issue 20)
    groups = {key: frame for key, frame in metrics.groupby(["kind", "run_id"], sort=False, dropna=False)}
    nothing = metrics.iloc[0:0]
    shown, left = cap(results)
    for run in shown.itertuples():
        cache = groups.get(("cache", run.run_id), nothing)
        state = cache_state(cache.iloc[-1].to_dict()) if len(cache) else "not recorded"
        policy = "" if not len(cache) else ("flush" if bool(cache.iloc[-1].get("policy_flush")) else "keep")
        gpu = groups.get(("gpu", run.run_id), nothing)
        simulated = simulated or ("simulated" in gpu.columns and bool(gpu["simulated"].fillna(False).any()))
        prom = groups.get(("prometheus", run.run_id), nothing)
        same = groups.get(("equivalence", run.run_id), nothing)
        outputs = ""
        if len(same):
            last = same.iloc[-1]
            outputs = f"{int(last['identical'])}/{int(last['prompts'])} identical"
            if "first_divergence" in same.columns and not math.isnan(float(last.get("first_divergence", math.nan))):
                outputs += f", first divergence at {int(last['first_divergence'])}"
        gpus = gpu["rank"].nunique() if len(gpu) else 0
        # "run 10", never "#10": steps are numbered #N and run 10 is not step #10 (issue 28)
        rows.append((f"run {run.run_id}: {run.label} (step #{run.seq})", state + (f" ({policy})" if policy else ""),
                     f"{gpus}" if gpus else "", _num(_mean(gpu, "gpu_util_pct")), _num(_mean(gpu, "power_w"), 0),
                     _num(_mean(gpu, "mem_used_mib", "max"), 0), str(len(prom)) if len(prom) else "",
                     _num(_mean(prom, "running_requests", "max"), 0), _num(_mean(prom, "kv_cache_usage", "max"), 3),
                     outputs))
    columns = ("run", "prefix cache before the run", "GPUs", "mean GPU util (%)", "mean power (W)",
               "peak memory (MiB)", "/metrics scrapes", "max running requests", "max KV-cache usage",
               "greedy outputs vs reference")
    blocks.append(Table(columns, tuple(rows)))
    blocks += left_out(left, "runs", "journal.results(wide=True)")
    if simulated:
        blocks.append(Paragraph("GPU telemetry of simulated servers comes from the simulator's stand-in for "
                                "nvidia-smi: SIMULATED GPUs, values derived from the simulated load.", True))
    states = {r[1].split(" ")[0] for r in rows}
    if {"flushed", "warm"} <= states or {"flushed", "unknown"} <= states:
        blocks.append(Paragraph("Runs of different cache states are compared above: read their differences "
                                "with the cache in mind.", True))
    return blocks


def equivalence_section(results: pd.DataFrame, metrics: pd.DataFrame, baseline: str | None) -> list[Block]:
    """Which runs kept greedy outputs, and a flag on every speed-up that changed them."""
    if metrics.empty or "kind" not in metrics.columns or not (metrics["kind"] == "equivalence").any():
        return []
    checks = metrics[metrics["kind"] == "equivalence"]
    base = results.loc[results["label"] == baseline, "output_throughput"].dropna() if baseline else None
    base_tok_s = float(base.mean()) if base is not None and len(base) else None
    items = []
    for row in checks.itertuples():
        run = results[results["run_id"] == row.run_id]
        tok_s = float(run["output_throughput"].iloc[0]) if len(run) and "output_throughput" in run else None
        held = bool(row.holds)
        text = f"{row.label} (run {row.run_id}): {int(row.identical)}/{int(row.prompts)} prompts identical"
        if not held and "first_divergence" in checks.columns and not math.isnan(float(row.first_divergence)):
            text += f", first divergence at position {int(row.first_divergence)} of prompt {int(row.first_divergence_prompt)}"
        if not held and tok_s is not None and base_tok_s is not None and tok_s > base_tok_s:
            text = f"FLAG: faster than the baseline ({tok_s:.1f} vs {base_tok_s:.1f} tok/s) but greedy outputs " \
                   f"changed. {text}"
        items.append(text)
    held_all = bool(checks["holds"].astype(bool).all())
    verdict = ("Greedy outputs were identical to the reference in every checked run." if held_all else
               "Greedy outputs changed in some runs: a change that should only be faster changed what the model says.")
    return [Heading("Output equivalence (greedy)"), Paragraph(verdict), Bullets(tuple(items))]


def profile_notes(steps: pd.DataFrame) -> list[tuple[Any, str, str]]:
    """(step seq, step title, profile folder as the note gives it) for every profile note."""
    return [(row.seq, row.title, match.group(1)) for row in steps.itertuples()
            for match in _PROFILE_NOTE.finditer(str(row.notes or ""))]


def _kernel_rows(profile: Profile, top: int) -> Table:
    table = profile.kernels(top=top)
    rows = tuple((r.phase, r.kernel, str(r.calls), _num(r.total_ms, 2), _num(r.mean_us, 1), _num(r.share_pct, 1),
                  r.where) for r in table.itertuples())
    return Table(("phase", "kernel", "calls", "GPU ms", "mean µs", "share (%)", "where"), rows)


def profile_section(journal: Journal, steps: pd.DataFrame, dpi: int, *, top: int = 12) -> list[Block]:
    """Each profile's kernel table and phases; what moved from the first profile to each later one."""
    notes = profile_notes(steps)
    if not notes:
        return []
    blocks: list[Block] = [Heading("Profiles: where the GPU time went")]
    profiles: list[tuple[str, Profile]] = []
    home = profiles_dir(journal).resolve()
    for seq, title, folder in notes:
        path = (journal.path.parent / folder).resolve()  # an absolute folder stays itself
        if not path.is_relative_to(home):  # issue 25: a received journal's note once embedded any folder
            blocks += [Heading(f"#{seq} {title}", 3),
                       Paragraph(f"The profile note points at {folder}, outside this journal's profiles folder "
                                 f"({home.name}); it was not read.", True)]
            continue
        try:
            profile = load_profile(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            blocks += [Heading(f"#{seq} {title}", 3), Paragraph(f"The profile in {folder} could not be read: {exc}", True)]
            continue
        profiles.append((profile.label, profile))
        phases = profile.phases()
        split = "; ".join(f"{r.phase} {r.share_pct:.0f}% of GPU time, {r.where}" for r in phases.itertuples())
        blocks += [Heading(f"#{seq} {title}: profile {profile.label!r}", 3),
                   Paragraph(("SIMULATED trace (toolkit.sim). " if profile.simulated else "")
                             + f"{profile.n_kernel_calls} kernel calls, {profile.gpu_ms:.1f} ms of GPU time, captured in "
                               f"{profile.capture_s:.1f} s by {profile.method}. Phases: {split}. Traces: {folder} "
                               f"(open {folder}/perfetto.html, or load the .trace.json.gz in ui.perfetto.dev)."),
                   _kernel_rows(profile, top)]
    if profiles:
        phases = plots.profile_phases({label: p.phases() for label, p in profiles})
        blocks.append(figure(phases, "profile_phases",
                             "GPU time per phase of each profile, inside CUDA graphs or eager", dpi))
    # each profile against the one before it: a diagnosis's fast and slow sides, then one change after another
    # (against the first alone, a diagnosis's "fast side" hid what moved between two later profiles)
    for n, ((before, first), (label, other)) in enumerate(pairwise(profiles), start=2):
        moved = compare_kernel_tables(first.kernels(), other.kernels(), label_a=before, label_b=label)
        rows = tuple((r.phase, r.kernel, _num(r.total_ms_a, 2), _num(r.total_ms_b, 2), _num(r.delta_ms, 2), r.where_a,
                      r.where_b, r.moved) for r in moved.head(top).itertuples())
        blocks += [Heading(f"What moved: {before} → {label}", 3),
                   Table(("phase", "kernel", f"GPU ms ({before})", f"GPU ms ({label})", "change (ms)",
                          "where before", "where after", "moved"), rows),
                   figure(plots.profile_comparison(moved), f"profile_comparison_{n}",
                          f"kernels that moved from {before} to {label}", dpi)]
    return blocks


def observation_sections(journal: Journal, steps: pd.DataFrame, results: pd.DataFrame, metrics: pd.DataFrame,
                         baseline: str | None, dpi: int) -> list[Block]:
    """All of this module's sections, with the telemetry and server-metric figures."""
    blocks = runs_table(results, metrics)
    kinds = set(metrics["kind"].dropna()) if not metrics.empty and "kind" in metrics.columns else set()
    if "gpu" in kinds:
        blocks.append(figure(plots.telemetry(metrics), "gpu_telemetry", "GPU utilisation and power per run "
                             "beside the server's generation throughput", dpi))
    if "prometheus" in kinds:
        blocks.append(figure(plots.server_metrics_over_time(metrics), "server_prometheus",
                             "the server's /metrics over each run, with the log's metric lines", dpi))
    blocks += equivalence_section(results, metrics, baseline)
    blocks += diagnosis_section(journal, steps, dpi)
    blocks += profile_section(journal, steps, dpi)
    return blocks

"""Journal -> post-mortem: ``postmortem.md`` with PNG plots beside it, and a self-contained ``postmortem.html``.

The write-up a person would otherwise assemble by hand, from the journal alone (docs/postmortem.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.journal import Journal
from toolkit.journal.adapters import spec_parameters
from toolkit.report import comparisons, document
from toolkit.report.capping import cap, left_out
from toolkit.report.comparisons import THROUGHPUT, Curve
from toolkit.report.document import Block, Bullets, Code, Figure, Heading, Paragraph, Table, cell, num
from toolkit.report.evidence import benign_sentence, metric_differences, readiness_lines, recorded_lines
from toolkit.report.observations import observation_sections
from toolkit.report.reproduce import reproduce_script, without_worktrees
from toolkit.report.setup import setup_lines
from toolkit.report.summary import runs_text, summary
from toolkit.report.workload import bench_command, describe
from toolkit.server.naming import diff
from toolkit.views import plots

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ReportPaths", "write", "main"]

_MAX_LOG_LINES = 40


@dataclass(frozen=True)
class ReportPaths:
    """Where the post-mortem was written, and how long it took."""

    markdown: Path
    html: Path
    figures: tuple[Path, ...]
    seconds: float


def _changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """``add --flag=v; drop env:X; commit: a -> b``: :func:`toolkit.server.naming.diff` of the two specs."""
    if after is None:
        return ""
    if before is None:
        return "(first spec)"
    changes = diff(spec_parameters(without_worktrees(before)), spec_parameters(without_worktrees(after)))
    # The simulator's own knobs (--sim-fault, --sim-startup-s, a checkout's --source-dir) stage the
    # story; they are not the change a reader would make to a real server (issue 28).
    staged = [c for c in changes if after.get("simulated") and c.name.startswith(("--sim-", "--source-dir"))]
    real = "; ".join(change.text() for change in changes if change not in staged)
    if staged:
        real += f"{' ' if real else ''}(simulator only: {'; '.join(change.text() for change in staged)})"
    return real or "(same spec)"


def _figures(steps: pd.DataFrame, results: pd.DataFrame, requests: pd.DataFrame, metrics: pd.DataFrame,
             baseline: str | None, found: list[Curve], dpi: int) -> list[Figure]:
    """The figures; ``results`` and ``requests`` already labelled by configuration (label and workload)."""
    out = [document.figure(plots.timeline(steps), "timeline", "timeline of the investigation's steps", dpi)]
    if found:
        out.append(document.figure(plots.concurrency_curves(*comparisons.curve_points(found)), "concurrency",
                                   "output tok/s and median TTFT against concurrency, the knee marked", dpi))
    if not results.empty and THROUGHPUT in results.columns:
        out.append(document.figure(plots.throughput(results, baseline=baseline), "throughput",
                                   "output tokens per second per configuration", dpi))
    for metric, name in (("ttft_ms", "TTFT"), ("itl_ms", "ITL")):
        if metric in requests.columns and requests[metric].notna().any():
            out.append(document.figure(plots.latency_ecdf(requests, metric), metric.replace("_ms", "_ecdf"),
                                       f"ECDF of {name} per configuration", dpi))
    # Only lines written during a benchmark run: the greedy-output check and the probes between runs are
    # traffic of their own and made the log's throughput read 218 tok/s where the bench measured 117 (issue 28).
    during = metrics[metrics["run_id"].notna()] if "run_id" in metrics.columns else metrics
    for column in ("gen_throughput", "accept_len"):
        if column in during.columns and during[column].notna().any():
            title = f"{plots.metric_label(column)} in the server log, during benchmark runs only"
            out.append(document.figure(plots.server_metrics(during, column, title=title), f"server_{column}",
                                       f"{column} from the server log during benchmark runs", dpi))
    return out


def _previous_specs(steps: pd.DataFrame) -> list[dict[str, Any] | None]:
    """For each step, the spec of the last step before it that had one (what "change vs previous" diffs)."""
    out: list[dict[str, Any] | None] = []
    previous = None
    for spec in steps["spec"].tolist():
        out.append(previous)
        previous = spec if spec else previous
    return out


def _timeline_table(steps: pd.DataFrame) -> list[Block]:
    steps = steps.reset_index(drop=True)
    previous = _previous_specs(steps)
    shown, left = cap(steps)
    rows = []
    for position, row in zip(shown.index, shown.itertuples(), strict=True):
        outcome = row.status if row.status in ("failed", "interrupted", "running") else cell(row.verdict)
        rows.append((f"#{row.seq}", row.kind, row.title, cell(row.hypothesis),
                     _changes(previous[position], row.spec), outcome or "—", num(row.duration_s, 0)))
    columns = ("#", "kind", "title", "hypothesis", "change vs previous step", "verdict", "duration (s)")
    return [Table(columns, tuple(rows)), *left_out(left, "steps", "journal.steps()")]


def _results_table(configs: list[dict[str, Any]]) -> Table:
    def cells(c: dict[str, Any]) -> tuple[str, ...]:
        tok_s = f"{num(c['mean'])} ± {num(c['ci'])}" if c["ci"] is not None else num(c["mean"])
        ratio = f"{c['ratio']:.2f}x" if c.get("ratio") is not None else "—"
        verdict = ("baseline" if c["is_baseline"] else "no baseline at this workload" if c.get("no_baseline")
                   else c.get("verdict", ""))
        runs = f"{c['runs']} ({c['requests']})" if c.get("requests") else str(c["runs"])
        return (c["name"], c["workload_text"], c["steps"], runs, tok_s, ratio, verdict,
                num(c["median_ttft_ms"]), num(c["median_itl_ms"], 2), num(c["median_tpot_ms"], 2),
                num(c["accept_length"], 2))

    return Table(("configuration", "workload", "steps", "runs (requests)", "output tok/s (mean ± 95 % CI)",
                  "vs baseline (same workload)", "against noise", "median TTFT (ms)", "median ITL (ms)",
                  "median TPOT (ms)", "accept length"),
                 tuple(cells(c) for c in configs))


def _readiness_facts(readiness: dict[str, Any] | None) -> list[str]:
    if not readiness:
        return []
    if readiness.get("ready"):
        took = readiness.get("time_to_ready_s")
        return [f"Server ready{f' in {float(took):.0f} s' if took is not None else ''}."]
    failure = readiness.get("failure") or {}
    reason = failure.get("message") if isinstance(failure, dict) else None
    reason = reason.rstrip(".") if reason else None  # an engine's message ends with its own full stop
    return [f"Server never became ready{f': {reason}' if reason else ''}."]


def _step_details(steps: pd.DataFrame, baseline_spec: dict[str, Any] | None) -> list[Block]:
    blocks: list[Block] = [Heading("Steps")]
    steps = steps.reset_index(drop=True)
    previous_of = _previous_specs(steps)
    shown, left = cap(steps)
    for position, row in zip(shown.index, shown.itertuples(), strict=True):
        previous = previous_of[position]
        outcome = row.status if row.status != "done" else cell(row.verdict) or (
            "no verdict recorded" if cell(row.hypothesis) else "note" if row.kind == "note" else "measured")
        blocks.append(Heading(f"#{row.seq} {row.title} ({row.kind}): {outcome}", 3))
        facts = [f"Hypothesis: {row.hypothesis}"] if cell(row.hypothesis) else []
        facts += [f"Verdict: {row.verdict}" + (f" ({row.verdict_note})" if cell(row.verdict_note) else "")
                  ] if cell(row.verdict) else []
        if row.spec:
            facts.append(f"Change vs previous step: {_changes(previous, row.spec)}")
            if baseline_spec is not None and row.spec is not baseline_spec:
                facts.append(f"Change vs baseline: {_changes(baseline_spec, row.spec)}")
        facts += _readiness_facts(row.readiness)
        facts += [f"Engine: {k[:-16]} {row.versions.get(k[:-16], 'unknown')} (release read by {how})."  # provenance
                  for k, how in (row.versions or {}).items() if k.endswith("_release_read_by")]
        ran = runs_text(row.n_runs) if row.n_runs else "no benchmark run"
        facts += [f"Started {row.started_at:%Y-%m-%d %H:%M:%S} UTC, status {row.status}, {ran}."]
        blocks.append(Bullets(tuple(facts)))
        if cell(row.notes):
            blocks += [Paragraph("Notes:"), Code(row.notes)]
        if cell(row.error):
            evidence, error = row.evidence or {}, str(row.error)
            # A ToolkitError's text already quotes its evidence and hint; add only what it lacks.
            lines = [error] + [f"  | {line}" for line in evidence.get("evidence", []) if str(line) not in error]
            hint = evidence.get("hint")
            lines += [f"what to do: {hint}"] if hint and str(hint) not in error else []
            blocks += [Paragraph("Error and evidence:"), Code("\n".join(lines))]
    return blocks + left_out(left, "steps", "journal.steps()")


def _log_section(steps: pd.DataFrame, logs: pd.DataFrame, metrics: pd.DataFrame,
                 configs: list[dict[str, Any]]) -> list[Block]:
    """Per step, the lines that decided it; then the metric lines that differ between configurations."""
    blocks: list[Block] = [Heading("Decisive log lines")]
    if logs.empty:
        logs = logs.assign(verdict=None)
    shown, left = cap(steps)
    for row in shown.itertuples():
        lines = readiness_lines(row.readiness)
        recorded = logs[logs["step_id"] == row.step_id]
        lines += [line for line in recorded_lines(recorded) if line not in lines]
        benign = benign_sentence(recorded)
        if lines or benign:
            blocks.append(Heading(f"#{row.seq} {row.title}", 3))
        if lines:
            blocks.append(Code("\n".join(without_worktrees(line) for line in lines[:_MAX_LOG_LINES])))
        if benign:
            blocks.append(Paragraph(benign, True))
    for difference in metric_differences(metrics, list(dict.fromkeys(c["label"] for c in configs))):
        quoted = [f"`{name}`" for _, name in difference.fields]
        names = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
        blocks += [Heading(f"Where the server's {difference.kind} lines differ: {names}", 3),
                   Bullets(tuple(difference.sentences()))]
    if len(blocks) == 1:
        blocks.append(Paragraph("No decisive log line was recorded.", True))
    return blocks + left_out(left, "steps", "journal.log_lines()")


def _bench_commands(results: pd.DataFrame, step_id: int) -> list[tuple[str, str]]:
    """(workload in words, ``python -m toolkit bench ...``) for each workload a step measured."""
    rows = results[results["step_id"] == step_id].to_dict("records") if "step_id" in results.columns else []
    return list(dict.fromkeys((describe(row), bench_command(row)) for row in rows))


def _reproduce(steps: pd.DataFrame, results: pd.DataFrame) -> list[Block]:
    blocks: list[Block] = [Heading("How to reproduce each step"),
                           Paragraph("Values shown as [REDACTED] were secrets; put your own back before running. "
                                     "A commit step ran its commit in a temporary git worktree: run it from a "
                                     "checkout ($REPO) of the repository it came from, at that commit.", True)]
    commands = zip(steps["spec"], steps["command"], strict=True)
    shown, left = cap(steps[[bool(spec) or bool(cell(command)) for spec, command in commands]])
    for row in shown.itertuples():
        spec = row.spec or {}
        blocks.append(Heading(f"#{row.seq} {row.title}", 3))
        if cell(row.hosts):
            blocks.append(Paragraph(f"On {row.hosts}:"))
        blocks.append(Code(reproduce_script(cell(row.command) or str(spec.get("command") or ""), spec,
                                            repo_dir=cell(row.repo_dir) or None,
                                            origin=cell(row.repo_origin) or None,
                                            bench=_bench_commands(results, row.step_id)), "bash"))
    return blocks + left_out(left, "steps", "journal.steps() (its command column)")


def build(journal: Journal, *, dpi: int = 100) -> tuple[str, list[Block]]:
    """The post-mortem as a title and document blocks (pure apart from reading the journal)."""
    steps, results = journal.steps(), journal.results(wide=True)
    requests, metrics, logs = journal.requests(), journal.metric_lines(), journal.log_lines()
    baseline = comparisons.baseline_label(steps, results)
    configs = comparisons.configurations(results, baseline)
    found = comparisons.curves(configs)
    title = f"Post-mortem: {journal.investigation}"
    base_rows = results[results["label"] == baseline] if baseline else results.iloc[0:0]
    base_step = steps[steps["step_id"] == base_rows.iloc[0]["step_id"]] if len(base_rows) else steps.iloc[0:0]
    baseline_spec = base_step.iloc[0]["spec"] if len(base_step) else None
    root_cause = journal.root_cause_text()
    named = [comparisons.with_config_names(frame, configs) for frame in (results, requests)]
    base_name = next((c["name"] for c in configs if c["is_baseline"]), baseline)
    figures = {f.filename.removesuffix(".png"): f for f in _figures(steps, named[0], named[1], metrics, base_name, found, dpi)}
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    blocks: list[Block] = [Heading(title, 1), Paragraph(f"Generated {generated} from {journal.path.name}.", True)]
    blocks += [Heading("Setup"), Bullets(tuple(setup_lines(steps, results)))]
    blocks += summary(journal.investigation, steps, configs, baseline, root_cause, found)
    blocks += [Heading("Timeline"), figures["timeline"], *_timeline_table(steps)]
    blocks += [Heading("Results")]
    blocks += [_results_table(configs)] if configs else [Paragraph("No benchmark runs were recorded.", True)]
    blocks += [figures[name] for name in figures if name != "timeline"]
    blocks += observation_sections(journal, steps, results, metrics, baseline, dpi)
    blocks += _step_details(steps, baseline_spec)
    blocks += _log_section(steps, logs, metrics, configs)
    blocks += _reproduce(steps, results)
    # A commit step's temporary worktree was removed when it ended: nowhere may the reader meet its path.
    return title, [_without_worktrees(block) for block in blocks]


def _without_worktrees(block: Block) -> Block:
    if isinstance(block, Heading | Paragraph | Code):
        return dataclasses.replace(block, text=without_worktrees(block.text))
    if isinstance(block, Bullets):
        return Bullets(tuple(without_worktrees(item) for item in block.items))
    if isinstance(block, Table):
        return Table(block.columns, tuple(tuple(without_worktrees(c) for c in row) for row in block.rows))
    return block


def write(journal: Journal, out_dir: str | Path, *, dpi: int = 100) -> ReportPaths:
    """Write ``postmortem.md`` (+ PNGs) and a self-contained ``postmortem.html`` into ``out_dir``.

    >>> paths = write(Journal("journals/eagle3.sqlite"), "out/")  # doctest: +SKIP
    >>> paths.html  # doctest: +SKIP
    PosixPath('out/postmortem.html')
    """
    if not isinstance(journal, Journal):  # issue 25: a path here failed deep inside with an AttributeError
        raise TypeError(f"write(journal={journal!r}): pass an open Journal: write(Journal({str(journal)!r}), out_dir)")
    started = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    title, blocks = build(journal, dpi=dpi)
    figures = [block for block in blocks if isinstance(block, Figure)]
    for block in figures:
        (out / block.filename).write_bytes(block.png)
    markdown, html_path = out / "postmortem.md", out / "postmortem.html"
    markdown.write_text(document.to_markdown(blocks), encoding="utf-8")
    html_path.write_text(document.to_html(blocks, title=title), encoding="utf-8")
    return ReportPaths(markdown, html_path, tuple(out / figure.filename for figure in figures),
                       time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m toolkit report JOURNAL --out DIR [--investigation NAME]``."""
    parser = argparse.ArgumentParser(prog="python -m toolkit report", description=__doc__.splitlines()[0])
    parser.add_argument("journal", type=Path, help="the journal .sqlite file")
    parser.add_argument("--out", type=Path, default=Path("out"), help="output directory (default: out)")
    parser.add_argument("--investigation", help="which investigation (default: the most recent one)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if not args.journal.exists():  # a folder or a FIFO: the Journal says what it is
        print(f"error: no journal at {args.journal}; pass the path of an existing .sqlite journal", file=sys.stderr)
        return 2
    with Journal(args.journal, read_only=True) as journal:
        names = list(journal.investigations()["name"])
    if args.investigation is not None and args.investigation not in names:
        print(f"error: {args.journal} holds no investigation {args.investigation!r}; it holds {names}",
              file=sys.stderr)
        return 2
    with Journal(args.journal, investigation=args.investigation, read_only=True) as journal:
        paths = write(journal, args.out)
    print(f"wrote {paths.markdown} and {paths.html} ({len(paths.figures)} figures) in {paths.seconds:.1f} s")
    return 0

"""Measure one configuration as one journal step: launch, wait until ready, benchmark, record, stop.

The notebooks each wrote this by hand; it is the trial every sweep runs, called once. A start that fails
is a finding, not a crash of the notebook. A change that should only make the server faster must not
change a token of a greedy answer: ``greedy_tokens=`` keeps them, ``reference=`` checks against them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolkit.benchmark import BenchResult
from toolkit.errors import ToolkitError
from toolkit.host.place import Target
from toolkit.host.placement import Placement
from toolkit.journal import StepRecorder
from toolkit.moves.plan import Plan
from toolkit.moves.trial import RunOutcome, TrialObserver, make_bench_call, run_launch
from toolkit.observe.equivalence import (
    DEFAULT_PROMPTS,
    EquivalenceResult,
    GreedyOutputs,
    compare_outputs,
    greedy_outputs,
)
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec

__all__ = ["Measurement", "measure"]


@dataclass(frozen=True)
class Measurement:
    """One configuration measured: its runs (one per repeat), or the error that stopped it.

    ``step``: its journal step, for a verdict; ``equivalence``: its greedy ``outputs`` against the reference.
    """

    spec: ServerSpec
    title: str
    runs: tuple[BenchResult, ...]
    step_id: int | None
    time_to_ready_s: float | None
    error: ToolkitError | None = None
    step: StepRecorder | None = None
    placement: Placement | None = None
    outputs: GreedyOutputs | None = None
    equivalence: EquivalenceResult | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def result(self) -> BenchResult:
        """The last run; raises the error that stopped the measurement when there is none."""
        if not self.runs:
            raise self.error or ToolkitError(f"{self.title}: no run was measured")
        return self.runs[-1]

    @property
    def summary(self) -> dict[str, Any]:
        """The last run's summary ({} when none ran): ``m.summary["output_throughput"]``."""
        return dict(self.runs[-1].summary) if self.runs else {}

    def __repr__(self) -> str:
        if self.error is not None:
            return f"{self.title}: failed ({type(self.error).__name__}: {self.error.message})"
        tok_s = self.summary.get("output_throughput")
        shown = f"{tok_s:.1f} output tok/s" if isinstance(tok_s, int | float) else "no throughput"
        ready = f", ready in {self.time_to_ready_s:.1f} s" if self.time_to_ready_s is not None else ""
        same = f"; {self.equivalence.summary()}" if self.equivalence is not None else ""
        return f"{self.title}: {shown} over {len(self.runs)} run(s){ready}{same}"


@dataclass
class _Seen:
    """What the trial's hooks saw of the server while it ran: where it ran, its greedy outputs."""

    placement: Placement | None = None
    outputs: GreedyOutputs | None = None
    equivalence: EquivalenceResult | None = None


def measure(host: Target, spec: ServerSpec, *, plan: Plan | None = None, title: str | None = None,
            kind: str = "measure", hypothesis: str | None = None, check: bool = True,
            watch: Callable[[Server], object] | None = None, greedy_tokens: int = 0,
            reference: GreedyOutputs | None = None) -> Measurement:
    """Launch ``spec`` on ``host``, wait until ready, run ``plan.repeats`` benchmarks (default 1), record them, stop.

    ``watch(server)`` runs once the server is launched (the notebook form shows it live). A failed
    start raises after the step is stored as failed; ``check=False`` returns it in ``error`` instead.
    ``greedy_tokens > 0`` keeps that many greedy tokens of the default prompts after the last run;
    ``reference`` (an earlier ``outputs``) compares this server's and records the verdict in the step.

    >>> m = measure(tk.Host.local(), tk.ServerSpec.simulator(tp=2), greedy_tokens=24)  # doctest: +SKIP
    >>> measure(host, eagle, plan=plan, reference=m.outputs).equivalence.holds  # doctest: +SKIP
    """
    plan = plan or Plan()
    journal = plan.journal
    if greedy_tokens < 0:
        raise ValueError(f"greedy_tokens must be >= 0 (0: keep no greedy outputs), got {greedy_tokens}")
    if reference is not None and greedy_tokens not in (0, reference.max_tokens):
        raise ValueError(f"greedy_tokens={greedy_tokens} differs from the reference's {reference.max_tokens} tokens: "
                         "outputs of different lengths cannot be compared; leave greedy_tokens out")
    title = title or spec.describe()
    outcomes: list[RunOutcome] = []
    bench_call = make_bench_call(plan.bench, progress=plan.progress)
    seen = _Seen()

    def on_server(server: Server | None) -> None:
        if server is not None:
            seen.placement = server.placement
            if watch is not None:
                watch(server)

    def keep_outputs(step: StepRecorder | None) -> Callable[[Server], None] | None:
        if reference is None and greedy_tokens == 0:
            return None

        def after_runs(server: Server) -> None:
            prompts = reference.prompts if reference is not None else DEFAULT_PROMPTS
            tokens = reference.max_tokens if reference is not None else greedy_tokens
            seen.outputs = greedy_outputs(server, prompts, max_tokens=tokens, label=title, api_key=spec.api_key())
            if reference is not None:
                seen.equivalence = compare_outputs(reference, seen.outputs)
                if step is not None:
                    _record_equivalence(step, seen.equivalence)

        return after_runs

    step: StepRecorder | None = None
    error: ToolkitError | None = None
    try:
        with (contextlib.nullcontext() if journal is None else
              journal.step(kind, title, spec=spec, host=host.name, hypothesis=hypothesis)) as step:
            observer = TrialObserver(on_server=on_server, after_runs=keep_outputs(step))
            outcomes.extend(run_launch(host, spec, step=step, benches=plan.repeats_or(1),
                                       bench_call=bench_call, timeout_s=plan.timeout_s, log_dir=plan.log_dir,
                                       run_label=title, observer=observer))
    except ToolkitError as exc:
        if check:
            raise
        error = exc
    return Measurement(spec, title, tuple(o.result for o in outcomes), None if step is None else step.id,
                       outcomes[0].time_to_ready_s if outcomes and error is None else None, error, step,
                       seen.placement, seen.outputs, seen.equivalence)


def _record_equivalence(step: StepRecorder, result: EquivalenceResult) -> None:
    """Store the verdict as a metric row of the step and a note with each divergence."""
    step.record_metrics([result.metric_row()])
    lines = [f"output equivalence: {result.summary()}"]
    lines += [f"  prompt {c.index}: diverges at {result.unit} {c.first_divergence}: "
              f"{c.reference_next!r} (reference) vs {c.candidate_next!r}"
              for c in result.comparisons if c.first_divergence is not None][:5]
    step.note("\n".join(lines))

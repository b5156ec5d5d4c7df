"""Measure one configuration as one journal step: launch, wait until ready, benchmark, record, stop.

The notebooks each wrote this by hand (a ``measure()`` of a dozen lines: a journal step, a
launch, a panel and a log view, wait_ready, bench, record). It is the trial every sweep and
A/B test already runs (:func:`toolkit.moves.trial.run_launch`), called once, with a hook that
shows the server while it runs (``tk.measure`` passes one that displays a ServerPanel and a
LogView: :func:`toolkit.views.widgets.measure`).

A start that fails is a finding, not a crash of the notebook: with ``check=False`` the step is
stored as failed with its evidence (the readiness report, the fatal lines and their context)
and the :class:`Measurement` says why, so that the next cell can go on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolkit.benchmark import BenchResult
from toolkit.errors import ToolkitError
from toolkit.host.place import Target
from toolkit.journal import Journal
from toolkit.moves.trial import RunOutcome, make_bench_call, run_launch
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec

__all__ = ["Measurement", "measure"]


@dataclass(frozen=True)
class Measurement:
    """One configuration measured: its runs (one per repeat), or the error that stopped it."""

    spec: ServerSpec
    title: str
    runs: tuple[BenchResult, ...]
    step_id: int | None
    time_to_ready_s: float | None
    error: ToolkitError | None = None

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
        return f"{self.title}: {shown} over {len(self.runs)} run(s){ready}"


def measure(
    host: Target,
    spec: ServerSpec,
    *,
    journal: Journal | None = None,
    bench: Mapping[str, Any] | Callable[[Server], BenchResult] | None = None,
    title: str | None = None,
    kind: str = "measure",
    hypothesis: str | None = None,
    repeats: int = 1,
    timeout_s: float = 900.0,
    log_dir: str | None = None,
    check: bool = True,
    progress: bool = True,
    watch: Callable[[Server], object] | None = None,
) -> Measurement:
    """Launch ``spec`` on ``host``, wait until ready, run ``repeats`` benchmarks, record them, stop.

    ``bench`` is :func:`toolkit.bench` keyword arguments (or a callable of the server, such as
    ``tk.observed(...)``); ``watch(server)`` runs once the server is launched (the notebook
    form shows it live). With a ``journal`` the measurement is one step of kind ``kind``: spec,
    host, readiness, each run with the server's metric lines, the decisive log lines. A failed
    start raises (``ServerDied``, ``ReadinessTimeout``, ``InvalidFlag`` ...) after the step is
    stored as failed; ``check=False`` returns it in ``Measurement.error`` instead.

    >>> m = measure(tk.Host.local(), tk.ServerSpec.simulator(tp=2), journal=journal,
    ...             bench={"num_prompts": 8, "max_concurrency": 4}, title="baseline")  # doctest: +SKIP
    >>> m.summary["output_throughput"]  # doctest: +SKIP
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    title = title or spec.describe()
    outcomes: list[RunOutcome] = []
    bench_call = make_bench_call(bench, progress=progress)

    def on_server(server: Server | None) -> None:
        if server is not None and watch is not None:
            watch(server)

    def run(step: Any) -> None:
        outcomes.extend(run_launch(host, spec, step=step, benches=repeats, bench_call=bench_call,
                                   timeout_s=timeout_s, log_dir=log_dir, run_label=title, on_server=on_server))

    step_id: int | None = None
    try:
        if journal is None:
            run(None)
        else:
            with journal.step(kind, title, spec=spec, host=host.name, hypothesis=hypothesis) as step:
                step_id = step.id
                run(step)
    except ToolkitError as exc:
        if check:
            raise
        return Measurement(spec, title, tuple(o.result for o in outcomes), step_id, None, exc)
    ready_s = outcomes[0].time_to_ready_s if outcomes else None
    return Measurement(spec, title, tuple(o.result for o in outcomes), step_id, ready_s)

"""``sweep()``: every combination launched, benchmarked, recorded and stopped, on one host or fanned out over several."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Literal

from toolkit.journal import Journal, StepRecorder
from toolkit.moves.fan_out import HostPool, Hosts, Lane
from toolkit.moves.params import Variant, expand
from toolkit.moves.plan import Plan
from toolkit.moves.schedule import Spread, sweep_queues
from toolkit.moves.sweep_result import (
    SweepFailure,
    SweepResult,
    failure_row,
    outcome_row,
    phases_frame,
    runs_frame,
)
from toolkit.moves.trial import LaunchPhases, RunOutcome, TrialObserver, make_bench_call, run_launch
from toolkit.server.spec import ServerSpec

__all__ = ["sweep", "OnFailure"]

OnFailure = Literal["record", "stop"]


class _VariantStep:
    """The journal step of one combination, shared by its launches: opened by the first, ended by the last."""

    def __init__(self, journal: Journal | None, kind: str, title: str, hypothesis: str | None, variant: Variant,
                 hosts: list[str], launches: int) -> None:
        self._open = (lambda: journal.step(kind, title, hypothesis=hypothesis, spec=variant.spec, host=hosts)) \
            if journal is not None else None
        self._left = launches
        self._lock = threading.Lock()
        self.recorder: StepRecorder | None = None
        self.error: BaseException | None = None
        self.runs_done = 0

    @property
    def id(self) -> int | None:
        return None if self.recorder is None else self.recorder.id

    def start(self) -> StepRecorder | None:
        with self._lock:
            if self.recorder is None and self._open is not None:
                self.recorder = self._open()
            return self.recorder

    def report(self, error: BaseException | None) -> None:
        with self._lock:
            self._left -= 1
            if error is not None and self.error is None:
                self.error = error
            if self._left == 0 and self.recorder is not None:
                err = self.error
                self.recorder.__exit__(None if err is None else type(err), err, None if err is None else err.__traceback__)

    def abandon(self) -> None:
        """Launches that never ran (the sweep stopped): end the step if it is still open."""
        with self._lock:
            if self.recorder is not None and self._left > 0:
                self.recorder.finish("failed", error=f"the sweep stopped before {self._left} launch(es) of this "
                                                     "combination ran" + (f" ({self.error})" if self.error else ""))


def sweep(hosts: Hosts, base_spec: ServerSpec | None, *, vary: Mapping[str, Sequence[object]] | None = None,
          specs: Sequence[ServerSpec] | None = None, plan: Plan | None = None,
          relaunch_each_repeat: bool = False, spread: Spread = "alternate", kind: str = "flag_change",
          title: str | None = None, hypothesis: str | None = None,
          on_failure: OnFailure = "record") -> SweepResult:
    """Run every combination (launch, wait_ready, bench ``plan.repeats`` times, record, stop); return the runs.

    ``vary`` maps flags or ``"env:NAME"`` variables to values (None removes, True is a switch); or pass
    ``specs=[...]``. ``on_failure="record"`` stores a failed combination and goes on; ``"stop"`` stores it
    and re-raises. With ``relaunch_each_repeat=True`` a combination's launches rotate over the hosts
    (``spread="alternate"``), so that a slow host is told from a slow combination.

    >>> result = sweep(tk.Host.local(), tk.ServerSpec.simulator(tp=2, port=30000),
    ...                vary={"env:NCCL_ALGO": [None, "Ring"]}, plan=tk.Plan(repeats=3))  # doctest: +SKIP
    >>> tk.plots.sweep(result)  # doctest: +SKIP
    """
    plan = plan or Plan()
    repeats, journal, progress = plan.repeats_or(1), plan.journal, plan.progress
    if on_failure not in ("record", "stop"):
        raise ValueError(f"on_failure must be 'record' or 'stop', got {on_failure!r}")
    pool = HostPool(hosts, spec_for_host=plan.spec_for_host)
    variants = expand(base_spec, vary=vary, specs=specs)
    params = tuple(dict.fromkeys(n for v in variants for n in v.params))
    bench_call = make_bench_call(plan.bench, progress=progress and len(pool) == 1, alone=plan.bench_alone)
    launches, per_launch = (repeats, 1) if relaunch_each_repeat else (1, repeats)
    queues = sweep_queues(len(variants), launches, len(pool), spread)
    where = {v.index: [pool.hosts[h].name for h, q in enumerate(queues) if any(j[0] == v.index for j in q)]
             for v in variants}
    steps = [_VariantStep(journal, kind, f"{title}: {v.title}" if title else v.title, hypothesis, v, where[v.index],
                          launches) for v in variants]
    rows: list[dict[str, object]] = []
    timings: list[tuple[int, int, LaunchPhases]] = []  # (combination, launch, where its time went)
    rows_lock = threading.Lock()

    def work(lane: Lane, job: tuple[int, int]) -> None:
        variant, launch_no = variants[job[0]], job[1]
        book = steps[variant.index]
        columns = {"combination": variant.index, "label": variant.label, **variant.params, "host": lane.host.name}
        lane.status(variant.label)

        def on_run(outcome: RunOutcome) -> None:
            row = outcome_row(outcome, **columns)
            with rows_lock:
                rows.append(row)
                book.runs_done += 1
            value = row.get("output_throughput")
            lane.advance(1, f"{variant.label[:24]}: {value:.1f} tok/s" if isinstance(value, int | float) else None)

        def on_phases(phases: LaunchPhases) -> None:
            with rows_lock:
                timings.append((variant.index, launch_no, phases))

        done_before = book.runs_done
        try:
            step = book.start()
            with lane.guard():
                run_launch(lane.host, lane.spec(variant.spec), step=step, benches=per_launch, bench_call=bench_call,
                           timeout_s=plan.timeout_s, log_dir=lane.log_dir(plan.log_dir), run_label=variant.label,
                           first_repeat=launch_no * per_launch, launch_no=launch_no,
                           observer=TrialObserver(on_server=lane.watch, on_run=on_run, on_phases=on_phases))
        except BaseException as exc:
            runs = book.runs_done - done_before
            with rows_lock:
                rows.append(failure_row(exc, book.id, launch_no * per_launch + runs, **columns))
            lane.advance(per_launch - runs)
            what = f"combination {variant.index + 1} of {len(variants)} ({variant.title}) on {lane.host.name}"
            if isinstance(exc, Exception) and on_failure == "stop":
                exc.add_note(f"sweep stopped at {what}; on_failure='record' would record it and go on")
            elif not isinstance(exc, Exception):
                exc.add_note(f"sweep interrupted at {what}; its server was stopped and the journal marks the step "
                             "interrupted")
            book.report(exc)
            raise
        book.report(None)

    try:
        done = pool.run(queues, work, units=lambda job: per_launch, desc=title or "sweep", progress=progress,
                        stop_on_error=on_failure == "stop")
    finally:
        for book in steps:
            book.abandon()
    errors = [d for lane in done for d in lane if d.error is not None]
    if errors and on_failure == "stop":
        raise errors[0].error  # type: ignore[misc]
    failures: list[SweepFailure] = []
    for d in errors:
        variant = variants[d.job[0]]
        if d.error is not None and not any(f.variant.index == variant.index for f in failures):
            failures.append(SweepFailure(variant, d.error, steps[variant.index].id, steps[variant.index].runs_done))
    frame = runs_frame(rows, ("combination", "label", *params, "host"))
    frame = frame.sort_values(["combination", "repeat"], kind="stable", na_position="last").reset_index(drop=True)
    return SweepResult(tuple(variants), frame, tuple(sorted(failures, key=lambda f: f.variant.index)),
                       tuple(book.id for book in steps), params, phases_frame(timings))


"""``sweep()``: every combination launched, benchmarked, recorded and stopped, in turn."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from toolkit.benchmark import BenchResult
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves.params import expand
from toolkit.moves.sweep_result import SweepFailure, SweepResult, failure_row, outcome_row, runs_frame
from toolkit.moves.trial import RunOutcome, make_bench_call, run_launch
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec

__all__ = ["sweep", "OnFailure"]

OnFailure = Literal["record", "stop"]


def sweep(
    host: Host,
    base_spec: ServerSpec | None,
    *,
    vary: Mapping[str, Sequence[object]] | None = None,
    specs: Sequence[ServerSpec] | None = None,
    repeats: int = 1,
    relaunch_each_repeat: bool = False,
    bench: Mapping[str, Any] | Callable[[Server], BenchResult] | None = None,
    journal: Journal | None = None,
    kind: str = "flag_change",
    title: str | None = None,
    hypothesis: str | None = None,
    on_failure: OnFailure = "record",
    timeout_s: float = 900,
    progress: bool = True,
    log_dir: str | None = None,
) -> SweepResult:
    """Run every combination (launch, wait_ready, bench ``repeats`` times, record, stop); return the runs.

    ``vary`` maps flags (``"--speculative-attention-mode"``) or variables (``"env:NCCL_ALGO"``)
    to values (None removes, True is a switch); or pass ``specs=[...]``. ``bench``: keyword
    arguments for :func:`toolkit.benchmark.bench` or a ``callable(server) -> BenchResult``.
    ``on_failure="record"`` stores a failed combination (error, evidence, log lines) and
    goes on; ``"stop"`` stores it and re-raises. Servers are always stopped, Ctrl-C included.

    >>> result = sweep(tk.Host.local(), tk.ServerSpec.simulator(tp=2, port=30000), journal=journal,
    ...                vary={"env:NCCL_ALGO": [None, "Ring"]}, bench={"num_prompts": 8, "output_len": 32})  # doctest: +SKIP
    >>> tk.plots.sweep(result)  # doctest: +SKIP
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if on_failure not in ("record", "stop"):
        raise ValueError(f"on_failure must be 'record' or 'stop', got {on_failure!r}")
    from tqdm.auto import tqdm

    variants = expand(base_spec, vary=vary, specs=specs)
    params = tuple(dict.fromkeys(n for v in variants for n in v.params))
    bench_call = make_bench_call(bench, progress=progress)
    launches, per_launch = (repeats, 1) if relaunch_each_repeat else (1, repeats)
    rows: list[dict[str, object]] = []
    failures: list[SweepFailure] = []
    step_ids: list[int | None] = []
    bar = tqdm(total=len(variants) * repeats, desc="sweep", unit="run", disable=not progress)
    try:
        for variant in variants:
            bar.set_description(variant.label[:40])
            base_columns = {"combination": variant.index, "label": variant.label, **variant.params}
            done: list[RunOutcome] = []

            def on_run(outcome: RunOutcome, columns: dict[str, object] = base_columns,
                       done: list[RunOutcome] = done, label: str = variant.label) -> None:
                done.append(outcome)
                rows.append(outcome_row(outcome, **columns))
                bar.update(1)
                value = rows[-1].get("output_throughput")
                if isinstance(value, int | float):
                    bar.set_postfix_str(f"{label[:24]}: {value:.1f} tok/s")

            step_title = f"{title}: {variant.title}" if title else variant.title
            step_cm = (journal.step(kind, step_title, hypothesis=hypothesis, spec=variant.spec, host=host)
                       if journal is not None else contextlib.nullcontext(None))
            step_id = None
            try:
                with step_cm as step:
                    step_id = None if step is None else step.id
                    for launch_no in range(launches):
                        run_launch(host, variant.spec, step=step, benches=per_launch, bench_call=bench_call,
                                   timeout_s=timeout_s, log_dir=log_dir, run_label=variant.label,
                                   first_repeat=len(done), launch_no=launch_no, on_run=on_run)
            except Exception as exc:
                failures.append(SweepFailure(variant, exc, step_id, len(done)))
                rows.append(failure_row(exc, step_id, len(done), **base_columns))
                bar.update(repeats - len(done))
                if on_failure == "stop":
                    exc.add_note(f"sweep stopped at combination {variant.index + 1} of {len(variants)} "
                                 f"({variant.title}); on_failure='record' would record it and go on")
                    raise
            except KeyboardInterrupt as exc:
                exc.add_note(f"sweep interrupted at combination {variant.index + 1} of {len(variants)} "
                             f"({variant.title}); its server was stopped and the journal marks the step interrupted")
                raise
            step_ids.append(step_id)
    finally:
        bar.close()
    return SweepResult(tuple(variants), runs_frame(rows, ("combination", "label", *params)), tuple(failures), tuple(step_ids), params)

"""A/B tests of two server configurations: is B better than A beyond noise, and by how much?

The noise that matters is launch-to-launch variance (NCCL algorithm choice, CUDA-graph capture) and
drift over the session (thermals, a neighbour's job), not only one benchmark's spread. So each
side-round is a fresh launch, in the order A B B A A B ..., so that a linear drift weighs on both
sides alike. With several hosts each round is an A and a B launch on one host, and B is judged from
the per-round differences (:func:`toolkit.moves.hostfactor.paired_comparison`): a slow node cancels out.

Each side is a journal step of its own, so each run keeps its spec and ``journal.compare(a, b)`` works.

>>> ab = compare_flag(tk.Host.local(), eagle, "--speculative-attention-mode", "prefill", "decode",
...                   plan=tk.Plan(bench=tk.Load(num_prompts=8, output_len=64), repeats=3))  # doctest: +SKIP
>>> ab.summary_text  # doctest: +SKIP
'decode is 2.06x prefill on output tok/s (123.1 vs 59.8; 95% CI of the ratio 2.01x to 2.11x; 3+3 runs): beyond noise'
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from toolkit.moves.abverdict import (
    ABVerdict,
    Expectation,
    ab_sentence,
    ab_verdict,
    journal_verdict,
    schedule,
    side_labels,
    value_label,
)
from toolkit.moves.fan_out import HostPool, Hosts, Lane
from toolkit.moves.hostfactor import HostEffects, host_effects, paired_comparison
from toolkit.moves.params import ENV_PREFIX, apply_param, value_text
from toolkit.moves.plan import Plan
from toolkit.moves.schedule import Side, Slot, ab_queues
from toolkit.moves.sweep_result import outcome_row, runs_frame
from toolkit.moves.trial import RunOutcome, TrialObserver, make_bench_call, run_launch
from toolkit.server.spec import ServerSpec
from toolkit.stats import Comparison, compare_samples

if TYPE_CHECKING:
    import pandas as pd

    from toolkit.journal import SourceRepo, StepVerdict

#: How an A/B test launches its servers (see :func:`compare`).
Launches = Literal["interleaved", "in_blocks", "reused"]
LAUNCHES: tuple[Launches, ...] = ("interleaved", "in_blocks", "reused")

__all__ = ["Launches", "compare", "compare_flag", "ABResult", "ABVerdict", "schedule", "ab_verdict", "ab_sentence",
           "side_labels"]


@dataclass(frozen=True, eq=False)
class ABResult:
    """B against A on ``metric``: the statistics, the verdict, every run (``frame``: side, host, block).

    ``host_effects`` says whether a host ran slower than the others (None on one host).
    """

    label_a: str
    label_b: str
    spec_a: ServerSpec
    spec_b: ServerSpec
    metric: str
    comparison: Comparison
    verdict: ABVerdict
    reason: str
    summary_text: str
    frame: pd.DataFrame
    expect: Expectation | None
    journal_verdict: StepVerdict | None
    step_ids: tuple[int | None, int | None]
    host_effects: HostEffects | None = None

    @property
    def ratio(self) -> float:
        return self.comparison.ratio

    def __repr__(self) -> str:
        def runs(side: str) -> str:
            rows = self.frame[(self.frame["side"] == side) & (self.frame["status"] == "ok")]
            if self.metric not in rows:
                return ""
            several = rows["host"].nunique() > 1
            return ", ".join(f"{v:.1f}" + (f" ({h})" if several else "") for v, h in zip(rows[self.metric], rows["host"],
                                                                                          strict=True))

        judged = f" -> {self.journal_verdict} (expected {self.expect})" if self.journal_verdict else ""
        hosts = f"\n  {self.host_effects.text}" if self.host_effects is not None else ""
        return (f"ABResult: {self.summary_text}{judged}\n  A {self.label_a}: {runs('a')}\n"
                f"  B {self.label_b}: {runs('b')}\n  verdict {self.verdict}: {self.reason}{hosts}")


def compare(hosts: Hosts, spec_a: ServerSpec, spec_b: ServerSpec, *, plan: Plan | None = None,
            kind: str = "flag_change", title: str | None = None, hypothesis: str | None = None,
            expect: Expectation | None = "b_faster", launches: Launches = "interleaved",
            labels: tuple[str, str] | None = None, confidence: float = 0.95,
            repo: SourceRepo | None = None) -> ABResult:
    """Run A and B ``plan.repeats`` times each (default 3), a fresh launch per side-round, A B B A ...; judge B vs A.

    ``expect`` is what the hypothesis predicts (None: no verdict for the B step). A failed launch raises
    after both steps record it. ``launches``: ``"in_blocks"`` runs A's launches first, then B's;
    ``"reused"`` launches each side once per host (cheaper, but it measures only the benchmark's noise).
    """
    plan = plan or Plan()
    repeats, journal, metric = plan.repeats_or(3), plan.journal, plan.metric
    if expect not in ("a_faster", "b_faster", "changed", None):
        raise ValueError(f"expect must be 'b_faster', 'a_faster', 'changed' or None, got {expect!r}")
    if launches not in LAUNCHES:
        raise ValueError(f"launches must be one of {', '.join(map(repr, LAUNCHES))}, got {launches!r}")
    direction = plan.higher_better()
    pool = HostPool(hosts, spec_for_host=plan.spec_for_host)
    label_a, label_b = labels or side_labels(spec_a, spec_b)
    names: dict[Side, str] = {"a": label_a, "b": label_b}
    if names["a"] == names["b"]:
        names = {"a": f"A: {names['a']}", "b": f"B: {names['b']}"}
    title = title or f"{names['b']} vs {names['a']}"
    specs: dict[Side, ServerSpec] = {"a": spec_a, "b": spec_b}
    queues = _number_launches(ab_queues(repeats, len(pool), interleave=launches == "interleaved",
                                        reuse_launch=launches == "reused"))
    used = [pool.hosts[i].name for i, q in enumerate(queues) if q]
    steps: dict[Side, Any] = {"a": None, "b": None}
    if journal is not None:
        for side in ("a", "b"):
            steps[side] = journal.step(kind, f"{title} [{side.upper()}: {names[side]}]", spec=specs[side], host=used,
                                       hypothesis=hypothesis if side == "b" else None, repo=repo)
    bench_call = make_bench_call(plan.bench, progress=False, alone=plan.bench_alone)
    outcomes: dict[Side, list[tuple[int, RunOutcome]]] = {"a": [], "b": []}
    rows: list[dict[str, object]] = []
    lock = threading.Lock()

    def work(lane: Lane, job: tuple[Slot, int, int]) -> None:
        slot, launch_no, first_repeat = job
        lane.status(f"{slot.side.upper()}: {names[slot.side]}")

        def on_run(outcome: RunOutcome) -> None:
            with lock:
                outcomes[slot.side].append((slot.block, outcome))
                rows.append(outcome_row(outcome, side=slot.side, label=names[slot.side], host=lane.host.name,
                                        block=slot.block))
            lane.advance(1)

        with lane.guard():
            run_launch(lane.host, lane.spec(specs[slot.side]), step=steps[slot.side], benches=slot.benches,
                       bench_call=bench_call, timeout_s=plan.timeout_s, log_dir=lane.log_dir(plan.log_dir),
                       run_label=names[slot.side], first_repeat=first_repeat, launch_no=launch_no,
                       observer=TrialObserver(on_server=lane.watch, on_run=on_run))

    done = pool.run(queues, work, units=lambda job: job[0].benches, desc=title[:40], progress=plan.progress,
                    stop_on_error=True)
    failed = next((d for lane in done for d in lane if d.error is not None), None)
    try:
        if failed is not None:
            raise failed.error  # type: ignore[misc]
        comparison, verdict, reason = _judge_runs(outcomes, metric, confidence, direction, plan.min_effect, len(used) > 1)
    except BaseException as exc:
        stopped: Side | None = failed.job[0].side if failed is not None else None
        _close_after_failure(steps, stopped, names, exc)
        exc.add_note(f"compare() stopped after {len(outcomes['a'])}+{len(outcomes['b'])} runs"
                     + (f", at side {stopped.upper()} ({names[stopped]}) on {failed.host if failed else '?'}"
                        if stopped else "")
                     + "; every server it started was stopped")
        raise
    effects = _host_effects(outcomes, names, metric, direction) if len(used) > 1 else None
    text = ab_sentence(comparison, verdict, reason, names["a"], names["b"], metric)
    judged = journal_verdict(verdict, expect)
    if steps["a"] is not None and steps["b"] is not None:
        if judged is not None:
            steps["b"].set_verdict(judged, note=text)
        else:
            steps["b"].note(text)
        if effects is not None:
            steps["b"].note(effects.text)
        steps["a"].note(f"reference side (A) of the comparison recorded in step {steps['b'].id}: {text}")
        steps["a"].finish("done")
        steps["b"].finish("done")
    frame = runs_frame(rows, ("side", "label", "host", "block"))
    frame = frame.sort_values("block", kind="stable").reset_index(drop=True)
    return ABResult(names["a"], names["b"], spec_a, spec_b, metric, comparison, verdict, reason, text, frame, expect,
                    judged, (steps["a"].id if steps["a"] is not None else None,
                             steps["b"].id if steps["b"] is not None else None), effects)


def _number_launches(queues: Sequence[Sequence[Slot]]) -> list[list[tuple[Slot, int, int]]]:
    """Each slot with its side's launch number and first repeat, counted host by host."""
    launches: dict[Side, int] = {"a": 0, "b": 0}
    runs: dict[Side, int] = {"a": 0, "b": 0}
    numbered: list[list[tuple[Slot, int, int]]] = []
    for queue in queues:
        numbered.append([])
        for slot in queue:
            numbered[-1].append((slot, launches[slot.side], runs[slot.side]))
            launches[slot.side] += 1
            runs[slot.side] += slot.benches
    return numbered


def _judge_runs(outcomes: Mapping[Side, list[tuple[int, RunOutcome]]], metric: str, confidence: float,
                higher_is_better: bool, min_effect: float, paired: bool) -> tuple[Comparison, ABVerdict, str]:
    values = {side: [v for _, o in runs if (v := _value(o, metric)) is not None] for side, runs in outcomes.items()}
    if not values["a"] or not values["b"]:
        raise ValueError(f"no run reported {metric!r} (A: {len(values['a'])}, B: {len(values['b'])} values); "
                         "choose a metric of BenchResult.summary, e.g. 'output_throughput'")
    if paired:
        blocks: dict[int, tuple[list[float], list[float]]] = {}
        for index, side in enumerate(("a", "b")):
            for block, outcome in outcomes[side]:  # type: ignore[index]
                if (value := _value(outcome, metric)) is not None:
                    blocks.setdefault(block, ([], []))[index].append(value)
        comparison = paired_comparison([blocks[b] for b in sorted(blocks)], confidence=confidence,
                                       higher_is_better=higher_is_better)
    else:
        comparison = compare_samples(values["a"], values["b"], confidence=confidence, higher_is_better=higher_is_better)
    return (comparison, *ab_verdict(comparison, min_effect))


def _host_effects(outcomes: Mapping[Side, list[tuple[int, RunOutcome]]], labels: Mapping[Side, str], metric: str,
                  higher_is_better: bool) -> HostEffects | None:
    rows = [(labels[side], outcome.host, value) for side, runs in outcomes.items() for _, outcome in runs
            if (value := _value(outcome, metric)) is not None]
    return host_effects(rows, slower="slow" if higher_is_better else "fast")


def _close_after_failure(steps: Mapping[Side, Any], failed: Side | None, labels: Mapping[Side, str],
                         exc: BaseException) -> None:
    """The failing side's step records the error (or the interrupt); the other says why it stopped."""
    for side, step in steps.items():
        if step is None:
            continue
        if side == failed or failed is None or not isinstance(exc, Exception):
            step.__exit__(type(exc), exc, exc.__traceback__)
        else:
            step.finish("failed", error=f"the A/B comparison stopped: side {failed.upper()} ({labels[failed]}) "
                        f"failed with {type(exc).__name__} (see step {steps[failed].id})")


def _value(outcome: RunOutcome, metric: str) -> float | None:
    value = outcome.result.summary.get(metric)
    if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    return None


def compare_flag(hosts: Hosts, spec: ServerSpec, flag: str, a: object, b: object, **kwargs: Any) -> ABResult:
    """:func:`compare` of ``spec`` with ``flag`` (or ``"env:NAME"``) at ``a`` vs ``b`` (None: without it).

    >>> compare_flag(host, eagle, "--speculative-attention-mode", "prefill", "decode",
    ...              hypothesis="verify in extend mode without CUDA graphs is the bottleneck")  # doctest: +SKIP
    """
    spec_a, spec_b = apply_param(spec, flag, a), apply_param(spec, flag, b)
    kwargs.setdefault("labels", (value_label(flag, a), value_label(flag, b)))
    kwargs.setdefault("title", f"{flag.removeprefix(ENV_PREFIX)}: {value_text(b)} vs {value_text(a)}")
    return compare(hosts, spec_a, spec_b, **kwargs)

"""A/B tests of two server configurations: is B better than A beyond noise, and by how much?

The seed's 59-61 vs 82-83 tok/s was an obvious gap; most flag changes are not. The noise
that matters is not only one benchmark's run-to-run spread but launch-to-launch variance
(NCCL algorithm choice, memory placement, CUDA-graph capture) and drift over the session
(thermals, a neighbour's job). So by default every side-round is a fresh launch, and the
order is counterbalanced, A B B A A B ..., so that a linear drift weighs on both sides
equally. ``reuse_launch=True`` launches each side once and runs its repeats on it
(cheaper, but it only measures the benchmark's own noise).

Both sides are journal steps (same ``kind``): A, the reference, and B, the change, which
carries the hypothesis and the verdict. Two steps, not one with two labelled runs, so
each run keeps its own spec in ``journal.results()`` and ``journal.compare(a, b)`` shows
what differs.

>>> import toolkit as tk  # doctest: +SKIP
>>> eagle = tk.ServerSpec.simulator(tp=8, port=30000, speculative_algorithm="EAGLE3", speculative_num_steps=2)  # doctest: +SKIP
>>> ab = compare_flag(tk.Host.local(), eagle, "--speculative-attention-mode", "prefill", "decode",
...                   repeats=3, bench={"num_prompts": 8, "output_len": 64})  # doctest: +SKIP
>>> ab.summary_text  # doctest: +SKIP
'decode is 2.06x prefill on output tok/s (123.1 vs 59.8; 95% CI of the ratio 2.01x to 2.11x; 3+3 runs): beyond noise'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from toolkit.benchmark.labels import metric_label
from toolkit.moves.params import ENV_PREFIX, apply_param, param_text, spec_differences, value_text
from toolkit.moves.sweep_result import outcome_row, runs_frame
from toolkit.moves.trial import RunOutcome, make_bench_call, run_launch
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec
from toolkit.stats import Comparison, compare_samples, metric_direction

if TYPE_CHECKING:
    import pandas as pd

    from toolkit.benchmark import BenchResult
    from toolkit.host.host import Host
    from toolkit.journal import Journal, StepVerdict

__all__ = ["compare", "compare_flag", "ABResult", "ABVerdict", "schedule", "ab_verdict", "side_labels"]

ABVerdict = Literal["a_faster", "b_faster", "within_noise"]  # "faster": better on the metric
Side = Literal["a", "b"]


def schedule(repeats: int, *, interleave: bool, reuse_launch: bool) -> list[tuple[Side, int]]:
    """The launches in order, as (side, benchmark runs on that launch).

    >>> schedule(3, interleave=True, reuse_launch=False)
    [('a', 1), ('b', 1), ('b', 1), ('a', 1), ('a', 1), ('b', 1)]
    """
    if reuse_launch:
        return [("a", repeats), ("b", repeats)]
    if not interleave:
        first: list[tuple[Side, int]] = [("a", 1)] * repeats
        return first + [("b", 1)] * repeats
    rounds: list[tuple[Side, int]] = []
    for r in range(repeats):
        rounds += [("a", 1), ("b", 1)] if r % 2 == 0 else [("b", 1), ("a", 1)]
    return rounds


def ab_verdict(comparison: Comparison, min_effect: float) -> tuple[ABVerdict, str]:
    """The verdict and why: beyond noise only if the interval excludes no change and the change is >= min_effect."""
    if comparison.verdict == "within_noise":
        return "within_noise", comparison.reason
    if not math.isnan(comparison.ratio) and abs(comparison.ratio - 1.0) < min_effect:
        return "within_noise", (f"the difference, {abs(comparison.ratio - 1):.1%}, is below min_effect="
                                f"{min_effect:.0%}: too small to matter, though the interval excludes zero")
    return comparison.verdict, comparison.reason


def side_labels(spec_a: ServerSpec, spec_b: ServerSpec) -> tuple[str, str]:
    """Names for the sides from what differs: ``("prefill", "decode")``; ``("A", "B")`` if nothing does."""
    diff_b = spec_differences(spec_a, spec_b)
    if not diff_b:
        return "A", "B"
    diff_a = {name: spec_differences(spec_b, spec_a).get(name) for name in diff_b}
    if len(diff_b) == 1:
        (name, b_value), a_value = next(iter(diff_b.items())), next(iter(diff_a.values()))
        return _value_label(name, a_value), _value_label(name, b_value)
    return (", ".join(param_text(n, v) for n, v in diff_a.items()),
            ", ".join(param_text(n, v) for n, v in diff_b.items()))


def _value_label(name: str, value: object) -> str:
    if value is None or value is False or value is True or name.startswith(ENV_PREFIX) or name == "commit":
        return param_text(name, value)
    return value_text(value)


@dataclass(frozen=True, eq=False)
class ABResult:
    """B against A on ``metric``: the statistics (``comparison``), the verdict, every run (``frame``)."""

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
    expect: ABVerdict | None
    journal_verdict: StepVerdict | None
    step_ids: tuple[int | None, int | None]

    @property
    def ratio(self) -> float:
        return self.comparison.ratio

    def __repr__(self) -> str:
        def runs(side: str) -> str:
            rows = self.frame[(self.frame["side"] == side) & (self.frame["status"] == "ok")]
            return ", ".join(f"{v:.1f}" for v in rows[self.metric]) if self.metric in rows else ""

        judged = f" -> {self.journal_verdict} (expected {self.expect})" if self.journal_verdict else ""
        return (f"ABResult: {self.summary_text}{judged}\n  A {self.label_a}: {runs('a')}\n"
                f"  B {self.label_b}: {runs('b')}\n  verdict {self.verdict}: {self.reason}")


def ab_sentence(comparison: Comparison, verdict: ABVerdict, reason: str, label_a: str, label_b: str,
              metric: str) -> str:
    """One sentence: ``decode is 2.06x prefill on output tok/s (...; 95% CI of the ratio ...): beyond noise``."""
    c = comparison
    low, high = c.ratio_ci
    ci = ("one run per side: noise unknown" if math.isnan(low)
          else f"{c.confidence:.0%} CI of the ratio {low:.2f}x to {high:.2f}x")
    head = (f"{label_b} is {c.ratio:.2f}x {label_a} on {metric_label(metric)} "
            f"({_number(c.mean_b)} vs {_number(c.mean_a)}; {ci}; {c.n_b}+{c.n_a} runs)")
    if verdict == "within_noise":
        return f"{head}: within noise ({reason})"
    return f"{head}: {label_b if verdict == 'b_faster' else label_a} better beyond noise"


def _number(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def compare(
    host: Host,
    spec_a: ServerSpec,
    spec_b: ServerSpec,
    *,
    repeats: int = 3,
    bench: Mapping[str, Any] | Callable[[Server], BenchResult] | None = None,
    journal: Journal | None = None,
    kind: str = "flag_change",
    title: str | None = None,
    hypothesis: str | None = None,
    expect: ABVerdict | None = "b_faster",
    metric: str = "output_throughput",
    higher_is_better: bool | None = None,
    interleave: bool | None = None,
    reuse_launch: bool = False,
    label_a: str | None = None,
    label_b: str | None = None,
    confidence: float = 0.95,
    min_effect: float = 0.01,
    timeout_s: float = 900,
    progress: bool = True,
    log_dir: str | None = None,
) -> ABResult:
    """Run A and B ``repeats`` times each (a fresh launch per side-round, order A B B A ...) and judge B vs A.

    ``expect`` is what the hypothesis predicts (B, the change, better by default): the B
    step's verdict is ``confirmed`` if that holds beyond noise, ``refuted`` if the opposite
    does, ``inconclusive`` within noise; None records no verdict. A difference smaller than
    ``min_effect`` (relative) counts as within noise. A failed launch stops the comparison
    and raises, after both steps record it.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (3 or more to see noise), got {repeats}")
    if expect not in ("a_faster", "b_faster", None):
        raise ValueError(f"expect must be 'b_faster', 'a_faster' or None, got {expect!r}")
    if reuse_launch and interleave:
        raise ValueError("interleave=True needs a launch per side-round: one server at a time holds the GPUs, "
                         "so reuse_launch=True runs A's repeats, then B's")
    direction = higher_is_better if higher_is_better is not None else metric_direction(metric)
    if direction is None:
        raise ValueError(f"cannot tell whether more {metric!r} is better; pass higher_is_better=True or False")
    derived = side_labels(spec_a, spec_b)
    labels: dict[Side, str] = {"a": label_a or derived[0], "b": label_b or derived[1]}
    if labels["a"] == labels["b"]:
        labels = {"a": f"A: {labels['a']}", "b": f"B: {labels['b']}"}
    title = title or f"{labels['b']} vs {labels['a']}"
    specs: dict[Side, ServerSpec] = {"a": spec_a, "b": spec_b}
    slots = schedule(repeats, interleave=interleave is not False, reuse_launch=reuse_launch)
    bench_call = make_bench_call(bench, progress=False)
    outcomes: dict[Side, list[RunOutcome]] = {"a": [], "b": []}
    rows: list[dict[str, object]] = []
    steps: dict[Side, Any] = {"a": None, "b": None}
    if journal is not None:
        for side in ("a", "b"):
            steps[side] = journal.step(kind, f"{title} [{side.upper()}: {labels[side]}]", spec=specs[side], host=host,
                                       hypothesis=hypothesis if side == "b" else None)
    from tqdm.auto import tqdm

    bar = tqdm(total=2 * repeats, desc=title[:40], unit="run", disable=not progress)
    current: Side | None = None
    try:
        for current, benches in slots:
            def on_run(outcome: RunOutcome, side: Side = current) -> None:
                outcomes[side].append(outcome)
                rows.append(outcome_row(outcome, side=side, label=labels[side]))
                bar.update(1)

            run_launch(host, specs[current], step=steps[current], benches=benches, bench_call=bench_call,
                       timeout_s=timeout_s, log_dir=log_dir, run_label=labels[current],
                       first_repeat=len(outcomes[current]), launch_no=0 if reuse_launch else len(outcomes[current]),
                       on_run=on_run)
        current = None
        comparison, verdict, reason = _judge_runs(outcomes, metric, confidence, direction, min_effect)
    except BaseException as exc:
        _close_after_failure(steps, current, labels, exc)
        exc.add_note(f"compare() stopped after {len(outcomes['a'])}+{len(outcomes['b'])} runs"
                     + (f", at side {current.upper()} ({labels[current]})" if current else "")
                     + "; every server it started was stopped")
        raise
    finally:
        bar.close()
    text = ab_sentence(comparison, verdict, reason, labels["a"], labels["b"], metric)
    journal_verdict = _journal_verdict(verdict, expect)
    if steps["a"] is not None and steps["b"] is not None:
        if journal_verdict is not None:
            steps["b"].set_verdict(journal_verdict, note=text)
        else:
            steps["b"].note(text)
        steps["a"].note(f"reference side (A) of the comparison recorded in step {steps['b'].id}: {text}")
        steps["a"].finish("done")
        steps["b"].finish("done")
    return ABResult(labels["a"], labels["b"], spec_a, spec_b, metric, comparison, verdict, reason, text,
                    runs_frame(rows, ("side", "label")), expect, journal_verdict,
                    (steps["a"].id if steps["a"] is not None else None, steps["b"].id if steps["b"] is not None else None))


def _judge_runs(outcomes: Mapping[Side, list[RunOutcome]], metric: str, confidence: float, higher_is_better: bool,
                min_effect: float) -> tuple[Comparison, ABVerdict, str]:
    values = {side: _metric_values(runs, metric) for side, runs in outcomes.items()}
    if not values["a"] or not values["b"]:
        raise ValueError(f"no run reported {metric!r} (A: {len(values['a'])}, B: {len(values['b'])} values); "
                         "choose a metric of BenchResult.summary, e.g. 'output_throughput'")
    comparison = compare_samples(values["a"], values["b"], confidence=confidence, higher_is_better=higher_is_better)
    return (comparison, *ab_verdict(comparison, min_effect))


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


def _metric_values(outcomes: list[RunOutcome], metric: str) -> list[float]:
    values = []
    for outcome in outcomes:
        value = outcome.result.summary.get(metric)
        if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value):
            values.append(float(value))
    return values


def _journal_verdict(verdict: ABVerdict, expect: ABVerdict | None) -> StepVerdict | None:
    if expect is None:
        return None
    if verdict == "within_noise":
        return "inconclusive"
    return "confirmed" if verdict == expect else "refuted"


def compare_flag(host: Host, spec: ServerSpec, flag: str, a: object, b: object, **kwargs: Any) -> ABResult:
    """:func:`compare` of ``spec`` with ``flag`` at value ``a`` against value ``b``.

    ``flag`` is a flag (``"--speculative-attention-mode"``) or a variable (``"env:NCCL_ALGO"``);
    a value of None means without it, True a switch. Other arguments go to :func:`compare`.

    >>> compare_flag(host, eagle, "--speculative-attention-mode", "prefill", "decode", repeats=3,
    ...              journal=journal, kind="attention_mode",
    ...              hypothesis="verify in extend mode without CUDA graphs is the bottleneck")  # doctest: +SKIP
    """
    spec_a, spec_b = apply_param(spec, flag, a), apply_param(spec, flag, b)
    kwargs.setdefault("label_a", _value_label(flag, a))
    kwargs.setdefault("label_b", _value_label(flag, b))
    kwargs.setdefault("title", f"{flag.removeprefix(ENV_PREFIX)}: {kwargs['label_b']} vs {kwargs['label_a']}")
    return compare(host, spec_a, spec_b, **kwargs)

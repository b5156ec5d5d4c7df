"""The records that carry the knobs: a Plan for what the moves share, a Load for what bench sends."""

from __future__ import annotations

import inspect
import threading
import time

import pytest

import toolkit as tk
from toolkit.benchmark import Load
from toolkit.moves.measure import measure as measure_move
from toolkit.moves.plan import Plan
from toolkit.moves.trial import make_bench_call


def test_a_plan_leaves_unset_knobs_to_the_move_and_changes_one_knob_at_a_time() -> None:
    plan = Plan(bench=Load(num_prompts=8), progress=False)
    assert (plan.repeats_or(3), plan.replace(repeats=5).repeats_or(3)) == (3, 5)
    assert plan.replace(repeats=5).bench == plan.bench and plan.repeats is None  # frozen: the original is unchanged
    with pytest.raises(TypeError, match="no_such_knob"):
        plan.replace(no_such_knob=1)


@pytest.mark.parametrize(
    ("knobs", "error", "message"),
    [
        ({"bench": {"num_prompts": 8}}, TypeError, r"write tk.Load\(num_prompts=8, ...\)"),
        ({"repeats": 0}, ValueError, "repeats must be >= 1"),
        ({"timeout_s": 0}, ValueError, "must be positive"),
        ({"min_effect": 1.5}, ValueError, r"relative difference in \[0, 1\)"),
    ],
)
def test_a_wrong_knob_is_refused_when_the_plan_is_made(knobs: dict[str, object], error: type[Exception],
                                                        message: str) -> None:
    with pytest.raises(error, match=message):
        Plan(**knobs)  # type: ignore[arg-type]


def test_the_direction_comes_from_the_metric_unless_the_plan_says() -> None:
    assert Plan().higher_better() is True
    assert Plan(metric="median_ttft_ms").higher_better() is False
    assert Plan(metric="median_ttft_ms", higher_is_better=True).higher_better() is True
    with pytest.raises(ValueError, match=r"tk.Plan\(higher_is_better=True or False\)"):
        Plan(metric="made_up").higher_better()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"endpoint": "embeddings"}, "endpoint must be one of completions, chat"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1"),
        ({"num_prompts": 0}, "num_prompts must be at least 1"),
    ],
)
def test_a_load_is_checked_when_made(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Load(**fields)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        Load().replace(**fields)


def test_the_notebook_measure_has_the_moves_signature_declared_once() -> None:
    assert inspect.signature(tk.measure) == inspect.signature(measure_move)
    assert "plan" in inspect.signature(tk.measure).parameters
    assert tk.measure.__doc__ is not None and "shown under the cell" in tk.measure.__doc__


@pytest.mark.parametrize("alone", [True, False])
def test_bench_alone_keeps_the_lanes_runs_from_overlapping(alone: bool) -> None:
    """Three lanes' threads measure at once; with bench_alone their windows never overlap (they did without)."""
    windows: list[tuple[float, float]] = []

    def run(server: object) -> object:
        start = time.perf_counter()
        time.sleep(0.05)
        windows.append((start, time.perf_counter()))
        return server

    call = make_bench_call(run, progress=False, alone=Plan(bench_alone=alone).bench_alone)
    lanes = [threading.Thread(target=call, args=(None,)) for _ in range(3)]
    for lane in lanes:
        lane.start()
    for lane in lanes:
        lane.join()
    windows.sort()
    overlapping = any(later[0] < earlier[1] for earlier, later in zip(windows, windows[1:], strict=False))
    assert overlapping is not alone

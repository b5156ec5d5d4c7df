"""Sweeps and A/B tests: launch, wait, benchmark, record and stop, once per configuration.

The seed investigation changed one flag at a time by hand and kept the numbers in its head.
``sweep`` runs every combination the same way, makes each one a journal step, stops every server
it started whatever happens (errors, Ctrl-C) and returns a tidy DataFrame; ``compare`` and
``compare_flag`` say whether B beats A beyond noise. Every move takes a :class:`~toolkit.moves.plan.Plan`.

A sweep's repeats run on one launch: they measure the benchmark's noise, not launch-to-launch
variance (NCCL algorithm choice, graph capture); pass ``relaunch_each_repeat=True`` when a
difference must survive a relaunch, as ``compare`` does by default. Several hosts fan out side by
side (docs/fan-out.md), and the results tell a slow node from a slow configuration.
"""

from __future__ import annotations

from toolkit.moves.abtest import ABResult, ABVerdict, Launches, compare, compare_flag
from toolkit.moves.fan_out import HostPool, Hosts, SpecForHost
from toolkit.moves.hostfactor import HostEffect, HostEffects
from toolkit.moves.params import (
    ABSENT,
    ENV_PREFIX,
    Variant,
    apply_param,
    expand,
    param_text,
    spec_differences,
)
from toolkit.moves.plan import Plan
from toolkit.moves.schedule import Spread
from toolkit.moves.sweep import OnFailure, sweep
from toolkit.moves.sweep_result import SweepFailure, SweepResult
from toolkit.moves.trial import RunOutcome, TrialObserver, make_bench_call, run_launch

__all__ = ["Plan", "TrialObserver", "Launches", "make_bench_call", "sweep", "compare", "compare_flag",
           "ABResult", "ABVerdict", "SweepResult", "SweepFailure", "Variant", "RunOutcome", "OnFailure",
           "expand", "apply_param", "spec_differences", "param_text", "run_launch", "ABSENT", "ENV_PREFIX",
           "HostPool", "Hosts", "SpecForHost", "Spread", "HostEffect", "HostEffects"]

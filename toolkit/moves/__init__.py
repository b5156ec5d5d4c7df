"""Sweeps and A/B tests: launch, wait, benchmark, record and stop, once per configuration.

The seed investigation changed one flag at a time by hand, with a bash wait loop per
relaunch, and kept the numbers in its head. ``sweep`` runs every combination the same way
(``launch -> wait_ready -> bench -> record -> stop``), makes each one a journal step
(spec, host, readiness, one run per repeat, the server's metric lines over each run, the
decisive log lines, versions), stops every server it started whatever happens (errors,
Ctrl-C), and returns a tidy DataFrame. ``compare``/``compare_flag`` answer the next
question, "is B better than A beyond noise?", with a confidence interval and a verdict.

Every move takes a :class:`~toolkit.moves.plan.Plan`: the benchmark, the repeats, the readiness
timeout, the journal and the other knobs they share, so that its signature says what is its own.

Repeats in a sweep: one launch per combination, ``repeats`` benchmark runs on it. On a
real 8-GPU host a launch costs minutes (weights, CUDA graphs), and runs on one server
measure the benchmark's own run-to-run noise. Launch-to-launch variance (NCCL algorithm
choice, memory placement, graph capture) is *not* in those numbers: pass
``relaunch_each_repeat=True`` when a difference must survive a relaunch to count, as
``compare`` does by default.

Several hosts (a HostGroup or a list): the moves fan out, one server per host at a time,
side by side (docs/fan-out.md); every run records its host, and the results tell a slow
node from a slow configuration.

Layout: ``params`` (pure: parameters, grids, names), ``schedule`` (pure: which host runs
what, in which order), ``hostfactor`` (pure: host effects, A/B paired by host), ``trial``
(one launch), ``fan_out`` (hosts side by side), ``sweep_result`` (SweepResult), ``sweep``,
``abverdict`` (pure: an A/B test's words) and ``abtest`` (A/B tests), ``bisect/``, ``envcheck/``.

>>> import toolkit as tk  # doctest: +SKIP
>>> eagle = tk.ServerSpec.simulator(tp=8, port=30000, speculative_algorithm="EAGLE3", speculative_num_steps=2)  # doctest: +SKIP
>>> result = tk.sweep(tk.Host.local(), eagle, vary={"--speculative-attention-mode": ["prefill", "decode"]},
...                   plan=tk.Plan(bench=tk.Load(num_prompts=8, input_len=16, output_len=32)))  # doctest: +SKIP
>>> result.frame[["label", "output_throughput"]]  # doctest: +SKIP
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

__all__ = [
    "Plan",
    "TrialObserver",
    "Launches",
    "make_bench_call",
    "sweep",
    "compare",
    "compare_flag",
    "ABResult",
    "ABVerdict",
    "SweepResult",
    "SweepFailure",
    "Variant",
    "RunOutcome",
    "OnFailure",
    "expand",
    "apply_param",
    "spec_differences",
    "param_text",
    "run_launch",
    "ABSENT",
    "ENV_PREFIX",
    "HostPool",
    "Hosts",
    "SpecForHost",
    "Spread",
    "HostEffect",
    "HostEffects",
]

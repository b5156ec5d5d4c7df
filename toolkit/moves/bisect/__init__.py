"""Which commit made it slow? A pure planner and judge, and the driver that runs them on a host.

In the EAGLE-3 investigation a ``git pull`` of SGLang was a suspect, ruled out by
reverting to an old commit and re-measuring (:func:`compare_commits`). When that
comparison does show a regression, the next move is a bisection (:func:`perf_bisect`):
probe the commit halfway between the last good and the first bad one, benchmark it,
and repeat.

- :mod:`~toolkit.moves.bisect.planner` (pure): :class:`BisectState`, the verdicts so far
  and the next commit to probe.
- :mod:`~toolkit.moves.bisect.gitparse` (pure): ``git rev-list``, ``git bisect log`` and
  each bisect step's output, read.
- :mod:`~toolkit.moves.bisect.judgement` (pure): :func:`judge` / :func:`assess` turn repeated
  benchmark samples into good, bad or skip.
- :mod:`~toolkit.moves.bisect.driver`: :func:`perf_bisect` and :func:`compare_commits`,
  which check out, build, launch, benchmark and always put the checkout back.
"""

from __future__ import annotations

from toolkit.moves.bisect.driver import compare_commits, perf_bisect
from toolkit.moves.bisect.gitparse import (
    BisectLogEntry,
    BisectStep,
    CommitVerdict,
    parse_bisect_log,
    parse_bisect_step,
    parse_rev_list,
)
from toolkit.moves.bisect.judgement import Judgement, assess, judge
from toolkit.moves.bisect.planner import BisectOutcome, BisectState, expected_probes
from toolkit.moves.bisect.result import BisectResult, NothingToBisect, Probe

__all__ = [
    "CommitVerdict",
    "BisectState",
    "BisectOutcome",
    "BisectStep",
    "BisectLogEntry",
    "Judgement",
    "expected_probes",
    "judge",
    "assess",
    "parse_rev_list",
    "parse_bisect_log",
    "parse_bisect_step",
    "perf_bisect",
    "compare_commits",
    "BisectResult",
    "Probe",
    "NothingToBisect",
]

"""Which commit made it slow? A pure planner and judge, and the driver that runs them on a host.

In the EAGLE-3 investigation a ``git pull`` of SGLang was a suspect, ruled out by
reverting to an old commit and re-measuring (:func:`compare_commits`). When that
comparison does show a regression, the next move is a bisection (:func:`perf_bisect`):
probe the commit halfway between the last good and the first bad one (with H hosts, H
commits spread over the range, side by side), benchmark it, and repeat.

- :mod:`~toolkit.moves.bisect.planner` (pure): :class:`BisectState`, the verdicts so far
  and the next commit to probe.
- :mod:`~toolkit.moves.bisect.gitparse` (pure): ``git rev-list``, ``git bisect log`` and
  each bisect step's output, read.
- :mod:`~toolkit.moves.bisect.judgement` (pure): :func:`judge` / :func:`assess` turn repeated
  benchmark samples into good or bad with a confidence, or "measure again".
- :mod:`~toolkit.moves.bisect.prober`: one commit measured on one host, in its worktree.
- :mod:`~toolkit.moves.bisect.ledger`: the verdicts replayed into ``git bisect`` for its log.
- :mod:`~toolkit.moves.bisect.driver`: :func:`perf_bisect` (rounds of probes over one or
  several hosts) and :func:`compare_commits`; your checkout never moves.
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
from toolkit.moves.bisect.judgement import Judgement, Noise, assess, judge
from toolkit.moves.bisect.planner import BisectOutcome, BisectState, expected_probes, expected_rounds
from toolkit.moves.bisect.result import BisectResult, NothingToBisect, Probe

__all__ = [
    "CommitVerdict",
    "BisectState",
    "BisectOutcome",
    "BisectStep",
    "BisectLogEntry",
    "Judgement",
    "Noise",
    "expected_probes",
    "expected_rounds",
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

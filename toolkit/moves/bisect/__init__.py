"""Which commit made it slow? A pure planner and judge, and the driver that runs them on hosts.

In the EAGLE-3 investigation a ``git pull`` of SGLang was a suspect, ruled out by re-measuring an
old commit (:func:`compare_commits`); when that shows a regression, :func:`perf_bisect` finds it.
Pure: planner, gitparse, judgement, references. Shell: checkout, prober, ledger, driver.
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
    "CommitVerdict", "BisectState", "BisectOutcome", "BisectStep", "BisectLogEntry", "Judgement", "Noise",
    "expected_probes", "expected_rounds", "judge", "assess", "parse_rev_list", "parse_bisect_log",
    "parse_bisect_step", "perf_bisect", "compare_commits", "BisectResult", "Probe", "NothingToBisect",
]

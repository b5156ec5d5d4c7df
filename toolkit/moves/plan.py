"""``Plan``: the knobs every move shares, in one frozen record; a move's signature says what is its own.

Each move once took the benchmark, repeats, timeout, log folder, progress switch, host adaptation and
journal as keywords of its own (up to 23 parameters a call). A plan is made once and handed to every
move; ``plan.replace(...)`` changes one knob for one call. A field left at None takes the move's default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolkit.benchmark import BenchResult, Load
from toolkit.journal import Journal
from toolkit.moves.fan_out import SpecForHost
from toolkit.server.server import Server
from toolkit.stats import MIN_EFFECT, metric_direction

__all__ = ["Plan", "BenchCall"]

#: A benchmark as a function of the server (``tk.observed(...)``, or your own): what a move calls for each run.
BenchCall = Callable[[Server], BenchResult]


@dataclass(frozen=True)
class Plan:
    """How a move measures: the benchmark, how often, how long it waits, where logs go, what it records.

    ``metric`` is what A/B tests, bisections and diagnoses judge (direction from its name unless
    ``higher_is_better`` says); a relative difference under ``min_effect`` is noise. ``bench_alone``:
    fan-out lanes benchmark one at a time, because clients side by side in one busy process stall each
    other and read a no-change A/B anywhere from 0.3x to 1.7x (docs/fan-out.md).

    >>> plan = Plan(bench=Load(num_prompts=8), repeats=3, progress=False)
    >>> plan.replace(repeats=5).repeats, plan.repeats_or(1), Plan().repeats_or(1)
    (5, 3, 1)
    """

    bench: Load | BenchCall | None = None
    repeats: int | None = None
    timeout_s: float = 900.0
    build_timeout_s: float | None = 3600.0
    log_dir: str | None = None
    progress: bool = True
    spec_for_host: SpecForHost | None = None
    journal: Journal | None = None
    metric: str = "output_throughput"
    higher_is_better: bool | None = None
    min_effect: float = MIN_EFFECT
    bench_alone: bool = False

    def __post_init__(self) -> None:
        if self.bench is not None and not isinstance(self.bench, Load) and not callable(self.bench):
            raise TypeError(f"bench must be a tk.Load(...) or a callable of the server, got {self.bench!r}; "
                            "write tk.Load(num_prompts=8, ...) for a dict of bench() keywords")
        if self.repeats is not None and self.repeats < 1:
            raise ValueError(f"repeats must be >= 1 (or None for the move's default), got {self.repeats}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s (how long a launch may take to be ready) must be positive, "
                             f"got {self.timeout_s}")
        if not 0 <= self.min_effect < 1:
            raise ValueError(f"min_effect is a relative difference in [0, 1), got {self.min_effect}")

    def replace(self, **changes: Any) -> Plan:
        """This plan with some knobs changed (checked again): ``plan.replace(repeats=1, progress=False)``."""
        return dataclasses.replace(self, **changes)

    def repeats_or(self, default: int) -> int:
        """``repeats``, or the move's ``default`` when the plan leaves it to the move."""
        return default if self.repeats is None else self.repeats

    def higher_better(self) -> bool:
        """Whether more ``metric`` is better: ``higher_is_better``, else read from the metric's name."""
        if self.higher_is_better is not None:
            return self.higher_is_better
        higher = metric_direction(self.metric)
        if higher is None:
            raise ValueError(f"cannot tell whether more {self.metric!r} is better; pass "
                             "tk.Plan(higher_is_better=True or False)")
        return higher

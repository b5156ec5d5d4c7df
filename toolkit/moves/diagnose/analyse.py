"""Both sides' evidence -> every difference the diagnosis can see. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolkit.logs import MetricRow
from toolkit.moves.diagnose.difference import Difference, config_differences
from toolkit.moves.diagnose.environment import EnvRow, code_differences, env_differences
from toolkit.moves.diagnose.profile_gap import ProfileDigest, profile_differences
from toolkit.moves.diagnose.resolved import resolved_settings
from toolkit.moves.diagnose.series import (
    log_metric_differences,
    server_metric_differences,
    telemetry_differences,
)

__all__ = ["Side", "SideEvidence", "gather_differences", "resolved_values"]

Side = Literal["fast", "slow"]


@dataclass
class SideEvidence:
    """One side's evidence: start-up config lines, env rows, metric rows, release, commit, its runs."""

    config_lines: list[str] = field(default_factory=list)
    env_rows: list[EnvRow] = field(default_factory=list)
    env_note: str = ""
    log_rows: list[MetricRow] = field(default_factory=list)
    gpu_rows: list[MetricRow] = field(default_factory=list)
    server_rows: list[MetricRow] = field(default_factory=list)
    version: str | None = None
    commit: str | None = None
    launches: int = 0
    runs: list[tuple[Any, list[MetricRow]]] = field(default_factory=list)  # (BenchResult, its log metric rows)


def resolved_values(evidence: SideEvidence) -> dict[str, str]:
    """The side's resolved settings by name (the engine's own words)."""
    return {name: s.value for name, s in resolved_settings(evidence.config_lines).items()}


def gather_differences(fast: SideEvidence, slow: SideEvidence, *, profiles: Sequence[ProfileDigest] = (),
                       changed_files: Sequence[str] = ()) -> list[Difference]:
    """Every difference (and checked sameness) between the sides, of every kind the evidence allows.

    ``profiles``: both sides' digests when both were profiled; ``changed_files``: between the sides' commits.
    """
    settings = [{n: (s.value, s.line) for n, s in resolved_settings(side.config_lines).items()}
                for side in (fast, slow)]
    out = config_differences(settings[0], settings[1])
    if fast.env_rows or slow.env_rows:
        out += env_differences(fast.env_rows, slow.env_rows)
    out += log_metric_differences(fast.log_rows, slow.log_rows)
    if len(profiles) == 2:
        out += profile_differences(profiles[0], profiles[1])
    out += telemetry_differences(fast.gpu_rows, slow.gpu_rows)
    out += server_metric_differences(fast.server_rows, slow.server_rows)
    code = code_differences(fast.commit, slow.commit, changed_files)
    if not code[0].same and not any(d.kind in ("config", "env") and not d.same for d in out):
        # the code is all that differs: the same path that got slower got slower because of it
        out = [dataclasses.replace(d, topic="code") if d.kind == "profile" and d.topic == "other" else d for d in out]
    return out + code

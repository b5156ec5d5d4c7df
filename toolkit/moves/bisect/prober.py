"""Measure one commit on one host of a bisection: check out in the host's worktree, build, launch, benchmark, judge.

An ambiguous measurement gets more runs on the same server, up to ``max_repeats``, before it is judged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from toolkit.benchmark import BenchResult
from toolkit.errors import (
    AuthenticationFailed,
    ChangedHostKey,
    CommandFailed,
    HostUnreachable,
    InvalidFlag,
    JournalError,
    PortInUse,
    ToolkitError,
    UnknownHostKey,
)
from toolkit.host.host import Host
from toolkit.host.place import Target
from toolkit.host.shell import quote_path
from toolkit.journal import Journal, SourceRepo, StepRecorder
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.bisect.judgement import Judgement
from toolkit.moves.bisect.result import Probe, ProbeRole
from toolkit.moves.bisect.worktrees import spec_at_worktree
from toolkit.moves.fan_out import Lane
from toolkit.moves.trial import RunOutcome, TrialObserver, run_launch
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec

__all__ = ["Prober", "record_verdict", "BUILD_SKIP_EXIT", "FATAL_ERRORS"]

# Errors that say "this environment cannot run anything": they stop the bisection, not skip a commit.
FATAL_ERRORS = (PortInUse, InvalidFlag, CommandFailed, HostUnreachable, AuthenticationFailed, UnknownHostKey,
                ChangedHostKey, JournalError)
BUILD_SKIP_EXIT = 125  # as `git bisect run`: this commit cannot be built, skip it
_JOURNAL_VERDICT = {"bad": "confirmed", "good": "refuted", "skip": "inconclusive"}
_WHAT = {"good_ref": "good end", "bad_ref": "bad end", "probe": "probe", "recheck": "recheck"}

Judge = Callable[[list[float]], Judgement]


@dataclasses.dataclass
class Prober:
    """Measures commits: ``measure(lane, sha, ...)`` on the lane's host, in that host's worktree."""

    spec: ServerSpec
    repo_dir: str
    worktrees: list[GitCheckout]  # one per lane, in lane order
    metric: str
    repeats: int
    max_repeats: int
    build: str | None
    build_timeout_s: float | None
    bench_call: Callable[[Server], Any]
    journal: Journal | None
    timeout_s: float
    log_dir: str | None
    subjects: dict[str, str]
    order: dict[str, int]
    count: int = 0
    steps: dict[int, StepRecorder] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    launch_on: Target | None = None  # where servers run, when not on the lane's host (a Slurm job, a container)
    repo: SourceRepo | None = None  # the checkout the commits come from, for each step's reproduce block

    def measure(self, lane: Lane, sha: str, role: ProbeRole, round_no: int, judge: Judge | None,
                runs: int | None = None) -> Probe:
        """One commit; ``judge`` None for the reference ends (judged together later), ``runs`` to start with."""
        started = time.monotonic()
        subject = self.subjects.get(sha, "")
        worktree = self.worktrees[lane.index]
        spec = lane.spec(spec_at_worktree(self.spec, self.repo_dir, worktree.repo_dir, sha))
        samples: list[float] = []
        error: str | None = None
        lane.status(f"{_WHAT[role]} {sha[:8]}")

        def more(outcomes: list[RunOutcome]) -> int:
            if judge is None or len(samples) >= self.max_repeats or judge(samples).decided:
                return 0
            return min(self.repeats, self.max_repeats - len(samples))

        def on_run(outcome: RunOutcome) -> None:
            samples.append(_sample(outcome.result, self.metric))
            lane.advance(0, f"{sha[:8]}: {samples[-1]:.4g}")

        with self._step(self.launch_on or lane.host, sha, subject, role, spec) as step:
            try:
                with lane.guard():
                    worktree.switch(sha)
                    self._build(worktree.host, worktree, sha)
                    run_launch(self.launch_on or lane.host, spec, step=step, benches=runs or self.repeats,
                               bench_call=self.bench_call, timeout_s=self.timeout_s,
                               log_dir=lane.log_dir(self.log_dir), run_label=sha[:8],
                               observer=TrialObserver(on_server=lane.watch, on_run=on_run, more_runs=more))
            except FATAL_ERRORS:
                raise
            except ToolkitError as exc:  # ServerDied, ReadinessTimeout, no request completed, a build that says 125
                error = f"{type(exc).__name__}: {exc.message}" + (f" [{exc.evidence[-1].strip()}]" if exc.evidence else "")
            judgement = judge(samples) if judge is not None and error is None else None
            if judgement is not None and not judgement.decided:
                judgement = dataclasses.replace(judgement, reason=f"{judgement.reason}; {len(samples)} runs, the "
                                                f"budget (max_repeats={self.max_repeats}): the likelier side")
            with self._lock:
                number = self.count
                self.count += 1
            probe = Probe(
                number, self.order.get(sha, -1), sha, subject, role, tuple(samples),
                judgement.verdict if judgement is not None else "skip",
                judgement.reason if judgement is not None else (error or "reference: judged with its pair"),
                error, judgement, None if step is None else step.id, time.monotonic() - started, lane.host.name,
                round_no, judgement.confidence if judgement is not None else None,
            )
            lane.advance(1)
            if step is not None:
                with self._lock:
                    self.steps[probe.probe] = step
                if judge is not None or error is not None:
                    record_verdict(step, probe)
        return probe

    def _build(self, host: Host, worktree: GitCheckout, sha: str) -> None:
        build = self.build or self.spec.source_build()  # with_source: its per-commit build (a venv), if any
        if not build:
            return
        result = host.run(f"cd {quote_path(worktree.repo_dir)} && {build}", check=False,
                          timeout_s=self.build_timeout_s)
        if result.exit_code == BUILD_SKIP_EXIT:
            raise ToolkitError(f"the build of {sha[:12]} exited {BUILD_SKIP_EXIT}: it cannot be tested (skip)",
                               evidence=(result.stderr or result.stdout).splitlines()[-8:])
        if not result.ok:
            raise CommandFailed(
                f"the build command failed on {sha[:12]} in {worktree.repo_dir} on {host.name} "
                f"(exit {result.exit_code}); the bisection stopped", host=host.name, command=result.command,
                exit_code=result.exit_code, stderr=result.stderr or result.stdout,
                hint=f"fix the build, or make it exit {BUILD_SKIP_EXIT} for a commit that cannot be built "
                     "(it is then skipped, as with `git bisect run`)")

    @contextlib.contextmanager
    def _step(self, host: Target, sha: str, subject: str, role: ProbeRole,
              spec: ServerSpec) -> Iterator[StepRecorder | None]:
        if self.journal is None:
            yield None
            return
        hypothesis = {
            "good_ref": f"{self.metric} at the good end is the fast reference",
            "bad_ref": f"{self.metric} at the bad end is the slow reference",
            "probe": f"the regression is already in {sha[:8]}",
            "recheck": f"the regression is already in {sha[:8]} (measured again: its verdict contradicted another)",
        }[role]
        with self.journal.step("bisect_probe", f"{_WHAT[role]} {sha[:8]} {subject}"[:120], hypothesis=hypothesis,
                               spec=spec, host=host.name, repo=self.repo) as step:
            yield step


def record_verdict(step: StepRecorder, probe: Probe) -> None:
    """A probe's verdict in its journal step: a note with the numbers, and confirmed/refuted/inconclusive."""
    samples = ", ".join(f"{x:.4g}" for x in probe.samples) or "none"
    sure = f" (confidence {probe.confidence:.3g})" if probe.confidence is not None else ""
    step.note(f"{probe.verdict}{sure}: {probe.reason} (samples: {samples})")
    if probe.role in ("probe", "recheck"):
        step.set_verdict(_JOURNAL_VERDICT[probe.verdict], note=probe.reason)  # type: ignore[arg-type]
    else:
        expected = "good" if probe.role == "good_ref" else "bad"
        step.set_verdict("confirmed" if probe.verdict == expected else "refuted", note=probe.reason)
    if probe.error is not None:
        step.finish("failed", error=probe.error)


def _sample(result: BenchResult, metric: str) -> float:
    value = result.summary.get(metric)
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan

"""One launch of a sweep or an A/B test: launch, wait until ready, benchmark, record, stop.

What a later reader needs goes into the journal step as it happens: readiness, each run with the
server's metric lines over it, the decisive log lines (from the server's
:class:`~toolkit.logs.window.LogLedger`), the engine version. The server is stopped on every way out.
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toolkit.benchmark import BenchResult, Load
from toolkit.benchmark import bench as run_bench
from toolkit.errors import ReadinessTimeout, ServerDied, ToolkitError
from toolkit.host.place import Target
from toolkit.journal import StepRecorder
from toolkit.logs import MetricRow
from toolkit.server.http import engine_versions
from toolkit.server.launch import launch
from toolkit.server.logfile import count_lines
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec

__all__ = ["RunOutcome", "LaunchPhases", "RunObserver", "TrialObserver", "run_launch", "make_bench_call"]


class RunObserver(abc.ABC):
    """A plan's ``bench`` that also watches its runs (moves/observed.py); the trial hands it the step."""

    @abc.abstractmethod
    def __call__(self, server: Server) -> BenchResult: ...

    @abc.abstractmethod
    def record(self, step: StepRecorder, result: BenchResult, run_id: int | None) -> None: ...


@dataclass(frozen=True, eq=False)
class RunOutcome:
    """One benchmark run on one launch, as sweeps and A/B tests tabulate it."""

    result: Any  # a BenchResult, or whatever a plan's bench callable returned
    repeat: int
    launch: int
    server_pid: int
    time_to_ready_s: float | None
    step_id: int | None
    run_id: int | None
    metric_lines: int
    host: str = ""  # the name of the host the server ran on


@dataclass
class LaunchPhases:
    """Where one launch's time went, in seconds: what a sweep costs beyond its servers' start and benchmarks.

    ``log``: the log around each run and the liveness check; what the rest leaves of ``total``: bookkeeping.
    """

    host: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    total: float = 0.0

    PHASES = ("launch", "ready", "bench", "log", "journal", "stop")

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - started


@dataclass(frozen=True)
class TrialObserver:
    """What one launch reports as it goes, to the move that runs it; every hook is optional.

    ``on_server`` hears of the server, then of None once stopped (a pool stops it on Ctrl-C); ``more_runs``,
    asked after the last run, says how many more to run on it (a noisy measurement re-measured).
    """

    on_server: Callable[[Server | None], None] | None = None
    on_run: Callable[[RunOutcome], None] | None = None
    more_runs: Callable[[list[RunOutcome]], int] | None = None
    after_runs: Callable[[Server], None] | None = None
    on_phases: Callable[[LaunchPhases], None] | None = None


#: Held through each benchmark run of a plan with ``bench_alone=True``: such runs never overlap in this process.
_ALONE = threading.Lock()


def make_bench_call(bench: Load | Callable[[Server], BenchResult] | None, *,
                    progress: bool, alone: bool = False) -> Callable[[Server], BenchResult]:
    """``bench`` as a function of the server: :func:`toolkit.benchmark.bench` with a Load (None: ``Load()``), or itself.

    The log's metric lines go to bench as ``server_log`` (SGLang's ``accept len``); ``alone``: one at a time.
    """

    def call(server: Server) -> BenchResult:
        if callable(bench):
            return bench(server)
        ledger = server.ledger

        def log_rows(since: datetime, until: datetime) -> list[MetricRow]:
            return ledger.metric_rows(0, ledger.last_line)

        return run_bench(server, bench, progress=progress, server_log=log_rows)

    if not alone:
        return bench if callable(bench) else call

    def call_alone(server: Server) -> BenchResult:
        with _ALONE:
            return call(server)

    return call_alone


def _catch_up(server: Server) -> None:
    """Read the log to its current end, and close what the classifier still holds (a cut traceback)."""
    lines = count_lines(server.host, server.log_path)
    follower = server.follow()
    if lines is not None:
        follower.wait_for_lines(lines)
    follower.flush()


def _check_run(server: Server, result: BenchResult) -> None:
    """A run after which the server is gone, or in which no request completed, fails its combination."""
    where = server.where
    alive = server.is_alive()
    deadline = time.monotonic() + 1.0
    # Cut streams come a moment before the exit (SGLang kills its tree after the sigquit line):
    # a run with failed requests waits for the server to finish dying before it is judged alive.
    while alive and result.summary.get("failed") and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = server.is_alive()
    if not alive:
        _catch_up(server)
        fatal = server.ledger.fatal()
        evidence = [*fatal[-1].context[-8:], *(f"line {e.line_no}: {e.text.strip()}" for e in fatal[-3:])] \
            if fatal else server.log_tail(12)
        raise ServerDied(f"the server died during the benchmark: {where}", host=server.host.name, evidence=evidence,
                         hint=(fatal[-1].hint if fatal and fatal[-1].hint else
                               "read the quoted lines; the journal step holds the run up to the crash"))
    if not result.ok:
        raise ToolkitError(f"no request of the benchmark completed: {where}; first error: {result.first_error}",
                           evidence=[f"{count} x {error}" for error, count in list(result.errors.items())[:5]],
                           hint="check the plan's bench against the server (tk.Load(endpoint='chat'), ...), "
                                "or read its log")


def run_launch(host: Target, spec: ServerSpec, *, step: StepRecorder | None, benches: int,
               bench_call: Callable[[Server], BenchResult], timeout_s: float, log_dir: str | None = None,
               run_label: str | None = None, first_repeat: int = 0, launch_no: int = 0,
               observer: TrialObserver | None = None) -> list[RunOutcome]:
    """Launch ``spec``, wait until ready, run ``benches`` benchmarks, record them in ``step``, stop it."""
    seen = observer or TrialObserver()
    phases = LaunchPhases(host.name)
    started = time.monotonic()
    try:
        outcomes = _measure(host, spec, step, benches, bench_call, timeout_s, log_dir, run_label, first_repeat,
                            launch_no, seen, phases)
    finally:
        if seen.on_server is not None:
            seen.on_server(None)
    phases.total = time.monotonic() - started
    if seen.on_phases is not None:
        seen.on_phases(phases)
    return outcomes


def _measure(host: Target, spec: ServerSpec, step: StepRecorder | None, benches: int,
             bench_call: Callable[[Server], BenchResult], timeout_s: float, log_dir: str | None,
             run_label: str | None, first_repeat: int, launch_no: int, seen: TrialObserver,
             phases: LaunchPhases) -> list[RunOutcome]:
    outcomes: list[RunOutcome] = []
    timed = phases.timed
    with timed("launch"):
        server = launch(host, spec, log_dir=log_dir)
    try:  # what `with launch(...)` did, with the stop timed
        if step is not None and server.placement.kind != "host":  # a job id, nodes, a container: where it ran
            step.note(f"launch {launch_no + 1} ran in {server.placement.describe()}")
        try:
            if seen.on_server is not None:
                seen.on_server(server)
            with timed("ready"):
                report = server.wait_ready(timeout_s=timeout_s)
            if step is not None:
                with timed("journal"):
                    if launch_no == 0:
                        step.record_readiness(report)
                    else:
                        step.note(f"launch {launch_no + 1} on {host.name}: ready in {report.time_to_ready_s:.1f} s "
                                  f"({report.ready_reason})")
                    if versions := engine_versions(server.url, server.spec.engine):
                        step.set_versions(versions)
                    release = server.release()
                    step.set_versions(release.provenance())  # the release and how it was read
                    if problem := release.problem():
                        step.note(problem)
            planned, k = benches, 0
            while k < planned:
                with timed("log"):
                    before = count_lines(server.host, server.log_path) or 0
                with timed("bench"):
                    result = bench_call(server)
                with timed("log"):
                    after = count_lines(server.host, server.log_path) or 0
                    server.follow().wait_for_lines(after)
                    rows = server.ledger.metric_rows(before, after, result.started_at)
                run_id = None
                if step is not None:
                    with timed("journal"):
                        run_id = step.record_bench(result, run_label=run_label, repeat=first_repeat + k,
                                                   host=host.name)
                        if rows:
                            step.record_metrics(rows, run_id=run_id)
                        if isinstance(bench_call, RunObserver):
                            bench_call.record(step, result, run_id)
                outcome = RunOutcome(result, first_repeat + k, launch_no, server.pid, report.time_to_ready_s,
                                     None if step is None else step.id, run_id, len(rows), host.name)
                outcomes.append(outcome)
                if seen.on_run is not None:
                    seen.on_run(outcome)
                with timed("log"):
                    _check_run(server, result)
                k += 1
                if k == planned and seen.more_runs is not None:
                    planned += max(seen.more_runs(outcomes), 0)
            if seen.after_runs is not None:
                seen.after_runs(server)
        except BaseException as exc:
            if step is not None:
                try:  # never hide the launch's own error behind a journal write
                    if isinstance(exc, ServerDied | ReadinessTimeout) and exc.report is not None:
                        step.record_readiness(exc.report)
                    if isinstance(exc, Exception):  # the fatal lines may still be on their way: read to the end
                        _catch_up(server)
                    step.record_log_lines(server.ledger.decisive())
                except Exception as journal_exc:
                    exc.add_note(f"the journal could not store this launch's log lines: {journal_exc}")
            raise
        if step is not None:
            with timed("journal"):
                step.record_log_lines(server.ledger.decisive())
    finally:
        with timed("stop"):
            server.stop()
    return outcomes

"""One launch of a sweep or an A/B test: launch, wait until ready, benchmark, record, stop.

Everything a later reader needs goes into the journal step as it happens: the readiness
report (a failed one too), one run per benchmark with the server's metric lines over that
run, the decisive log lines (benign error-looking lines and fatal ones), the engine
version. The server is stopped on every way out, because ``with launch(...)`` owns it.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from toolkit.errors import ServerDied, ToolkitError
from toolkit.host.shell import quote_path
from toolkit.logs import LogEvent, MetricRow, Verdict
from toolkit.server.launch import Server, launch
from toolkit.server.spec import ServerSpec

if TYPE_CHECKING:
    from toolkit.benchmark import BenchResult
    from toolkit.host.host import Host

__all__ = ["RunOutcome", "run_launch", "make_bench_call", "metric_window", "decisive_lines", "server_versions"]


@dataclass(frozen=True, eq=False)
class RunOutcome:
    """One benchmark run on one launch, as sweeps and A/B tests tabulate it."""

    result: Any  # a BenchResult, or whatever a bench= callable returned
    repeat: int
    launch: int
    server_pid: int
    time_to_ready_s: float | None
    step_id: int | None
    run_id: int | None
    metric_lines: int


def make_bench_call(
    bench: Mapping[str, Any] | Callable[[Server], BenchResult] | None, *, progress: bool
) -> Callable[[Server], BenchResult]:
    """``bench=`` as a function of the server: :func:`toolkit.benchmark.bench` keyword arguments, or a callable.

    The server's log follower goes to bench as ``server_log``, so the run's server view
    includes the log's metric lines (SGLang's ``accept len`` among them).
    """
    if callable(bench):
        return bench
    kwargs = dict(bench or {})
    if kwargs.get("repeats", 1) != 1:
        raise ValueError("pass repeats= to sweep()/compare(), not inside bench=...: each repeat is its own "
                         "recorded run")
    kwargs.setdefault("progress", progress)

    def call(server: Server) -> BenchResult:
        from toolkit.benchmark import bench as run_bench

        follower = server.follow()

        def log_rows(since: datetime, until: datetime) -> list[MetricRow]:
            return [e.metric for e in follower.events() if e.metric is not None]

        return run_bench(server, **{"server_log": log_rows, **kwargs})

    return call


def metric_window(events: Iterable[LogEvent], after_line: int, upto_line: int,
                  since: float | None = None) -> list[MetricRow]:
    """Metric rows of log lines ``after_line < line_no <= upto_line``, stamped at ``since`` (epoch s) or later.

    Line numbers bound a run exactly whatever the host's clock says; the stamps (whole
    seconds in SGLang logs: 1 s of slack) then drop the benchmark's warm-up. If they drop
    every row (a host clock far from ours), the line window alone is kept.
    """
    rows = [e.metric for e in events if e.metric is not None and after_line < e.line_no <= upto_line]
    if since is None:
        return rows
    start = datetime.fromtimestamp(since) - timedelta(seconds=1)

    def local(ts: datetime) -> datetime:
        return ts.astimezone().replace(tzinfo=None) if ts.tzinfo is not None else ts

    kept = [r for r in rows if r.timestamp is None or local(r.timestamp) >= start]
    return kept if kept or not rows else rows


def decisive_lines(events: Sequence[LogEvent], *, benign_limit: int = 100, fatal_limit: int = 20) -> list[LogEvent]:
    """What a reader of the step must see: error-looking lines judged benign, and the fatal ones."""
    benign = [e for e in events if e.verdict is Verdict.BENIGN][:benign_limit]
    fatal = [e for e in events if e.verdict is Verdict.FATAL][-fatal_limit:]
    return sorted(benign + fatal, key=lambda e: e.line_no)


def server_versions(server: Server, *, timeout_s: float = 2.0) -> dict[str, str]:
    """The engine version the server reports (SGLang ``/get_server_info``, vLLM ``/version``); {} if unknown."""
    engine = server.spec.engine
    path = {"sglang": "/get_server_info", "vllm": "/version"}.get(engine)
    if path is None:
        return {}
    try:
        with urllib.request.urlopen(server.url + path, timeout=timeout_s) as response:  # noqa: S310 (http only)
            data = json.loads(response.read(1 << 20))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    versions = {engine: str(data["version"])} if data.get("version") else {}
    if data.get("simulator"):
        versions["simulator"] = str(data["simulator"])
    return versions


def _log_line_count(server: Server) -> int:
    out = server.host.run(f"wc -l < {quote_path(server.log_path)}", check=False).stdout.strip()
    return int(out) if out.isdigit() else 0


def _catch_up(server: Server, lines: int, timeout_s: float = 3.0) -> None:
    """Wait until the follower has read ``lines`` lines of the log (it trails the file by milliseconds)."""
    follower = server.follow()
    deadline = time.monotonic() + timeout_s
    while follower.stats.lines < lines and time.monotonic() < deadline and not follower.finished.is_set():
        time.sleep(0.02)


def _check_run(server: Server, result: Any) -> None:
    """A run after which the server is gone, or in which no request completed, fails its combination."""
    where = f"{server.spec.describe()} on {server.host.name} (pid {server.pid}, log {server.log_path})"
    alive = server.is_alive()
    deadline = time.monotonic() + 1.0
    # Cut streams come a moment before the exit (SGLang kills its tree after the sigquit line):
    # a run with failed requests waits for the server to finish dying before it is judged alive.
    while alive and dict(getattr(result, "summary", {}) or {}).get("failed") and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = server.is_alive()
    if not alive:
        _catch_up(server, _log_line_count(server))
        server.follow().flush()
        fatal = [e for e in server.follow().events() if e.verdict is Verdict.FATAL]
        evidence = [*fatal[-1].context[-8:], *(f"line {e.line_no}: {e.text.strip()}" for e in fatal[-3:])] \
            if fatal else server.log_tail(12)
        raise ServerDied(f"the server died during the benchmark: {where}", host=server.host.name, evidence=evidence,
                         hint=(fatal[-1].hint if fatal and fatal[-1].hint else
                               "read the quoted lines; the journal step holds the run up to the crash"))
    if not getattr(result, "ok", True):
        errors = dict(getattr(result, "errors", {}) or {})
        raise ToolkitError(f"no request of the benchmark completed: {where}; first error: "
                           f"{getattr(result, 'first_error', None)}",
                           evidence=[f"{count} x {error}" for error, count in list(errors.items())[:5]],
                           hint="check bench= against the server (model=..., endpoint='chat'), or read its log")


def run_launch(
    host: Host,
    spec: ServerSpec,
    *,
    step: Any,
    benches: int,
    bench_call: Callable[[Server], BenchResult],
    timeout_s: float,
    log_dir: str | None = None,
    run_label: str | None = None,
    first_repeat: int = 0,
    launch_no: int = 0,
    on_run: Callable[[RunOutcome], None] | None = None,
) -> list[RunOutcome]:
    """Launch ``spec``, wait until ready, run ``benches`` benchmarks, record them in ``step``, stop the server.

    ``step`` is a journal StepRecorder or None. Each run is recorded with the server's metric
    lines over that run; the decisive log lines are recorded however the launch ends, and a
    failed start-up's readiness report too. The server stops on every exit (``with launch``).
    """
    outcomes: list[RunOutcome] = []
    with launch(host, spec, log_dir=log_dir) as server:
        try:
            report = server.wait_ready(timeout_s=timeout_s)
            if step is not None:
                if launch_no == 0:
                    step.record_readiness(report)
                else:
                    step.note(f"launch {launch_no + 1}: ready in {report.time_to_ready_s:.1f} s ({report.ready_reason})")
                if versions := server_versions(server):
                    step.set_versions(versions)
            for k in range(benches):
                before = _log_line_count(server)
                result = bench_call(server)
                after = _log_line_count(server)
                _catch_up(server, after)
                rows = metric_window(server.follow().events(), before, after, getattr(result, "started_at", None))
                run_id = None
                if step is not None:
                    run_id = step.record_bench(result, run_label=run_label, repeat=first_repeat + k)
                    if rows:
                        step.record_metrics(rows, run_id=run_id)
                outcome = RunOutcome(result, first_repeat + k, launch_no, server.pid, report.time_to_ready_s,
                                     getattr(step, "id", None), run_id, len(rows))
                outcomes.append(outcome)
                if on_run is not None:
                    on_run(outcome)
                _check_run(server, result)
        except BaseException as exc:
            if step is not None:
                try:  # never hide the launch's own error behind a journal write
                    failed_report = getattr(exc, "report", None)
                    if failed_report is not None:
                        step.record_readiness(failed_report)
                    if isinstance(exc, Exception):  # the fatal lines may still be on their way: read to the end
                        _catch_up(server, _log_line_count(server))
                        server.follow().flush()
                    step.record_log_lines(decisive_lines(server.follow().events()))
                except Exception as journal_exc:
                    exc.add_note(f"the journal could not store this launch's log lines: {journal_exc}")
            raise
        if step is not None:
            step.record_log_lines(decisive_lines(server.follow().events()))
    return outcomes

"""`wait_ready`: watch three signals at once and feed them to the server's one state.

The seed polled `/v1/models` every 15 s, grepped the log every 75 s, and took a benign TP5 import
line for a failure. Here: the log (a fatal line is known within milliseconds), an HTTP prober that
asks what the release answers and backs off (`health`), and the process tree, so a server killed
without a word (OOM killer, `kill -9`) is known dead.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolkit.errors import ExtensionMismatch, ReadinessTimeout, ServerDied
from toolkit.server.follow import LogFollower
from toolkit.server.health import ProbeOutcome, ProbeSchedule, RepeatedErrors
from toolkit.server.hints import release_hint
from toolkit.server.readiness import ReadinessReport, ReadinessState
from toolkit.server.source import mismatch_in_log
from toolkit.server.state import FAILURE_ERRORS, ServerState, ServerStatus

__all__ = ["StartupWatch", "wait_ready"]

_FAST_PHASES = frozenset({"http_up", "warmup", "ready"})
# A server that answers "still loading" in words does so for minutes (llama.cpp: 503 "Loading model"):
# such answers are waits, however often they repeat.
_LOADING_WORDS = re.compile(r"load|start|warm|not ready|initiali", re.IGNORECASE)
# After the exit, read the log to its end before deciding (a loaded machine delays the follower by seconds):
# wait while it makes progress, up to _EXIT_QUIET_S without any and _EXIT_CATCH_UP_S in all.
_EXIT_QUIET_S = 2.0
_EXIT_CATCH_UP_S = 20.0


@dataclass(frozen=True)
class StartupWatch:
    """What a wait needs of a server: its state and follower, and how to probe, check and count it."""

    state: ServerState
    follower: LogFollower
    probe: Callable[[float], ProbeOutcome]  # timeout_s -> one probe
    is_alive: Callable[[], bool]
    count_log_lines: Callable[[], int | None]
    where: str  # "sim EAGLE3 on localhost (pid 4242, log /tmp/...)", for the error
    host_name: str
    from_source: bool = False  # the server runs a checkout (with_source): vLLM's _C warning is then a mismatch


class _Watchers:
    """The prober and liveness threads of one wait; both joined before wait_ready returns."""

    def __init__(self, watch: StartupWatch, *, probe_interval_s: float, fast_probe_interval_s: float,
                 probe_timeout_s: float, alive_interval_s: float) -> None:
        self.watch = watch
        self.done = threading.Event()
        self.fast = threading.Event()
        self.ready_said = threading.Event()
        self.wake = threading.Event()
        self.exited_at: float | None = None
        self.intervals = (probe_interval_s, fast_probe_interval_s)
        self.probe_timeout_s = probe_timeout_s
        self.alive_interval_s = alive_interval_s
        self.threads = [threading.Thread(target=self._probe_loop, name="wait_ready:probe", daemon=True),
                        threading.Thread(target=self._alive_loop, name="wait_ready:alive", daemon=True)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.done.set()
        self.wake.set()
        for thread in self.threads:
            thread.join(timeout=self.probe_timeout_s + 1)

    def on_status(self, status: ServerStatus) -> None:
        """The log says HTTP is up: probe now and often; it says ready: probe now, with a new back-off."""
        if not self.fast.is_set() and (status.log_says_ready or (status.phase or "") in _FAST_PHASES):
            self.fast.set()
            self.wake.set()
        if status.log_says_ready and not self.ready_said.is_set():
            self.ready_said.set()
            self.wake.set()

    def _probe_loop(self) -> None:
        schedule = ProbeSchedule(loading_s=self.intervals[0], fast_s=self.intervals[1])
        repeated = RepeatedErrors()
        failures, was_fast = 0, (False, False)
        state = self.watch.state
        while not self.done.is_set():
            outcome = self.watch.probe(self.probe_timeout_s)
            if self.done.is_set():
                return
            now = time.time()
            if outcome.verdict == "dead":
                state.probe_failed(message=f"the server answered that it is dead: {outcome.detail}",
                                   evidence=outcome.evidence, hint=outcome.hint, at=now)
            else:
                state.probe(ok=outcome.ok, detail=outcome.detail, proves_generation=outcome.proves_generation, at=now)
                again = None if _LOADING_WORDS.search(outcome.body) else repeated.see(
                    " ".join(outcome.detail.split()[:2]), outcome.status, outcome.body, at=now)
                if again is not None and not state.status().readiness.ready:
                    state.probe_failed(message=f"the server gives the same error answer to every probe: {again}",
                                       evidence=(again,), hint=_repeat_hint(outcome.status), at=now)
            if state.status().readiness.ready:
                # Proven: no further probe. A ready line read meanwhile sets `wake`, and another probe of
                # SGLang's /health_generate sleeps 1 s (0.5.23 http_server.py:780) that wait_ready would wait.
                return
            fast = (self.fast.is_set(), self.ready_said.is_set())
            failures = 0 if fast != was_fast else failures + (0 if outcome.proves_generation else 1)
            was_fast = fast
            self.wake.wait(schedule.interval(elapsed_s=now - state.started_at, failures=failures, fast=fast[0]))
            self.wake.clear()

    def _alive_loop(self) -> None:
        while not self.done.wait(self.alive_interval_s):
            try:
                alive = self.watch.is_alive()
            except Exception:  # noqa: BLE001 - a lost SSH channel is not a dead server; the next check says
                continue
            if not alive:
                self.exited_at = time.time()
                return


def _repeat_hint(status: int) -> str:
    if status in (401, 403):
        return ("the server wants an API key the probe does not send: put it in the spec "
                "(with_flags({'--api-key': KEY}), or VLLM_API_KEY in with_env) so that probes and bench() send it")
    return "the server cannot serve: read the quoted answer and the last log lines, fix the cause, launch again"


def _last_word(watch: StartupWatch, report: ReadinessReport, alive: bool, timeout_s: float) -> tuple[str, ...]:
    """What a server that failed in its log but still serves HTTP says now (transformers' unhealthy JSON)."""
    failure = report.failure
    if not alive or failure is None or failure.kind != "fatal":
        return ()
    outcome = watch.probe(min(timeout_s, 2.0))
    if outcome.verdict == "dead":
        return (f"the server answers: {outcome.detail}", *outcome.evidence[1:])
    return (f"the server answers: {outcome.detail}",) if outcome.body.strip() and not outcome.ok else ()


def _error_for(report: ReadinessReport, watch: StartupWatch,
               said: tuple[str, ...] = ()) -> ServerDied | ReadinessTimeout:
    failure = report.failure
    if failure is None:  # FAILED and HUNG always carry one; say so rather than assert
        return ServerDied(f"the server failed without a recorded cause [{watch.where}]", host=watch.host_name,
                          report=report)
    message = f"{failure.message} [{watch.where}]"
    kind = FAILURE_ERRORS[failure.kind]
    evidence = (*failure.evidence(), *said)
    mismatch = mismatch_in_log(evidence, watch.from_source) if kind is ServerDied else None
    hint = release_hint(failure.hint, *watch.state.release)
    if mismatch is not None:  # the engine itself says its compiled parts do not fit the code
        kind = ExtensionMismatch
        message = f"the engine's compiled extension does not match its code: {mismatch.strip()} [{watch.where}]"
        hint = "install the kernel (or build) this commit needs; a bisection skips such a commit"
    return kind(message, host=watch.host_name, evidence=evidence, hint=hint, report=report)


def wait_ready(watch: StartupWatch, *, timeout_s: float = 900.0, hang_after_s: float = 300.0,
               probe_interval_s: float = 1.0, fast_probe_interval_s: float = 0.25,
               probe_timeout_s: float = 5.0, alive_interval_s: float = 0.25) -> ReadinessReport:
    """Block until the server is proven ready; raise the error that explains why it never will be.

    Called as ``server.wait_ready(...)``, which builds the watch:

    >>> server = tk.launch(tk.Host.local(), tk.ServerSpec.simulator(tp=8, port=30000))  # doctest: +SKIP
    >>> report = server.wait_ready(timeout_s=120)                                       # doctest: +SKIP
    >>> report.time_to_ready_s, [e.rule for e in report.benign]                         # doctest: +SKIP
    (3.2, ['sglang_ignore_import_error'])

    Raises :class:`~toolkit.errors.ServerDied` (a fatal line quoted with its rank and traceback, or the
    process gone), :class:`~toolkit.errors.ReadinessTimeout` or :class:`~toolkit.errors.ServerHung`.
    The server keeps running either way: stop it, or use `with launch(...)`.
    """
    state = watch.state
    watchers = _Watchers(watch, probe_interval_s=probe_interval_s, fast_probe_interval_s=fast_probe_interval_s,
                         probe_timeout_s=probe_timeout_s, alive_interval_s=alive_interval_s)
    changed = threading.Event()
    waiter = threading.current_thread()

    def on_change(status: ServerStatus) -> None:
        watchers.on_status(status)
        # This loop's own state.tick() notifies too: waking on it made the loop spin (a whole core
        # for the seconds a start-up takes, three on three hosts); only other threads' news wakes it.
        if threading.current_thread() is not waiter:
            changed.set()

    unsubscribe = state.subscribe(on_change)
    watchers.on_status(state.status())
    watchers.start()
    lines_at_exit: int | None = None
    exit_decided = False
    progress = (-1, 0.0)  # (lines the follower had read, when that count last changed)
    try:
        while True:
            changed.wait(0.05)
            changed.clear()
            now = time.time()
            # The process is gone; the traceback that explains it is usually its last output and may not have
            # reached us yet: count the file's lines once, and decide once the follower has read that many.
            exited_at = watchers.exited_at
            if exited_at is not None and not exit_decided:
                if lines_at_exit is None:
                    counted = watch.count_log_lines()
                    lines_at_exit = (1 << 62) if counted is None else counted
                read = watch.follower.stats.lines
                if read != progress[0]:
                    progress = (read, now)
                if (read >= lines_at_exit or now - max(progress[1], exited_at) >= _EXIT_QUIET_S
                        or now - exited_at >= _EXIT_CATCH_UP_S):
                    watch.follower.flush(server_died=True)  # what the log ends with is read as its last words
                    state.process_exited(None, now)
                    exit_decided = True
            status = state.tick(now, timeout_s=timeout_s, hang_after_s=hang_after_s)
            report = status.readiness
            if report.state is ReadinessState.READY:
                return report
            if report.state is ReadinessState.HUNG or (report.state is ReadinessState.FAILED and state.settled):
                alive = watchers.exited_at is None
                raise _error_for(report, watch, _last_word(watch, report, alive, probe_timeout_s))
            if status.stop_requested_at is not None:
                raise ServerDied(f"the server was stopped while waiting for it to be ready [{watch.where}]",
                                 host=watch.host_name, report=report,
                                 hint="something stopped it (a Stop button, another thread); launch it again")
    finally:
        watchers.stop()
        unsubscribe()


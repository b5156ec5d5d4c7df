"""The one state of a launched server: its readiness tracker, how it ended, and who watches it.

Views, the journal and errors read one immutable `ServerStatus`. Lines written after a stop are
shutdown noise (SGLang's `Child process unexpectedly failed with an exit code 15` for our SIGTERM);
a server that failed before the stop ends failed.

>>> state = ServerState(started_at=0.0)
>>> state.probe(ok=True, detail="GET /health_generate 200", proves_generation=True, at=2.5).lifecycle
'ready'
>>> state.stop_requested(at=10.0).lifecycle
'stopping'
>>> state.stopped(sigkill_sent=False, at=11.0).note
'clean exit (stopped by the toolkit after 10.0 s)'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from toolkit.errors import ReadinessTimeout, ServerDied, ServerHung
from toolkit.logs import LogEvent, Verdict
from toolkit.server.hints import release_hint
from toolkit.server.readiness import Failure, ReadinessReport, ReadinessState, ReadinessTracker

__all__ = ["Lifecycle", "ServerStatus", "ServerState", "ErrorSummary"]

Lifecycle = Literal["starting", "ready", "failed", "stopping", "stopped"]

# Failure.kind -> the error wait_ready raises for it, named on the badge.
FAILURE_ERRORS: dict[str, type[ServerDied] | type[ReadinessTimeout]] = {
    "fatal": ServerDied, "died": ServerDied, "timeout": ReadinessTimeout, "hung": ServerHung}


@dataclass(frozen=True)
class ErrorSummary:
    """A failure as a person reads it: the error's kind, message, the quoted lines and what to do."""

    kind: str | None
    message: str
    evidence: tuple[str, ...]
    hint: str | None

    @classmethod
    def of_failure(cls, failure: Failure, engine: str | None = None, version: str | None = None) -> ErrorSummary:
        """The failure as shown; its hint spelled with the flags of ``engine`` ``version`` when known."""
        return cls(FAILURE_ERRORS[failure.kind].__name__, failure.message, failure.evidence(),
                   release_hint(failure.hint, engine, version))


@dataclass(frozen=True)
class ServerStatus:
    """The server at one instant: what every view draws and what the journal records."""

    lifecycle: Lifecycle
    started_at: float
    at: float
    phase: str | None
    readiness: ReadinessReport
    error: ErrorSummary | None
    note: str | None
    log_says_ready: bool
    stop_requested_at: float | None
    stopped_at: float | None
    #: completions `wait_ready` sent as probes (their access lines are the toolkit's, whenever they are read)
    completion_probes: int = 0

    @property
    def elapsed_s(self) -> float:
        """Seconds from launch to now, to readiness, or to the end."""
        if self.lifecycle == "ready" and self.readiness.time_to_ready_s is not None:
            return self.readiness.time_to_ready_s
        end = self.stopped_at if self.stopped_at is not None else self.at
        if self.lifecycle == "failed" and self.readiness.failure is not None:
            end = min(end, self.readiness.failure.at)
        return max(0.0, end - self.started_at)


Listener = Callable[[ServerStatus], None]


class ServerState:
    """Thread-safe: the follower's reader thread, `wait_ready` and a Stop button all feed it."""

    def __init__(self, *, started_at: float, hang_after_s: float = 300.0) -> None:
        self._lock = threading.RLock()
        self._tracker = ReadinessTracker(started_at=started_at, hang_after_s=hang_after_s, timeout_s=None)
        self.started_at = started_at
        self._now = started_at
        self._phase: str | None = None
        self._log_says_ready = False
        self._error: ErrorSummary | None = None
        self._stop_requested_at: float | None = None
        self._stopped_at: float | None = None
        self._stop_note: str | None = None
        self._failed_before_stop = False
        self._listeners: list[Listener] = []
        self._release: tuple[str | None, str | None] = (None, None)
        self._release_note: str | None = None
        self._completion_probes = 0

    def use_release(self, engine: str | None, version: str | None, problem: str | None = None) -> None:
        """The release the server runs (hints use its flags); ``problem``: why it was not read, as a note."""
        with self._lock:
            self._release = (engine, version)
            self._release_note = problem

    @property
    def release(self) -> tuple[str | None, str | None]:
        with self._lock:
            return self._release

    def observe(self, events: Iterable[LogEvent], at: float) -> ServerStatus:
        """Classified log lines (from the server's follower)."""
        with self._lock:
            self._now = max(self._now, at)
            if self._stop_requested_at is None:
                for event in events:
                    self._tracker.observe(event, at)
                    if event.phase is not None and self._tracker.state is ReadinessState.STARTING:
                        self._phase = event.phase.value
                    if event.verdict is Verdict.READY:
                        self._log_says_ready = True
        return self._changed()

    def probe(self, *, ok: bool, detail: str, proves_generation: bool, at: float) -> ServerStatus:
        """One HTTP probe's outcome (from `wait_ready`)."""
        with self._lock:
            self._now = max(self._now, at)
            if detail.startswith("POST /v1/"):  # a one-token completion (server/http._one_token)
                self._completion_probes += 1
            self._tracker.probe(ok, detail, proves_generation, at=at)
        return self._changed()

    def probe_failed(self, *, message: str, evidence: tuple[str, ...], hint: str | None, at: float) -> ServerStatus:
        """A probe's answer says the server will not become ready: every view shows it, not only the error."""
        with self._lock:
            self._now = max(self._now, at)
            if self._stop_requested_at is None:
                self._tracker.probe_failed(message, evidence, hint, at=at)
        return self._changed()

    def process_exited(self, code: int | None, at: float) -> ServerStatus:
        """The process is gone. After a stop we asked for, that is the expected end, not a death."""
        with self._lock:
            self._now = max(self._now, at)
            if self._stop_requested_at is None:
                self._tracker.process_exited(code, at)
        return self._changed()

    def tick(self, now: float, *, timeout_s: float | None = None, hang_after_s: float | None = None) -> ServerStatus:
        """Let time pass; `wait_ready` passes its own limits (seconds from launch)."""
        with self._lock:
            self._now = max(self._now, now)
            if self._stop_requested_at is None:
                self._tracker.limits(timeout_s=timeout_s, hang_after_s=hang_after_s)
                self._tracker.tick(now)
        return self._changed()

    def record_error(self, error: ErrorSummary, at: float) -> ServerStatus:
        """An error raised about this server elsewhere (a benchmark that found it dead, say)."""
        with self._lock:
            self._now = max(self._now, at)
            if self._error is None and self._stop_requested_at is None:
                self._error = error
        return self._changed()

    def stop_requested(self, at: float) -> ServerStatus:
        """The toolkit is stopping the server: from now on its log lines are shutdown noise."""
        with self._lock:
            if self._stop_requested_at is None:
                self._stop_requested_at = at
                self._failed_before_stop = self._failed()
            self._now = max(self._now, at)
        return self._changed()

    def stopped(self, *, sigkill_sent: bool, at: float, already_stopped: bool = False) -> ServerStatus:
        """The stop finished and nothing of the server survived."""
        with self._lock:
            if self._stopped_at is None:
                self.stop_requested(at)
                self._stopped_at = at
                ran = (self._stop_requested_at or at) - self.started_at
                if already_stopped and not self._failed_before_stop:
                    self._stop_note = "the process had already exited"
                elif sigkill_sent:
                    self._stop_note = f"stopped by the toolkit after {ran:.1f} s; SIGKILL was needed"
                elif self._failed_before_stop:  # not "clean exit": it failed, and the error says why (issue 28)
                    self._stop_note = f"what was left was stopped by the toolkit after {ran:.1f} s"
                else:
                    self._stop_note = f"clean exit (stopped by the toolkit after {ran:.1f} s)"
            self._now = max(self._now, at)
        return self._changed()

    @property
    def tracker(self) -> ReadinessTracker:
        return self._tracker

    @property
    def settled(self) -> bool:
        with self._lock:
            return self._tracker.settled

    def readiness(self) -> ReadinessReport:
        with self._lock:
            return self._tracker.report()

    def status(self) -> ServerStatus:
        with self._lock:
            report = self._tracker.report()
            failed = self._failed_before_stop if self._stop_requested_at is not None else self._failed()
            error = self._error
            if report.failure is not None and report.state in (ReadinessState.FAILED, ReadinessState.HUNG):
                error = ErrorSummary.of_failure(report.failure, *self._release)
            lifecycle: Lifecycle = (
                "failed" if failed else "stopped" if self._stopped_at is not None
                else "stopping" if self._stop_requested_at is not None
                else "ready" if report.ready else "starting")
            note = self._stop_note
            if note is None and lifecycle == "ready" and report.benign:
                note = f"{len(report.benign)} benign error lines ignored"
            if note is None and lifecycle == "starting" and self._log_says_ready:
                note = "the log says ready; wait_ready() proves it with a probe"
            note = note or self._release_note  # e.g. "the vllm release on this host could not be read ..."
            phase = report.phases[-1].phase if lifecycle == "ready" and report.phases else self._phase
            return ServerStatus(
                lifecycle=lifecycle, started_at=self.started_at, at=self._now, phase=phase, readiness=report,
                error=error if lifecycle == "failed" else None, note=note, log_says_ready=self._log_says_ready,
                stop_requested_at=self._stop_requested_at, stopped_at=self._stopped_at,
                completion_probes=self._completion_probes)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(status)` after every change (on the thread that changed it); returns unsubscribe."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _failed(self) -> bool:
        return self._tracker.state in (ReadinessState.FAILED, ReadinessState.HUNG) or self._error is not None

    def _changed(self) -> ServerStatus:
        status = self.status()
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(status)
        return status

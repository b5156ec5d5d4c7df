"""Is the server ready, failed, or hung? A pure state machine (the I/O driver is toolkit.server.wait).

READY needs proven generation: a probe that generated (``/health_generate``, a one-token
completion), or the engine's ready line (or, for a log joined mid-run, its serving lines) *and*
a passing probe. ``/v1/models`` alone is no proof: SGLang answers it from the tokenizer before
warm-up has gone through the scheduler, and a server can still die in CUDA-graph capture.
FAILED: a fatal line, the process exit, or the timeout; a *notice* (``Received sigquit``) is
refined by the rank's exception that follows. HUNG: no output for ``hang_after_s``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Literal

from toolkit.logs.classify import LogEvent
from toolkit.logs.packs import Hints
from toolkit.logs.rules import Verdict

__all__ = ["ReadinessState", "ProbeResult", "PhaseMark", "Failure", "ReadinessReport", "ReadinessTracker"]

FailureKind = Literal["died", "fatal", "timeout", "hung"]


class ReadinessState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    HUNG = "hung"


@dataclass(frozen=True)
class ProbeResult:
    """One HTTP probe: did it pass, what it said, did it prove generation, when."""

    ok: bool
    detail: str
    proves_generation: bool
    at: float


@dataclass(frozen=True)
class PhaseMark:
    phase: str
    at: float
    line_no: int | None


@dataclass(frozen=True)
class Failure:
    """Why the start failed, with the evidence and what to try (``kind``: see state.FAILURE_ERRORS)."""

    kind: FailureKind
    message: str
    at: float
    decisive: LogEvent | None
    rank: str | None
    context: tuple[str, ...]
    hint: str | None
    exit_code: int | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-safe form (for the journal and reports)."""
        return {
            "kind": self.kind, "message": self.message, "at": self.at, "rank": self.rank, "hint": self.hint,
            "exit_code": self.exit_code, "context": list(self.context),
            "decisive": self.decisive.to_dict() if self.decisive is not None else None}

    def evidence(self) -> tuple[str, ...]:
        """The lines an error should quote: the traceback context, then the decisive line."""
        lines = list(self.context[-12:])
        if self.decisive is not None:
            where = f"line {self.decisive.line_no}" + (f" [{self.rank}]" if self.rank else "")
            lines.append(f"{where}: {self.decisive.text.strip()}")
        return tuple(lines)


@dataclass(frozen=True)
class ReadinessReport:
    ready: bool
    state: ReadinessState
    started_at: float
    time_to_ready_s: float | None
    phases: tuple[PhaseMark, ...]
    benign: tuple[LogEvent, ...]
    warnings: int
    last_lines: tuple[str, ...]
    failure: Failure | None
    ready_reason: str | None
    probes: int
    #: what proved readiness in the log: None (the ready line, or a probe), or "serving lines"
    ready_evidence: str | None = None
    #: the engine's line that made it ready (or the first serving line of a log joined mid-run); None: a probe did
    ready_line: LogEvent | None = None

    @property
    def phase_names(self) -> tuple[str, ...]:
        return tuple(p.phase for p in self.phases)

    def to_dict(self) -> dict[str, object]:
        """JSON-safe form: what the journal stores for a start-up."""
        return {
            "ready": self.ready, "state": self.state.value, "started_at": self.started_at,
            "time_to_ready_s": self.time_to_ready_s, "ready_reason": self.ready_reason, "probes": self.probes,
            "phases": [{"phase": p.phase, "at": p.at, "line_no": p.line_no} for p in self.phases],
            "benign": [{"line_no": e.line_no, "rule": e.rule, "rank": e.rank, "text": e.text} for e in self.benign],
            "warnings": self.warnings, "last_lines": list(self.last_lines),
            "failure": self.failure.to_dict() if self.failure is not None else None,
            "ready_evidence": self.ready_evidence,
            "ready_line": None if self.ready_line is None else {"line_no": self.ready_line.line_no,
                                                                "raw": self.ready_line.raw.rstrip("\n")}}


_TERMINAL = (ReadinessState.READY, ReadinessState.FAILED)


class ReadinessTracker:
    """Decide readiness from log events, probes, process exit and time (no I/O).

    >>> t = ReadinessTracker(started_at=0.0)
    >>> t.probe(True, "GET /v1/models 200", proves_generation=False, at=1.0).value
    'starting'
    >>> t.probe(True, "POST /generate 200", proves_generation=True, at=2.0).value
    'ready'
    """

    def __init__(self, *, started_at: float, hang_after_s: float = 300.0, timeout_s: float | None = None,
                 settle_s: float = 2.0, keep_last_lines: int = 40, max_benign: int = 200) -> None:
        if hang_after_s <= 0 or (timeout_s is not None and timeout_s <= 0) or settle_s < 0:
            raise ValueError("hang_after_s and timeout_s must be positive and settle_s not negative, "
                             f"got hang_after_s={hang_after_s}, timeout_s={timeout_s}, settle_s={settle_s}")
        self.started_at = started_at
        self.hang_after_s = hang_after_s
        self.timeout_s = timeout_s
        self.settle_s = settle_s
        self.state = ReadinessState.STARTING
        self.failure: Failure | None = None
        self.ready_at: float | None = None
        self.ready_reason: str | None = None
        self._ready_line: LogEvent | None = None
        self._passing_probe: ProbeResult | None = None
        self._last_output_at = started_at
        self._phases: dict[str, PhaseMark] = {}
        self._benign: deque[LogEvent] = deque(maxlen=max_benign)
        self._warnings = 0
        self._last_lines: deque[str] = deque(maxlen=keep_last_lines)
        self._probes = 0
        self._failed_probe: str | None = None  # the last probe's failure, while it is the last probe
        self._exited = False
        self._now = started_at

    def observe(self, event: LogEvent, at: float) -> ReadinessState:
        """Feed one classified log event (from toolkit.logs.LogClassifier)."""
        self._now = max(self._now, at)
        self._last_output_at = at
        if event.caused is None:  # a probe's access line is the toolkit's, not the engine's story
            self._last_lines.extend(event.context)
            self._last_lines.append(event.raw)
        if self.state is ReadinessState.HUNG:
            self.state = ReadinessState.STARTING
        if event.phase is not None and event.phase.value not in self._phases:
            self._phases[event.phase.value] = PhaseMark(event.phase.value, at, event.line_no)
        verdict = event.verdict
        if verdict is Verdict.BENIGN:
            self._benign.append(event)
        elif verdict is Verdict.WARNING:
            self._warnings += 1
        elif verdict is Verdict.READY:
            self._ready_line = self._ready_line or event
            self._maybe_ready(at)
        elif verdict is Verdict.FATAL:
            self._fatal(event, at)
        return self.state

    def probe(self, ok: bool, detail: str = "", proves_generation: bool = False, *, at: float) -> ReadinessState:
        """Feed one HTTP probe result."""
        self._now = max(self._now, at)
        self._probes += 1
        self._failed_probe = None if ok else detail
        if ok:
            result = ProbeResult(ok, detail, proves_generation, at)
            if proves_generation or self._passing_probe is None:
                self._passing_probe = result
            self._maybe_ready(at)
        return self.state

    def probe_failed(self, message: str, evidence: tuple[str, ...] = (), hint: str | None = None, *,
                     at: float) -> ReadinessState:
        """A probe's answer says the server will never be ready (dead, or the same error again and again)."""
        self._now = max(self._now, at)
        self._probes += 1
        if self.state in _TERMINAL:
            return self.state
        after = " after it was ready" if self.ready_at is not None else ""
        self.failure = Failure("died", f"{message}{after}", at, None, None, tuple(evidence), hint)
        self.state = ReadinessState.FAILED
        return self.state

    def process_exited(self, code: int | None, at: float) -> ReadinessState:
        """The server process ended (``code`` None when unknown). A server that exited is not ready."""
        self._now = max(self._now, at)
        self._exited = True
        if self.state is ReadinessState.FAILED and self.failure is not None:
            if self.failure.exit_code is None:
                self.failure = replace(self.failure, exit_code=code)
            return self.state
        decisive = self._last_fatal
        message = f"the server process exited with code {code}" + (" before it was ready" if self.ready_at is None else " after it was ready")
        hint = (decisive.hint if decisive is not None and decisive.hint else Hints.KILLED if code in (-9, 137)
                else "read the last log lines above; rerun the command by hand to see its full output")
        self.failure = Failure("died", message, at, decisive, decisive.rank if decisive else None,
                               tuple(self._last_lines) if decisive is None else decisive.context, hint, exit_code=code)
        self.state = ReadinessState.FAILED
        return self.state

    def limits(self, *, timeout_s: float | None = None, hang_after_s: float | None = None) -> None:
        """Set the current wait's limits (None keeps one); a longer one takes up a start a wait gave up on."""
        for name, value in (("timeout_s", timeout_s), ("hang_after_s", hang_after_s)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.timeout_s = self.timeout_s if timeout_s is None else timeout_s
        self.hang_after_s = self.hang_after_s if hang_after_s is None else hang_after_s
        within_timeout = self.timeout_s is not None and self._now - self.started_at < self.timeout_s
        if (self.failure is not None and self.failure.kind == "timeout" and within_timeout) or (
                self.state is ReadinessState.HUNG and self._now - self._last_output_at < self.hang_after_s):
            self.state, self.failure = ReadinessState.STARTING, None

    def tick(self, now: float) -> ReadinessState:
        """Let time pass: timeout and hang detection."""
        self._now = max(self._now, now)
        if self.state in _TERMINAL:
            return self.state
        if self.timeout_s is not None and now - self.started_at >= self.timeout_s:
            seen = ", ".join(self._phases) or "no start-up phase"
            message = f"the server was not ready within {self.timeout_s:g} s (reached: {seen})"
            hint = ("raise timeout_s if the phases are still advancing (large models load for many minutes); "
                    "otherwise read the last lines")
            if self._failed_probe and {"http_up", "ready"} & set(self._phases):
                message += f"; its log says HTTP is up, but the last probe failed: {self._failed_probe}"
                hint = ("the log and the probe disagree: the probed URL is not where the server listens (its --host "
                        "binds another address) or something between refuses it; open the URL from here by hand")
            self.failure = Failure("timeout", message, now, None, None, tuple(self._last_lines), hint)
            self.state = ReadinessState.FAILED
        elif now - self._last_output_at >= self.hang_after_s:
            if self.state is not ReadinessState.HUNG:
                self.failure = Failure("hung", f"no log output for {now - self._last_output_at:.0f} s while starting",
                                       now, None, None, tuple(self._last_lines), Hints.WATCHDOG)
            self.state = ReadinessState.HUNG
        return self.state

    @property
    def settled(self) -> bool:
        """True when the state will not be refined any more by reading further."""
        if self.state is ReadinessState.READY:
            return True
        if self.state is not ReadinessState.FAILED or self.failure is None:
            return False
        decisive = self.failure.decisive
        return (self._exited or decisive is None or not decisive.notice
                or self._now - self.failure.at >= self.settle_s)

    def report(self) -> ReadinessReport:
        phases = dict(self._phases)
        if self.ready_at is not None and "ready" not in phases:
            phases["ready"] = PhaseMark("ready", self.ready_at, self._ready_line.line_no if self._ready_line else None)
        return ReadinessReport(
            ready=self.state is ReadinessState.READY, state=self.state, started_at=self.started_at,
            time_to_ready_s=None if self.ready_at is None else self.ready_at - self.started_at,
            phases=tuple(sorted(phases.values(), key=lambda p: p.at)), benign=tuple(self._benign),
            warnings=self._warnings, last_lines=tuple(self._last_lines), failure=self.failure,
            ready_reason=self.ready_reason, probes=self._probes, ready_line=self._ready_line,
            ready_evidence=self._ready_line.ready_evidence if self._ready_line is not None else None)

    _last_fatal: LogEvent | None = None

    def _maybe_ready(self, at: float) -> None:
        probe = self._passing_probe
        if self.state in _TERMINAL or probe is None:
            return
        if probe.proves_generation:
            self.ready_reason = f"a probe generated: {probe.detail}".rstrip(": ")
        elif self._ready_line is not None and self._ready_line.ready_evidence == "serving lines":
            self.ready_reason = (f"serving lines from line {self._ready_line.line_no} (the log was joined mid-run)"
                                 f" and a passing probe: {probe.detail}").rstrip(": ")
        elif self._ready_line is not None:
            self.ready_reason = f"ready line {self._ready_line.line_no} and a passing probe: {probe.detail}".rstrip(": ")
        else:
            return
        self.state = ReadinessState.READY
        self.ready_at = at

    def _fatal(self, event: LogEvent, at: float) -> None:
        current = self.failure.decisive if self.failure is not None else None
        self._last_fatal = event if (self._last_fatal is None or self._last_fatal.notice) else self._last_fatal
        if self.state is ReadinessState.FAILED:
            # refine a notice ("Received sigquit") with the rank's exception that explains it
            if self.failure is not None and self.failure.kind == "fatal" and current is not None and current.notice and not event.notice:
                self.failure = self._fatal_failure(event, self.failure.at)
            return
        self.failure = self._fatal_failure(event, at)
        self.state = ReadinessState.FAILED

    def _fatal_failure(self, event: LogEvent, at: float) -> Failure:
        where = f" on {event.rank}" if event.rank else ""
        after = " after it was ready" if self.ready_at is not None else ""
        message = f"the server failed{after}{where} (rule {event.rule}, line {event.line_no}): {event.text.strip()}"
        return Failure("fatal", message, at, event, event.rank, event.context, event.hint)


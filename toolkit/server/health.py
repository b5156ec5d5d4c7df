"""What a server's answers to readiness probes mean, and how often to ask: pure.

Issue 13's H200 run: ``transformers serve``'s worker died, ``/health`` said ``{"status": "unhealthy",
"reason": "cb_worker_dead"}``, and the toolkit probed 2,769 times in 300 s, then timed out. Here an
answer is read as the engine means it (SGLang's empty 503 is a wait), a repeated error is a failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from toolkit.engines import HealthCheck

__all__ = ["ProbeVerdict", "ProbeOutcome", "judge_answer", "quote_body", "RepeatedErrors", "ProbeSchedule"]

ProbeVerdict = Literal["pass", "wait", "dead"]
_VOLATILE = re.compile(r"\b(?:[0-9a-f]{8,}|[0-9a-f-]{36}|\d+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ProbeOutcome:
    """One readiness probe: did it pass, what it said, did it prove generation; "dead": the answer says so."""

    ok: bool
    detail: str
    proves_generation: bool
    verdict: ProbeVerdict = "wait"
    evidence: tuple[str, ...] = ()
    hint: str | None = None
    status: int = 0
    body: str = ""

    def __post_init__(self) -> None:
        if self.ok and self.verdict == "wait":
            object.__setattr__(self, "verdict", "pass")


def quote_body(body: bytes | str, limit: int = 400) -> str:
    """An answer's body as one line for an error message (JSON re-serialised compactly)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        text = json.dumps(json.loads(text), separators=(", ", ": "))
    except ValueError:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _field(body: str, name: str) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    value = data.get(name) if isinstance(data, Mapping) else None
    return None if value is None else str(value)


def judge_answer(check: HealthCheck, what: str, status: int, body: bytes | str, engine: str) -> ProbeOutcome:
    """What one answer of ``check``'s endpoint means, in the engine's own terms.

    >>> from toolkit.engines import profile_for
    >>> tf = profile_for("transformers", "5.24.0").health[0]
    >>> out = judge_answer(tf, "GET /health", 503, b'{"status": "unhealthy", "reason": "cb_worker_dead"}', "transformers")
    >>> out.verdict, out.evidence[0]
    ('dead', 'GET /health 503: {"status": "unhealthy", "reason": "cb_worker_dead"}')
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    quoted = quote_body(text)
    detail = f"{what} {status}" + (f" {quoted}" if quoted else "")
    answer = check.answer(status)
    if status == 200 and (answer is None or answer.meaning == "ready"):
        return ProbeOutcome(True, detail, check.proves_generation, status=status, body=text)
    if answer is not None and answer.meaning == "dead":
        reason = _field(text, answer.reason_field) if answer.reason_field else None
        said = f" (reason: {reason})" if reason else (" (no body: the log says why)" if not quoted else "")
        return ProbeOutcome(
            False, detail, False, "dead", status=status, body=text,
            evidence=(f"{what} {status}: {quoted or '(empty body)'}", f"what it means: {answer.source}"),
            hint=f"{engine} says its engine is dead{said}: read the quoted answer and the last log lines, fix the "
                 "cause, launch again")
    return ProbeOutcome(False, detail, False, status=status, body=text)


@dataclass
class RepeatedErrors:
    """The same error answer (with a body; numbers and ids ignored), ``times`` over ``span_s``: a failure.

    >>> errors = RepeatedErrors(times=3, span_s=1.0)
    >>> [errors.see("POST /v1/completions", 503, '{"error": "worker dead, request 17"}', at=t) for t in (0, 1, 2)][-1]
    'POST /v1/completions answered 503 3 times in 2 s: {"error": "worker dead, request 17"}'
    """

    times: int = 5
    span_s: float = 3.0
    _key: tuple[str, int, str] | None = field(default=None, init=False)
    _count: int = field(default=0, init=False)
    _first_at: float = field(default=0.0, init=False)

    def see(self, what: str, status: int, body: str, *, at: float) -> str | None:
        """Record one answer; the failure's message once it has repeated enough, else None."""
        if status in (0, 200) or not body.strip():
            self._key, self._count = None, 0
            return None
        key = (what, status, _VOLATILE.sub("#", quote_body(body)))
        if key != self._key:
            self._key, self._count, self._first_at = key, 0, at
        self._count += 1
        if self._count >= self.times and at - self._first_at >= self.span_s:
            return f"{what} answered {status} {self._count} times in {at - self._first_at:.0f} s: {quote_body(body)}"
        return None


@dataclass(frozen=True)
class ProbeSchedule:
    """How long to wait before the next probe.

    ``loading_s`` while loading, ``fast_s`` once the log says HTTP is up, each growing by ``growth`` per
    failed probe up to ``max_s``; never under ``elapsed / 60``: a few hundred probes an hour, not thousands.

    >>> s = ProbeSchedule()
    >>> s.interval(elapsed_s=2, failures=0, fast=True), s.interval(elapsed_s=2, failures=3, fast=True)
    (0.25, 0.84375)
    >>> s.interval(elapsed_s=600, failures=0, fast=True)
    10.0
    """

    loading_s: float = 1.0
    fast_s: float = 0.25
    growth: float = 1.5
    max_s: float = 5.0
    slowdown_per_s: float = 1 / 60

    def interval(self, *, elapsed_s: float, failures: int, fast: bool) -> float:
        base = self.fast_s if fast else self.loading_s
        grown = min(base * self.growth ** max(failures, 0), self.max_s)
        return max(grown, elapsed_s * self.slowdown_per_s)

"""A whole log in one value: its state, ready and fatal lines, benign lines, metrics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from toolkit.logs.classify import LogEvent
from toolkit.logs.metrics import MetricRow
from toolkit.logs.rules import Verdict

__all__ = ["LogSummary", "summarize", "decisive_fatal"]


@dataclass(frozen=True)
class LogSummary:
    """What a person wants from a log: did it start, where did it die, what is noise.

    ``fatal_line`` is the decisive fatal line: the first fatal event that is not a mere
    notice (``Received sigquit``, ``EngineCore failed to start``) when there is one, since
    the rank's exception that follows a notice says why.
    """

    state: str
    ready_line: int | None
    fatal_line: int | None
    fatal_reason: str | None
    fatal_rule: str | None
    fatal_rank: str | None
    fatal_context: tuple[str, ...]
    hint: str | None
    benign_lines: tuple[int, ...]
    warning_lines: tuple[int, ...]
    metrics: tuple[MetricRow, ...]
    phases: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, object]:
        """The CLI's JSON object."""
        return {
            "state": self.state,
            "ready_line": self.ready_line,
            "fatal_line": self.fatal_line,
            "fatal_reason": self.fatal_reason,
            "benign_lines": list(self.benign_lines),
            "metrics": [m.to_dict() for m in self.metrics],
            "fatal_rule": self.fatal_rule,
            "fatal_rank": self.fatal_rank,
            "hint": self.hint,
            "phases": [{"phase": p, "line": n} for p, n in self.phases],
        }


def decisive_fatal(events: Iterable[LogEvent]) -> LogEvent | None:
    """The first fatal event that is not a notice, else the first fatal event."""
    first: LogEvent | None = None
    for event in events:
        if event.verdict is Verdict.FATAL:
            if not event.notice:
                return event
            first = first or event
    return first


def summarize(events: Iterable[LogEvent]) -> LogSummary:
    """Summarize classified events (from :func:`classify_lines`)."""
    events = sorted(events, key=lambda e: e.line_no)
    ready = next((e for e in events if e.verdict is Verdict.READY), None)
    fatal = decisive_fatal(events)
    phases: dict[str, int] = {}
    for e in events:
        if e.phase is not None and e.phase.value not in phases:
            phases[e.phase.value] = e.line_no
    if ready is not None and "ready" not in phases:
        phases["ready"] = ready.line_no
    state = "failed" if fatal is not None else "ready" if ready is not None else "starting"
    reason = None
    if fatal is not None:
        reason = fatal.text.strip()
        if fatal.rank:
            reason = f"[{fatal.rank}] {reason}"
    return LogSummary(
        state=state,
        ready_line=ready.line_no if ready else None,
        fatal_line=fatal.line_no if fatal else None,
        fatal_reason=reason,
        fatal_rule=fatal.rule if fatal else None,
        fatal_rank=fatal.rank if fatal else None,
        fatal_context=fatal.context if fatal else (),
        hint=fatal.hint if fatal else None,
        benign_lines=tuple(e.line_no for e in events if e.verdict is Verdict.BENIGN),
        warning_lines=tuple(e.line_no for e in events if e.verdict is Verdict.WARNING),
        metrics=tuple(e.metric for e in events if e.metric is not None),
        phases=tuple(sorted(phases.items(), key=lambda kv: kv[1])),
    )

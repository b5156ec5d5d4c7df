"""A whole log in one value: its state, ready and fatal lines, benign lines, metrics.

:class:`SummaryBuilder` keeps only what the summary needs, so with caps a log of any length is summarized
in bounded memory (the CLI's streaming path).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from toolkit.logs.classify import LogEvent
from toolkit.logs.line import parse_fields
from toolkit.logs.metric_lines import MetricRow, parse_metric
from toolkit.logs.rules import Verdict

__all__ = ["LogSummary", "SummaryBuilder", "summarize", "decisive_fatal", "shorten"]

MAX_QUOTED_CHARS = 500  # a quoted line longer than this is cut: a 50 MB line must not be printed whole
MAX_CONTEXT_LINES = 100


def shorten(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was.

    >>> shorten("x" * 10, 4)
    'xxxx... (10 characters)'
    """
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True)
class LogSummary:
    """What a person wants from a log: did it start, where did it die, what is noise.

    ``fatal_line`` is the first fatal event that is not a mere notice (``Received sigquit``) when there is
    one: the rank's exception that follows a notice says why. ``ready_evidence``: ``"ready line"`` or
    ``"serving lines"`` (a log joined mid-run). With a cap, ``metrics`` are the last rows only.
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
    ready_evidence: str | None = None
    metric_count: int = 0
    benign_count: int = 0

    def to_dict(self) -> dict[str, object]:
        """The CLI's JSON object."""
        return {
            "state": self.state, "ready_line": self.ready_line, "ready_evidence": self.ready_evidence,
            "fatal_line": self.fatal_line, "fatal_reason": self.fatal_reason,
            "benign_lines": list(self.benign_lines), "benign_count": self.benign_count,
            "metrics": [m.to_dict() for m in self.metrics], "metric_count": self.metric_count,
            "fatal_rule": self.fatal_rule, "fatal_rank": self.fatal_rank, "hint": self.hint,
            "phases": [{"phase": p, "line": n} for p, n in self.phases],
        }


def decisive_fatal(events: Iterable[LogEvent]) -> LogEvent | None:
    """The first fatal event that is not a notice, else the first fatal event."""
    fatal = [event for event in events if event.verdict is Verdict.FATAL]
    return next((event for event in fatal if not event.notice), fatal[0] if fatal else None)


class SummaryBuilder:
    """Builds a :class:`LogSummary` from events fed one by one, in any order of arrival.

    A traceback's event arrives when it closes, after later lines of other ranks: every "first" here is
    the lowest line number. With caps it keeps the last ``max_metrics`` metric rows and the first
    ``max_lines`` benign and warning lines, counting all; an unparsed metric is parsed only if kept.

    >>> from toolkit.logs.classify import classify_lines
    >>> b = SummaryBuilder(max_metrics=1)
    >>> for e in classify_lines(["INFO:     Application startup complete."], engine="vllm"):
    ...     b.add(e)
    >>> b.summary().state
    'ready'
    """

    def __init__(self, *, max_metrics: int | None = None, max_lines: int | None = None) -> None:
        self._ready: LogEvent | None = None
        self._fatal: LogEvent | None = None
        self._notice: LogEvent | None = None
        self._phases: dict[str, int] = {}
        self._max_lines = max_lines
        self._benign: list[int] = []
        self._warnings: list[int] = []
        self._benign_count = 0
        self._metrics: deque[MetricRow] = deque(maxlen=max_metrics)
        self._unparsed: deque[tuple[str, datetime | None, str | None, int]] = deque(maxlen=max_metrics)
        self._raw_metrics: deque[tuple[str, int]] = deque(maxlen=max_metrics)
        self._metric_count = 0

    def add_metric_lines(self, lines: Sequence[str], indices: Sequence[int], first_line_no: int) -> None:
        """The fast lane's metric lines: ``lines[k]`` (``k`` in ``indices``) is line ``first_line_no + k``."""
        keep = self._raw_metrics.maxlen
        chosen = indices if keep is None else indices[len(indices) - keep:] if keep else ()
        self._raw_metrics.extend((lines[k], first_line_no + k) for k in chosen)
        self._metric_count += len(indices)

    def add(self, event: LogEvent) -> None:
        verdict = event.verdict
        n = event.line_no
        if event.metric is not None:
            self._metrics.append(event.metric)
            self._metric_count += 1
        elif verdict is Verdict.METRIC:
            self._unparsed.append((event.text, event.timestamp, event.rank, n))
            self._metric_count += 1
        if event.phase is not None and n < self._phases.get(event.phase.value, n + 1):
            self._phases[event.phase.value] = n
        if verdict is Verdict.METRIC or verdict is Verdict.INFO or verdict is Verdict.PROGRESS:
            return
        if verdict is Verdict.READY:
            if self._ready is None or n < self._ready.line_no:
                self._ready = event
        elif verdict is Verdict.FATAL:
            if event.notice:
                if self._notice is None or n < self._notice.line_no:
                    self._notice = event
            elif self._fatal is None or n < self._fatal.line_no:
                self._fatal = event
        elif verdict is Verdict.BENIGN:
            self._benign_count += 1
            if self._max_lines is None or len(self._benign) < self._max_lines:
                self._benign.append(n)
        elif verdict is Verdict.WARNING and (self._max_lines is None or len(self._warnings) < self._max_lines):
            self._warnings.append(n)

    def summary(self) -> LogSummary:
        ready, fatal = self._ready, self._fatal or self._notice
        phases = dict(self._phases)
        if ready is not None:
            phases.setdefault("ready", ready.line_no)
        reason = None
        if fatal is not None:
            reason = shorten(fatal.text.strip())
            if fatal.rank:
                reason = f"[{shorten(fatal.rank, 80)}] {reason}"
        return LogSummary(
            state="failed" if fatal is not None else "ready" if ready is not None else "starting",
            ready_line=ready.line_no if ready else None, fatal_line=fatal.line_no if fatal else None,
            fatal_reason=reason, fatal_rule=fatal.rule if fatal else None,
            fatal_rank=fatal.rank if fatal else None,
            fatal_context=tuple(shorten(line) for line in fatal.context[-MAX_CONTEXT_LINES:]) if fatal else (),
            hint=fatal.hint if fatal else None, benign_lines=tuple(sorted(self._benign)),
            warning_lines=tuple(sorted(self._warnings)), metrics=self._kept_metrics(),
            phases=tuple(sorted(phases.items(), key=lambda kv: kv[1])),
            ready_evidence=ready.ready_evidence if ready else None, metric_count=self._metric_count,
            benign_count=self._benign_count,
        )

    def _kept_metrics(self) -> tuple[MetricRow, ...]:
        pending = [*self._unparsed, *((*parse_fields(raw)[:3], n) for raw, n in self._raw_metrics)]
        rows = [*self._metrics, *filter(None, (parse_metric(text, line_no=n, timestamp=timestamp, rank=rank)
                                               for text, timestamp, rank, n in pending))]
        rows.sort(key=lambda m: m.line_no)
        keep = self._metrics.maxlen
        return tuple(rows if keep is None else rows[len(rows) - keep:] if keep else ())


def summarize(events: Iterable[LogEvent]) -> LogSummary:
    """Summarize classified events (from :func:`classify_lines`), keeping every metric row and line."""
    builder = SummaryBuilder()
    for event in events:
        builder.add(event)
    return builder.summary()

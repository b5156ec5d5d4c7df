"""Which of a server's log events a journal step keeps: a run's metric lines, and the decisive lines.

A :class:`LogLedger` keeps, from a follower's first line, what a journal step stores: every metric row, the
ready line, the first benign lines and the last fatal ones. The follower's ring buffer holds only the last
20,000 events: on a long, chatty run the start-up lines leave it, never the ledger.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta

from toolkit.logs.event import LogEvent, Verdict
from toolkit.logs.metric_lines import MetricRow

__all__ = ["metric_window", "LogLedger"]

_BENIGN_KEPT = 100
_FATAL_KEPT = 20
_METRIC_ROWS_KEPT = 200_000  # SGLang prints one decode line per 40 steps: days of a busy server


def metric_window(events: Iterable[LogEvent], after_line: int, upto_line: int,
                  since: float | None = None, *, rows: list[MetricRow] | None = None) -> list[MetricRow]:
    """Metric rows of log lines ``after_line < line_no <= upto_line``, stamped at ``since`` (epoch s) or later.

    Line numbers bound a run exactly whatever the host's clock says; the stamps (whole seconds in SGLang
    logs: 1 s of slack) then drop the warm-up, unless they drop every row (a host clock far from ours).
    """
    if rows is None:
        rows = [e.metric for e in events if e.metric is not None and after_line < e.line_no <= upto_line]
    if since is None:
        return rows
    start = datetime.fromtimestamp(since) - timedelta(seconds=1)

    def local(ts: datetime) -> datetime:
        return ts.astimezone().replace(tzinfo=None) if ts.tzinfo is not None else ts

    kept = [r for r in rows if r.timestamp is None or local(r.timestamp) >= start]
    return kept if kept or not rows else rows


class LogLedger:
    """A follower's subscriber keeping what a journal step stores, in bounded memory; thread-safe.

    Give each follower its own: a follower started again reads the file from line 1 again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_line = 0
        self._metrics: deque[MetricRow] = deque(maxlen=_METRIC_ROWS_KEPT)
        self._ready: LogEvent | None = None
        self._benign: list[LogEvent] = []
        self._fatal: deque[LogEvent] = deque(maxlen=_FATAL_KEPT)

    def __call__(self, batch: list[LogEvent]) -> None:
        with self._lock:
            for event in batch:
                self._last_line = max(self._last_line, event.line_no)
                verdict = event.verdict
                if event.metric is not None:
                    self._metrics.append(event.metric)
                elif verdict is Verdict.READY:
                    self._ready = self._ready or event
                elif verdict is Verdict.BENIGN:
                    if len(self._benign) < _BENIGN_KEPT:
                        self._benign.append(event)
                elif verdict is Verdict.FATAL:
                    self._fatal.append(event)

    @property
    def last_line(self) -> int:
        """The last line number the ledger has heard of."""
        return self._last_line

    def metric_rows(self, after_line: int, upto_line: int, since: float | None = None) -> list[MetricRow]:
        """The metric rows of a run: see :func:`metric_window`."""
        with self._lock:
            rows = [r for r in self._metrics if after_line < r.line_no <= upto_line]
        return metric_window((), after_line, upto_line, since, rows=rows)

    def decisive(self, *, ready: bool = False) -> list[LogEvent]:
        """What a reader of the step must see: the first 100 error-looking lines judged benign and the last 20
        fatal ones, with the line that made the server ready when ``ready``; in line order."""
        with self._lock:
            chosen = [*self._benign, *self._fatal, *([self._ready] if ready and self._ready is not None else [])]
        return sorted(chosen, key=lambda e: e.line_no)

    def fatal(self) -> list[LogEvent]:
        """The last fatal events, oldest first."""
        with self._lock:
            return list(self._fatal)

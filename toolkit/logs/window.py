"""Which of a server's log events a journal step keeps: a run's metric lines, and the decisive lines, pure.

Shared by the trial (``toolkit.moves.trial``) and ``tk.bench`` on a ``Server`` (``toolkit.benchmark.evidence``),
so the README's ``with journal.step(...) as step, tk.launch(...) as server:`` pattern stores what a trial stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from toolkit.logs.event import LogEvent, Verdict
from toolkit.logs.metrics import MetricRow

__all__ = ["metric_window", "decisive_lines"]


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

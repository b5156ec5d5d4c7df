"""What a server's own log said while ``tk.bench`` ran against it, and which release served it.

The README's pattern (``step.record(tk.bench(server, ...))`` inside ``tk.launch``) stored 0 log and 0
metric lines on the first real vLLM run (issue 23): only the trial recorded them. ``tk.bench`` on a
``Server`` now brings them (:attr:`BenchResult.evidence`): the run's metric lines, the ledger's decisive
lines so far, and the release with how it was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from toolkit.logs import LogEvent, MetricRow
from toolkit.server.logfile import count_lines
from toolkit.server.server import Server

__all__ = ["ServerEvidence", "log_mark", "collect_evidence"]


@dataclass(frozen=True)
class ServerEvidence:
    """The server's side of one benchmark: its log's metric and decisive lines, and its release."""

    metric_rows: tuple[MetricRow, ...] = ()
    log_events: tuple[LogEvent, ...] = ()
    provenance: Mapping[str, str] = field(default_factory=dict)
    release_problem: str | None = None  # why the release could not be read, and what to do


def log_mark(server: Server) -> int:
    """The log's line count now (0 when it cannot be read): a run's metric lines come after it."""
    return count_lines(server.host, server.log_path) or 0


def collect_evidence(server: Server, before_line: int, since: float | None) -> ServerEvidence:
    """The evidence of a run that started after log line ``before_line`` (at ``since``, epoch s)."""
    after = log_mark(server)
    server.follow().wait_for_lines(after)
    ledger = server.ledger
    rows = ledger.metric_rows(before_line, after, since)
    chosen = ledger.decisive(ready=True)  # with the line that made the server ready
    release = server.release()
    return ServerEvidence(tuple(rows), tuple(chosen), release.provenance(), release.problem())

"""One classified line, or one grouped traceback: what the classifier gives its readers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from toolkit.logs.metric_lines import MetricRow
from toolkit.logs.rules import Phase, Verdict

__all__ = ["LogEvent"]


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One classified line, or one grouped traceback (``context``: earlier lines, ``line_no``: the last)."""

    line_no: int
    raw: str
    text: str
    timestamp: datetime | None
    rank: str | None
    level: str | None
    verdict: Verdict
    rule: str | None
    phase: Phase | None
    metric: MetricRow | None
    context: tuple[str, ...] = ()
    first_line_no: int = 0
    hint: str | None = None
    notice: bool = False  # fatal, but announces a death whose cause may follow (sigquit)
    # on a READY event: "ready line" (the engine said so) or "serving lines" (a log joined mid-run shows it serving)
    ready_evidence: str | None = None
    # whether the toolkit caused the line (toolkit.logs.caused): "request" (the access line of its own probe or
    # scrape), "stop" (a rank dying of the stop it asked for), None (the engine's own story)
    caused: str | None = None

    @property
    def is_fatal(self) -> bool:
        return self.verdict is Verdict.FATAL

    def to_dict(self) -> dict[str, object]:
        """JSON-safe form (timestamps as ISO text; year 1900 means the log printed none)."""
        return {
            "line_no": self.line_no, "first_line_no": self.first_line_no, "raw": self.raw, "text": self.text,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None, "rank": self.rank,
            "level": self.level, "verdict": self.verdict.value, "rule": self.rule,
            "phase": self.phase.value if self.phase else None, "hint": self.hint, "notice": self.notice,
            "context": list(self.context), "metric": self.metric.to_dict() if self.metric else None,
            "ready_evidence": self.ready_evidence, "caused": self.caused,
        }

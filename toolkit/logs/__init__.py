"""Pure log intelligence: parse server log lines and classify them with per-engine rule packs.

    >>> from toolkit.logs import classify_lines, summarize
    >>> summarize(classify_lines(["[2026-02-26 20:26:06] The server is fired up and ready to roll!"])).state
    'ready'

No I/O here: feed strings, get values. See docs/log-rules.md for the packs and how to
add a rule from a notebook in one line.
"""

from __future__ import annotations

from toolkit.logs.caused import TOOLKIT_REQUESTS, after_stop, is_probe_completion, is_toolkit_request
from toolkit.logs.classify import LogClassifier, LogEvent, classify_lines
from toolkit.logs.detect import ENGINES, PACKS, detect_engine, log_engine
from toolkit.logs.line import ParsedLine, parse_line, strip_ansi
from toolkit.logs.metric_lines import METRIC_KINDS, MetricRow, parse_metric
from toolkit.logs.packs import COMMON, GENERIC, SGLANG, VLLM, Hints, add_rule
from toolkit.logs.rules import Phase, Rule, RulePack, Verdict
from toolkit.logs.stream import classify_chunks
from toolkit.logs.summary import LogSummary, SummaryBuilder, decisive_fatal, summarize

__all__ = [
    "Verdict", "Phase", "Rule", "RulePack", "LogEvent", "MetricRow", "LogClassifier", "LogSummary",
    "ParsedLine", "classify_lines", "summarize", "decisive_fatal", "parse_line", "parse_metric", "strip_ansi",
    "detect_engine", "add_rule", "Hints", "COMMON", "GENERIC", "SGLANG", "VLLM", "PACKS", "log_engine",
    "ENGINES", "METRIC_KINDS", "classify_file_bytes", "classify_chunks", "SummaryBuilder",
    "is_toolkit_request", "is_probe_completion", "after_stop", "TOOLKIT_REQUESTS",
]


def classify_file_bytes(data: bytes, engine: str = "auto") -> LogSummary:
    """Summarize a whole log given as bytes (utf-8, errors replaced; lines split on ``\\n`` only,
    so line numbers agree with ``grep -n``), keeping every metric row. Raises
    :class:`~toolkit.errors.ToolkitError` for empty or binary input."""
    return classify_chunks([data], engine=engine, max_metrics=None, max_lines=None)

"""The fast lane of a long log: once the server is ready, most lines decide nothing.

Pure. After the ready line, with no traceback open and the engine settled, a serving log is
metric lines and access lines by the million (``logs classify`` of 2M lines took 20 s idle and
46 s on a busy machine, issue 20). The summary needs little from such a line: a quiet line
(no rule and no warning or error level, or a rule whose verdict is info or progress) changes
nothing but the line count, and a metric line is counted and parsed at the end only if it is
among the rows kept. :func:`sort_line` reads the header's text and level only (no timestamp)
and asks the rules in force, in their order, exactly as :meth:`LogClassifier.feed` would, but
builds no event; anything else (a traceback, a benign or fatal rule, a warning level, a line
that marks a phase or heads a traceback) goes through ``feed`` as before.
:func:`toolkit.logs.stream.classify_chunks` runs the same decision inlined (its hot loop);
``tests/test_logs_stream.py`` holds the two paths equal on every corpus log and
``benchmarks/classify_memory.py`` measures them.

>>> from toolkit.logs.detect import packs_for
>>> from toolkit.logs.rules import compile_rules
>>> rules = compile_rules([r for p in packs_for("sglang") for r in p.rules])
>>> [sort_line(rules, x) for x in ('INFO:     1.2.3.4:5 - "POST /v1/completions HTTP/1.1" 200 OK',
...                               "[2026-02-26 20:26:06 TP0] Decode batch. #running-req: 3", "WARNING: x")]
['quiet', 'metric', 'feed']
"""

from __future__ import annotations

from typing import Literal

from toolkit.logs.line import text_and_level
from toolkit.logs.rules import CompiledRules, Verdict, match_compiled

__all__ = ["Kind", "sort_line", "TRACEBACK_START", "LOUD_LEVELS", "QUIET_VERDICTS"]

Kind = Literal["quiet", "metric", "feed"]
TRACEBACK_START = "Traceback (most recent call last)"
#: header levels that make a line without a rule a warning (LogClassifier._single)
LOUD_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL", "FATAL"})
#: verdicts a summary ignores (SummaryBuilder.add returns at once)
QUIET_VERDICTS = frozenset({Verdict.INFO, Verdict.PROGRESS})


def sort_line(rules: CompiledRules, line: str) -> Kind:
    """``quiet`` and ``metric`` lines need no event (a metric line is parsed later, if kept); ``feed`` ones do."""
    text, level = text_and_level(line)
    if TRACEBACK_START in text:
        return "feed"
    match = match_compiled(rules, text, ready=True) if text else None
    if match is None:
        return "feed" if level in LOUD_LEVELS else "quiet"
    if match.rule.phase is not None or match.rule.header:
        return "feed"
    return "metric" if match.verdict is Verdict.METRIC else "quiet" if match.verdict in QUIET_VERDICTS else "feed"

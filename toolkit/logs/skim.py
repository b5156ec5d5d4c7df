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

Millions of serving lines come in a few hundred shapes that differ only in their numbers: a
:class:`Skimmer` sorts each shape once (keyed by :func:`~toolkit.logs.digits.digit_mask`) and
reuses the answer while the header patterns and the rules it rests on are digit-blind; the rules
that read digits (an HTTP status, an exit code) are still asked on every line of the shape, after
their literals' masks say they can match it at all (:func:`~toolkit.logs.rules.match_shape`). :func:`toolkit.logs.stream.classify_chunks`
uses it; ``tests/test_logs_skim.py`` holds it equal to :func:`sort_line`, and
``tests/test_logs_stream.py`` the two paths equal on every corpus log;
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

from toolkit.logs.digits import DIGIT_MASK
from toolkit.logs.line import HEADERS_DIGIT_BLIND, text_and_level
from toolkit.logs.rules import (
    CompiledRules,
    Match,
    Recheck,
    Verdict,
    match_compiled,
    match_shape,
    recheck_first,
)
from toolkit.logs.tracebacks import TB_START, opens_traceback

__all__ = ["Kind", "sort_line", "Skimmer", "TRACEBACK_START", "LOUD_LEVELS", "QUIET_VERDICTS"]

Kind = Literal["quiet", "metric", "feed"]
TRACEBACK_START = TB_START
#: header levels that make a line without a rule a warning (LogClassifier._single)
LOUD_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL", "FATAL"})
#: verdicts a summary ignores (SummaryBuilder.add returns at once)
QUIET_VERDICTS = frozenset({Verdict.INFO, Verdict.PROGRESS})


def sort_line(rules: CompiledRules, line: str) -> Kind:
    """``quiet`` and ``metric`` lines need no event (a metric line is parsed later, if kept); ``feed`` ones do."""
    text, level = text_and_level(line)
    if opens_traceback(text):
        return "feed"
    match = match_compiled(rules, text, ready=True) if text else None
    return _kind(match, level)


def _kind(match: Match | None, level: str | None) -> Kind:
    if match is None:
        return "feed" if level in LOUD_LEVELS else "quiet"
    if match.rule.phase is not None or match.rule.header:
        return "feed"
    return "metric" if match.verdict is Verdict.METRIC else "quiet" if match.verdict in QUIET_VERDICTS else "feed"


# A shape's answer: the kind when no recheck matches; where the text starts in the line (-1: not a slice of
# it, ANSI codes or a redraw were taken out); the digit-reading rules to ask on each line (match_shape's).
_Shape = tuple[Kind, int, tuple[Recheck, ...]]


class Skimmer:
    """:func:`sort_line` under one rule set, each digit shape of a line decided once.

    >>> from toolkit.logs.detect import packs_for
    >>> from toolkit.logs.rules import compile_rules
    >>> skim = Skimmer(compile_rules([r for p in packs_for("vllm") for r in p.rules]))
    >>> [skim.sort(f'INFO:     1.2.3.4:5 - "POST /v1/completions HTTP/1.1" {code} OK') for code in (200, 503)]
    ['quiet', 'feed']
    """

    def __init__(self, rules: CompiledRules, *, max_shapes: int = 8192) -> None:
        self.rules = rules
        self._shapes: dict[bytes, _Shape] = {}
        self._max_shapes = max_shapes
        self.enabled = HEADERS_DIGIT_BLIND

    def sort(self, line: str) -> Kind:
        """What :func:`sort_line` says of ``line``."""
        metrics: list[int] = []
        end = self.skim([line], 0, metrics)
        return "feed" if end == 0 else "metric" if metrics else "quiet"

    def skim(self, lines: list[str], start: int, metrics: list[int] | None) -> int:
        """The index of the first of ``lines[start:]`` that must be fed (``len(lines)`` when none).

        The lines before it are quiet, or metric lines whose indices are appended to ``metrics``;
        with ``metrics=None`` a metric line must be fed too (a reader that keeps every row).
        """
        if not self.enabled:
            for i in range(start, len(lines)):
                kind = sort_line(self.rules, lines[i])
                if kind == "metric" and metrics is not None:
                    metrics.append(i)
                elif kind != "quiet":
                    return i
            return len(lines)
        shapes, mask = self._shapes, DIGIT_MASK
        for i in range(start, len(lines)):
            line = lines[i]
            key = line.encode("utf-8", "surrogatepass").translate(mask)  # digit_mask, inlined
            shape = shapes.get(key)
            if shape is None:
                if len(shapes) >= self._max_shapes:
                    shapes.clear()
                shape = shapes[key] = self._learn(line)
            kind, offset, recheck = shape
            if recheck:
                text = line[offset:] if offset >= 0 else text_and_level(line)[0]
                if (hit := recheck_first(recheck, text)) >= 0:
                    kind = _kind(recheck[hit][3][5], None)  # a rule that reads digits decides: its match once ready
            if kind == "quiet":
                continue
            if kind == "metric" and metrics is not None:
                metrics.append(i)
                continue
            return i
        return len(lines)

    def _learn(self, line: str) -> _Shape:
        text, level = text_and_level(line)
        offset = len(line) - len(text) if line.endswith(text) else -1
        if not text or opens_traceback(text):
            return sort_line(self.rules, line), offset, ()
        first, recheck = match_shape(self.rules, text)
        return _kind(self.rules[first][5] if first >= 0 else None, level), offset, recheck  # [5]: its match once ready

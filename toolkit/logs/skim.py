"""The fast lane of a long log: once the server is ready, most lines decide nothing.

After the ready line a serving log is metric and access lines by the million (``logs classify`` of 2M lines
took 20 s idle and 46 s on a busy machine, issue 20). A quiet line changes nothing but the line count, and a
metric line is parsed at the end only if kept: :func:`sort_line` asks the rules in force as
:meth:`LogClassifier.feed` would, but builds no event. A :class:`Skimmer` sorts each digit shape once; rules
that read digits (an HTTP status) are still asked on every line (:func:`~toolkit.logs.rules.match_shape`).

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
from toolkit.logs.tracebacks import opens_traceback

__all__ = ["Kind", "sort_line", "Skimmer", "LOUD_LEVELS", "QUIET_VERDICTS"]

Kind = Literal["quiet", "metric", "feed"]
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

        Metric lines before it are appended to ``metrics``; with ``metrics=None`` they must be fed too.
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

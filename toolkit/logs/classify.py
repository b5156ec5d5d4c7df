"""The streaming classifier: lines in, :class:`LogEvent` verdicts out.

A traceback is one event: its ``line_no`` is its exception line, ``context`` the lines before.

Live following must keep up with a busy server, whose log is a few line shapes repeated with other numbers:
a line with a common header and no traceback open is read by its digit shape (:mod:`toolkit.logs.digits`),
the header's fields sliced at known positions and only the rules that read digits asked again
(``benchmarks/classify_speed.py`` measures it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from toolkit.logs._construct import fast_constructor
from toolkit.logs.caused import request_mark
from toolkit.logs.detect import ENGINES, engine_of_line, packs_for
from toolkit.logs.digits import DIGIT_MASK
from toolkit.logs.event import LogEvent
from toolkit.logs.line import (
    HEADERS_DIGIT_BLIND,
    HeaderShape,
    ParsedLine,
    fields_at,
    header_shape,
    parse_fields,
)
from toolkit.logs.metric_lines import MetricReader, MetricRow, metric_at, metric_reader, parse_metric
from toolkit.logs.packs import REQUEST_NAMED, SERVING_RULES
from toolkit.logs.rules import (
    CompiledRules,
    Match,
    Phase,
    Recheck,
    Rule,
    RulePack,
    Verdict,
    compile_rules,
    match_compiled,
    match_shape,
    recheck_first,
)
from toolkit.logs.tracebacks import (
    CHAINED,
    EXCEPTION_LINE,
    FRAME_LITERAL,
    TB_START,
    TERMINATE_WHAT,
    TRACEBACK,
    TRACEBACK_AT_END,
    TRACEBACK_ENGINE_CUT,
    OpenTraceback,
    choose,
    default_rule,
    is_engine_group,
    is_frame,
    opens_traceback,
)

__all__ = ["LogEvent", "LogClassifier", "classify_lines"]

_MAX_CONTEXT = 400
_DETECT_LINES, _TENTATIVE_LINES = 400, 60
_STARTUP_PHASES = frozenset({Phase.SERVER_ARGS, Phase.WEIGHTS_LOADING, Phase.WEIGHTS_LOADED, Phase.KV_CACHE_ALLOCATED,
                             Phase.CUDA_GRAPH_CAPTURE_BEGIN, Phase.CUDA_GRAPH_CAPTURED, Phase.HTTP_UP, Phase.WARMUP})
READY_LINE, SERVING_LINES = "ready line", "serving lines"
_ERROR_LEVEL, _WARNING_LEVEL = Rule("error_level_unmatched", r"^$", Verdict.WARNING), Rule("warning_level", r"^$", Verdict.WARNING)
_ERROR_LEVEL_NAME, _REQUEST_NAMED = _ERROR_LEVEL.name, Match(REQUEST_NAMED, REQUEST_NAMED.verdict)


# A line's digit shape: its header's positions, the first digit-blind rule deciding it, the digit-reading
# rules asked first (rules.match_shape), a metric line's value positions (metrics.metric_reader); _UNSHAPED: none.
_LineShape = tuple[HeaderShape, tuple[Rule, tuple[str, ...], bool, "re.Pattern[str] | None", Match, Match] | None,
                   tuple[Recheck, ...], MetricReader | None]
# two markers compared by identity: unequal (equal constant tuples would be compiled into one object)
_UNSHAPED: _LineShape = ((0, None, None, (-1, -1), False), None, (), None)
_UNSHAPED_YET: _LineShape = ((-1, None, None, (-1, -1), False), None, (), None)  # seen once: learnt if seen again
_MAX_SHAPES = 8192

_make_event = fast_constructor(LogEvent)  # the hot path's LogEvent(...), positional, in field order
_make_parsed = fast_constructor(ParsedLine)
_METRIC, _READY, _FATAL, _INFO = Verdict.METRIC, Verdict.READY, Verdict.FATAL, Verdict.INFO


class LogClassifier:
    """A streaming state machine over one log (pure: feed it strings).

    >>> c = LogClassifier(engine="sglang")
    >>> [e.verdict.value for e in c.feed("[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: x")]
    ['benign']
    >>> mine = LogClassifier(extra_rules=[Rule("my_benign", "harmless glitch", Verdict.BENIGN)])
    >>> mine.feed("ERROR harmless glitch")[0].rule
    'my_benign'
    """

    def __init__(self, engine: str = "auto", packs: Sequence[RulePack] | None = None,
                 extra_rules: Iterable[Rule] = (), *, parse_metrics_after_ready: bool = True, by_shape: bool = True) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine {engine!r} is not one of {list(ENGINES)}")
        self._extra = tuple(extra_rules)
        self._explicit_packs = tuple(packs) if packs is not None else None
        self.engine: str | None = None if engine == "auto" else engine
        self._tentative = False
        self._rules: tuple[Rule, ...] = ()
        self._compiled: CompiledRules = ()
        self._select_rules()
        # False: once ready, a metric event carries no MetricRow (a SummaryBuilder parses the rows it keeps)
        self._parse_after_ready = parse_metrics_after_ready
        # False: every line read in full, none by its digit shape (the reference the shape path is held to)
        self._by_shape = by_shape and HEADERS_DIGIT_BLIND
        self.line_no = 0
        self.ready = False
        self.failed = False
        self.startup_seen = False  # a start-up phase was seen: serving lines are then the warm-up, not proof
        self._groups: dict[str | None, OpenTraceback] = {}
        self._last_group: OpenTraceback | None = None
        self._last_header: dict[str | None, tuple[int, Match]] = {}
        # before readiness, an ERROR line no rule knows waits one line: if a traceback of the same process follows,
        # it was the message of `logger.exception(e)` and heads that traceback (vLLM V0 "ERROR ... engine.py:400] <e>")
        self._held: tuple[LogEvent, ParsedLine] | None = None
        # an engine's traceback after readiness (a warning) and its process: the death if nothing follows (end_of_log)
        self._end_candidate: tuple[LogEvent, str | None] | None = None
        self._at_end = False

    def _select_rules(self) -> None:
        packs = self._explicit_packs if self._explicit_packs is not None else packs_for(self.engine)
        self._rules = self._extra + tuple(r for p in packs for r in p.rules)
        self._compiled = compile_rules(self._extra) + tuple(c for p in packs for c in p.compiled)
        self._blind = tuple(entry[0].digit_blind for entry in self._compiled)
        self._shapes: dict[bytes, _LineShape] = {}  # digit mask -> what its lines share, under these rules

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules in force now, in the order they are tried."""
        return self._rules

    @property
    def state(self) -> str:
        """"failed" once a fatal event was seen, else "ready" once the ready line was, else "starting"."""
        return "failed" if self.failed else "ready" if self.ready else "starting"

    def _detect(self, raw: str) -> None:
        """Pick the engine's packs from the log itself (:mod:`toolkit.logs.detect`).

        A vLLM marker is only tentative for the first lines: older SGLang prints vLLM-formatted lines
        ("INFO 05-14 13:49:25 [__init__.py:239] ...") before its own.
        """
        found = engine_of_line(raw)
        if found is not None and (found[1] or self.engine is None):
            if found[0] == self.engine:
                self._tentative = self._tentative and not found[1]
                return
            self.engine, self._tentative = found[0], not found[1]
        elif self.engine is None and self.line_no > _DETECT_LINES:
            self.engine, self._tentative = "generic", False
        else:
            self._tentative = self._tentative and self.line_no <= _TENTATIVE_LINES
            return
        self._select_rules()

    def skimmable(self) -> CompiledRules | None:
        """The rules in force when the fast lane (:mod:`toolkit.logs.skim`) may take the next line, else None:
        ready, no traceback open, engine settled."""
        settled = self._explicit_packs is not None or (self.engine is not None and not self._tentative)
        quiet = not self._groups and self._end_candidate is None
        return self._compiled if self.ready and settled and quiet else None

    def feed(self, line: str) -> list[LogEvent]:
        """Classify the next line (without its ``\\n``); returns the events it completes."""
        self.line_no += 1
        if (self.engine is None or self._tentative) and self._explicit_packs is None:
            self._detect(line)
        if not self._groups and self._held is None and self._by_shape:
            # the common line, read by its digit shape, learnt when seen twice (start-up chatter is not)
            key = line.encode("utf-8", "surrogatepass").translate(DIGIT_MASK)
            shape = self._shapes.get(key)
            if shape is None:
                if len(self._shapes) >= _MAX_SHAPES:
                    self._shapes.clear()
                self._shapes[key] = _UNSHAPED_YET
            elif shape is _UNSHAPED_YET:
                shape = self._shapes[key] = self._learn_shape(line)
            if shape is not None and shape is not _UNSHAPED and shape is not _UNSHAPED_YET:
                header, entry, recheck, reader = shape
                text, timestamp, rank, level = fields_at(line, header)
                if recheck and (hit := recheck_first(recheck, text)) >= 0:
                    entry, reader = recheck[hit][3], None  # a rule that reads digits decides this line
                match = None if entry is None else entry[5] if self.ready else entry[4]  # the rule's Match
                event = self._single(line, text, timestamp, rank, level, match, reader)
                return [event] if self.ready else self._emit(event)
        text, timestamp, rank, level = parse_fields(line)
        if self._held is not None:
            return self._after_held(self._held, _make_parsed(line, text, timestamp, rank, level))
        if self._groups or TB_START in text or (FRAME_LITERAL in text and is_frame(text)):
            return self._feed_grouping(_make_parsed(line, text, timestamp, rank, level))
        # a line without a common header (start-up chatter, a prefix added by what carried it)
        return self._emit(self._single(line, text, timestamp, rank, level, self._match(text) if text else None))

    def _emit(self, event: LogEvent) -> list[LogEvent]:
        """``[event]``, or nothing yet when it is an ERROR line no rule knows, before readiness: it waits one line."""
        if self.ready or event.rule != _ERROR_LEVEL_NAME or event.text[:1] in " \t":
            return [event]
        self._held = (event, _make_parsed(event.raw, event.text, event.timestamp, event.rank, event.level))
        return []

    def _after_held(self, held: tuple[LogEvent, ParsedLine], parsed: ParsedLine) -> list[LogEvent]:
        """The line after a held ERROR line: a traceback of the same process makes it that traceback's header line."""
        (event, message), text = held, parsed.text
        self._held = None
        if (text.startswith(TB_START) or is_frame(text)) and (parsed.rank, parsed.level) == (message.rank, message.level) \
                and parsed.rank not in self._groups:
            group = OpenTraceback(parsed.rank, message, event.line_no, None, [message.text, text])
            self._groups[parsed.rank] = self._last_group = group
            return []
        if self._groups or opens_traceback(text):
            return [event, *self._feed_grouping(parsed)]
        return [event, self._single(parsed.raw, text, parsed.timestamp, parsed.rank, parsed.level,
                                    self._match(text) if text else None)]

    def _learn_shape(self, line: str) -> _LineShape:
        """What every line with ``line``'s digit mask shares, or ``_UNSHAPED``: the general path."""
        header = header_shape(line)
        if header is None:
            return _UNSHAPED
        text = line[header[0]:].rstrip("\r\n")
        if opens_traceback(text):
            return _UNSHAPED
        first, recheck = match_shape(self._compiled, text, self._blind) if text else (-1, ())
        entry = self._compiled[first] if first >= 0 else None
        reader = metric_reader(text) if entry is not None and _METRIC in (entry[4].verdict, entry[5].verdict) else None
        return header, entry, recheck, reader

    def _feed_grouping(self, parsed: ParsedLine) -> list[LogEvent]:
        """A line that opens a traceback, or any line while one is open."""
        text = parsed.text
        events: list[LogEvent] = []
        if TB_START in text:
            key = parsed.rank
            group = self._groups.get(key)
            if group is not None and not text.startswith(TB_START):
                events.append(self._close(group, None))
            elif group is not None:  # chained or nested traceback: same group
                group.lines.append(text)
                return events
            header = self._match(text) if not text.startswith(TB_START) else None
            if header is None:
                prior = self._last_header.get(key)
                if prior is not None and prior[0] >= self.line_no - 2:
                    header = prior[1]
            self._groups[key] = self._last_group = OpenTraceback(key, parsed, self.line_no, header, [text])
            return events

        group = self._groups.get(parsed.rank)
        if group is None and parsed.rank is None:
            group = self._last_group
        if group is None and is_frame(text):  # a traceback whose header the log lost (cut, or another process's)
            self._groups[parsed.rank] = self._last_group = OpenTraceback(parsed.rank, parsed, self.line_no, None, [text], True)
            return events
        if group is not None:
            if not text or text[0] in " \t" or text.startswith(CHAINED) or text == "^" or is_frame(text):
                if len(group.lines) < _MAX_CONTEXT:
                    group.lines.append(text)
                self._last_group = group
                return events
            if EXCEPTION_LINE.match(text):
                events.append(self._close(group, (parsed, text)))
                return events
            events.append(self._close(group, None))
        events.append(self._single(parsed.raw, text, parsed.timestamp, parsed.rank, parsed.level,
                                   self._match(text) if text else None))
        return events

    def finish(self) -> list[LogEvent]:
        """Close what is still open (a traceback cut by the end of the file, a held ERROR line)."""
        held, self._held = self._held, None
        return ([held[0]] if held is not None else []) + [self._close(g, None) for g in list(self._groups.values())]

    def end_of_log(self) -> list[LogEvent]:
        """:meth:`finish` where nothing can follow: a traceback the log ends inside, or an engine process's
        traceback after readiness followed by nothing of that process, is its death."""
        self._at_end = True
        events = self.finish()
        candidate, self._end_candidate = self._end_candidate, None
        if candidate is not None:
            self.failed = True
            events.append(replace(candidate[0], verdict=_FATAL, rule=TRACEBACK_AT_END.name, hint=TRACEBACK_AT_END.hint))
        return events

    def _match(self, text: str) -> Match | None:
        return match_compiled(self._compiled, text, ready=self.ready)

    def _single(self, raw: str, text: str, timestamp: datetime | None, rank: str | None, level: str | None,
                match: Match | None, reader: MetricReader | None = None) -> LogEvent:
        if match is not None and match.verdict is _FATAL and text[:2] == "  " and not match.rule.reads_indent:
            # a frame or source line quoted from a cut traceback (`    raise RuntimeError("...`) states nothing yet
            match = None if not text.startswith(TERMINATE_WHAT) else match
        elif match is None and not (self.ready or self.startup_seen or self.failed) and REQUEST_NAMED.matches(text):
            match = _REQUEST_NAMED  # a record about a request the server accepted: it serves
        n = self.line_no
        if self._end_candidate is not None and rank == self._end_candidate[1]:
            self._end_candidate = None  # the process lives on
        metric: MetricRow | None = None
        evidence: str | None = None
        if match is not None:
            rule, verdict = match.rule, match.verdict
            if verdict is _METRIC and (self._parse_after_ready or not self.ready):
                metric = (metric_at(text, reader, line_no=n, timestamp=timestamp, rank=rank) if reader is not None
                          else parse_metric(text, line_no=n, timestamp=timestamp, rank=rank))
                if metric is None:
                    verdict = _INFO
            if rule.header:
                self._last_header[rank] = (n, match)
            if rule.phase is not None and rule.phase in _STARTUP_PHASES:
                self.startup_seen = True
            elif not self.ready and not self.startup_seen and rule.name in SERVING_RULES:
                verdict, evidence = _READY, SERVING_LINES  # joined mid-run: the server is serving
            if verdict is _READY and evidence is None:
                evidence = READY_LINE
        elif level in ("ERROR", "CRITICAL", "FATAL"):
            rule, verdict = _ERROR_LEVEL, Verdict.WARNING
        elif level == "WARNING":
            rule, verdict = _WARNING_LEVEL, Verdict.WARNING
        else:
            return _make_event(n, raw, text, timestamp, rank, level, _INFO, None, None, None, (), n, None, False, None,
                               request_mark(text))
        if verdict is _READY:
            self.ready = True
        elif verdict is _FATAL:
            self.failed = True
            self._end_candidate = None
        # serving lines stand for the ready line: they mark the `ready` phase (a driver probes faster from it)
        phase = Phase.READY if evidence is SERVING_LINES else rule.phase
        return _make_event(n, raw, text, timestamp, rank, level, verdict, rule.name, phase, metric, (), n,
                           rule.hint, verdict is _FATAL and bool(rule.notice), evidence, request_mark(text))

    def _close(self, group: OpenTraceback, exception: tuple[ParsedLine, str] | None) -> LogEvent:
        self._groups.pop(group.key, None)
        if self._last_group is group:
            self._last_group = next(reversed(self._groups.values()), None) if self._groups else None
        header = group.header
        exc_match = self._match(exception[1]) if exception is not None else None
        if exc_match is not None and exc_match.rule.name == "python_exception_line":
            exc_match = None  # the traceback default below says the same, with after-ready care
        default = default_rule(group, exception is not None, ready=self.ready, failed=self.failed,
                               at_end=self._at_end)
        chosen = choose(header, exc_match, default, ready=self.ready)
        hint = next((m.rule.hint for m in (exc_match, header, chosen) if m is not None and m.rule.hint), None)
        if exception is not None:
            parsed, line_no, context = exception[0], self.line_no, tuple(group.lines)
        else:  # cut short: the header line stands for the group
            parsed, line_no, context = group.first, group.first_line_no, tuple(group.lines[1:])
        verdict, rule = chosen.verdict, chosen.rule
        if verdict is _READY:
            self.ready = True
        elif verdict is _FATAL:
            self.failed = True
            self._end_candidate = None
        event = _make_event(line_no, parsed.raw, parsed.text, parsed.timestamp, group.first.rank or parsed.rank,
                            parsed.level, verdict, rule.name, rule.phase, None, context, group.first_line_no,
                            hint if hint is not None else rule.hint, verdict is _FATAL and bool(rule.notice),
                            READY_LINE if verdict is _READY else None, None)
        if self.ready and verdict is Verdict.WARNING and rule in (TRACEBACK, TRACEBACK_ENGINE_CUT) and is_engine_group(group):
            self._end_candidate = (event, group.key)
        return event


def classify_lines(lines: Iterable[str], engine: str = "auto", *, extra_rules: Iterable[Rule] = (),
                   packs: Sequence[RulePack] | None = None) -> list[LogEvent]:
    """Classify a whole log (batch form of :class:`LogClassifier`), events in line order.

    >>> [e.verdict.value for e in classify_lines(["INFO:     Application startup complete."], engine="vllm")]
    ['ready']
    """
    classifier = LogClassifier(engine=engine, packs=packs, extra_rules=extra_rules)
    events: list[LogEvent] = []
    for line in lines:
        events.extend(classifier.feed(line))
    events.extend(classifier.end_of_log())
    events.sort(key=lambda e: e.line_no)
    return events

"""Parse one raw log line: strip transport noise, then read the header (time, rank, level).

Real server logs arrive wrapped: ANSI colours, ``\\r``-redrawn progress bars glued to a record, and
prefixes added by whatever carried the line (docker compose, CI stamps, systemd, ray/vLLM process tags).
Each step is guarded by a literal test before any regex runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from toolkit.logs._construct import fast_constructor
from toolkit.logs.digits import digit_blind

__all__ = ["ParsedLine", "parse_line", "parse_fields", "text_and_level", "strip_ansi", "HEADER_PATTERNS",
           "HEADERS_DIGIT_BLIND", "HeaderShape", "header_shape", "fields_at"]

# CSI, OSC and APC (Buildkite's _bk;t=); and CSI in caret notation, as a terminal's escapes pasted into an issue read
# (`^[[1;36m(EngineCore_DP0 pid=1)^[[0;0m ERROR ...`)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[\]_][^\x07\x1b]*(?:\x07|\x1b\\)|\^\[\[[0-9;?]*[A-Za-z]")

# Outer prefixes, tried in order until none applies (a docker line can carry a CI stamp).
# An RFC 3339 stamp (docker --timestamps, CI), or Docker Desktop's log view `2025-02-06 07:14:10 ` (local time,
# no zone; not Python's `%(asctime)s - name - LEVEL - `, which _PYLOG reads).
_CI_STAMP = re.compile(
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|DEFAULT|NOTICE) )?\d{4}-\d\d-\d\d"
    r"(?:T\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)| \d\d:\d\d:\d\d(?= (?!- ))) "
)
_JOURNAL = re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.@/-]+(?:\[\d+\])?: ")
_COMPOSE = re.compile(r"[A-Za-z0-9][\w.-]*\s+\| ")
# Buildkite's timestamps `[2025-05-20T05:24:31Z] ` and `kubectl logs --prefix`'s `[pod/NAME/CONTAINER] `.
_BRACKET_PREFIX = re.compile(r"\[(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?|pod/[^\]\s/]+/[^\]\s]+)\] ?")
# A viewer's gutter in front of each line: `  | ` (a CI web view), a line number and a bar, k9s's `│ `.
_GUTTER = re.compile(r" {0,8}(?:\d+ {1,4})?[|│] ")
# Process tags: vLLM `(APIServer pid=1)`, `(EngineCore_DP0 pid=2)`, `(VllmWorker rank=1 pid=3)`,
# `(Worker_TP1 pid=4)`, ray `(pid=5)`, `(RayWorkerWrapper pid=6, ip=10.0.0.1)`,
# `(ServeReplica:default:LLMServer pid=7)`, `(raylet, ip=10.0.0.1)`; torch `[rank0]:`.
_PROC_TAG = re.compile(
    r"\((?P<tag>(?:[\w.:/-]+(?: [\w.-]+=[\w.-]+)*? )?pid=\d+(?:, ip=[\d.:a-f]+)?|raylet(?:, ip=[\d.:a-f]+)?)\)\s?"
)
_TORCH_RANK = re.compile(r"\[(rank\d+)\]:\s?")

# Record headers.
# SGLang: `[%(asctime)s{.%(msecs)03d with SGLANG_LOG_MS=1}{prefix}]`, the prefix made of ` DP0`, ` PP0`,
# ` ATTN_CP0`, ` MOE_DP0`, ` TP0`, ` EP0` (scheduler.py, 0.4.x-0.5.23) or ` encode_dp_worker[0]` (0.5.16+).
_SGLANG = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d{1,6})?"
    r"(?P<rank>(?: (?:ATTN_CP|ATTN_DP|MOE_DP|TP|DP|PP|EP|CP)\d+| encode_dp_worker\[\d+\]| encode_server)*)\] ?"
    r"(?:\[?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\]?:? (?![ ])(?:[\w./-]+\.py:\d+: )?)?"
)
_SGLANG_RANK_ONLY = re.compile(r"\[(?P<rank>(?:TP|DP|PP|EP|CP)\d+(?: (?:ATTN_CP|MOE_DP|TP|DP|PP|EP|CP)\d+)*)\] ?")
_VLLM = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? "
    r"(?:\[[\w./-]+:\d+\] ?|[\w./-]+:\d+\] ?)"
)
# Python's `%(asctime)s - %(name)s - %(levelname)s - ` (LMDeploy adds `[pid=N ppid=N] - ` and `%(filename)s:%(lineno)d - `)
_PYLOG = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? - [\w.\-<>]+ - (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
    r"(?:\[pid=\d+ ppid=\d+\] - )?(?:[\w.-]+\.py:\d+ - )?"
)
_UVICORN = re.compile(r"(?P<level>INFO|WARNING|ERROR|CRITICAL|DEBUG):\s+")
# Rust `tracing` (TGI launcher and router) after its RFC 3339 stamp: ` INFO shard-manager: text_generation_launcher: ...`
_TRACING = re.compile(r" ?(?P<level>TRACE|DEBUG| INFO| WARN|ERROR) ")
_GLOG = re.compile(r"(?P<level>[IWEF])(?P<md>\d{4}) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? +\d+ [\w./-]+:\d+\] ")
_C10 = re.compile(r"\[(?P<level>[IWEF])(?P<md>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? (?:\d+ )?[\w./-]+:\d+\] ")
# A record glued after a progress bar that ended without a newline: "...?it/s][2026-08-01 23:37:54] Parameter ...",
# "...1.50it/s](APIServer pid=1) INFO ...", "...it/s]vllm-1  | INFO 05-01 ...": the record starts at the bar's end.
_GLUED = re.compile(
    r"(?<=it/s\]|s/it\])(?=\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|\([\w.:-]+(?: [\w.-]+=[\w.-]+)*? ?pid=\d+"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:|[A-Za-z0-9][\w.-]*\s+\| |\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
)


def _renamed(regex: re.Pattern[str], **names: str) -> str:
    """``regex``'s pattern with named groups renamed (to combine patterns whose names clash)."""
    pattern = regex.pattern
    for old, new in names.items():
        pattern = pattern.replace(f"(?P<{old}>", f"(?P<{new}>")
    return pattern


# The headers a busy server prints most, each read by one match when the line carries no transport noise:
# each part is the general path's own regex, tried in the same order (atomic where the general path commits).
# SGLang: `[ts TP0] ...`, and uvicorn inside SGLang's logger when no level was printed.
_FAST_SGLANG = re.compile(f"{_SGLANG.pattern}(?(level)|(?:{_renamed(_UVICORN, level='uvicorn_level')})?)")
# vLLM and uvicorn, bare or under a process tag: `(APIServer pid=1) INFO 08-01 23:30:50 [x.py:1] ...`,
# `(APIServer pid=1) INFO:     127.0.0.1:1 - "GET /v1/models HTTP/1.1" 200 OK`; the general path
# reads a header only when more than 6 characters follow the tag (the lookahead).
_FAST_VLLM = re.compile(
    rf"(?>(?:{_PROC_TAG.pattern})?)(?=[\s\S]{{7}})"
    f"(?:{_renamed(_VLLM, level='vllm_level')}|{_renamed(_UVICORN, level='uvicorn_level')})"
)

# Every pattern parse_fields reads a line with: one line's reading holds for lines that differ only in digits
# while each is digit-blind (tests/test_logs_skim.py checks that the list is whole).
HEADER_PATTERNS = (_ANSI, _FAST_SGLANG, _FAST_VLLM, _GLUED, _BRACKET_PREFIX, _GUTTER, _CI_STAMP, _JOURNAL, _COMPOSE,
                   _PROC_TAG, _TORCH_RANK, _SGLANG, _UVICORN, _C10, _SGLANG_RANK_ONLY, _VLLM, _GLOG, _TRACING, _PYLOG)

#: parse_fields reads a line alike whatever its digits (checked once, at import; the shape memos rest on it)
HEADERS_DIGIT_BLIND = all(digit_blind(p.pattern, p.flags) for p in HEADER_PATTERNS)

_GLOG_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}
_TRACING_LEVEL = {"TRACE": "DEBUG", "DEBUG": "DEBUG", " INFO": "INFO", " WARN": "WARNING", "ERROR": "ERROR"}


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """One line with its transport layers removed.

    ``timestamp``'s year is 1900 when the engine prints none (vLLM); ``rank`` is the process or rank tag
    as printed (``TP5``, ``DP0 TP0``, ``EngineCore_DP0 pid=417364``).
    """

    raw: str
    text: str
    timestamp: datetime | None
    rank: str | None
    level: str | None


_make_parsed = fast_constructor(ParsedLine)


def strip_ansi(text: str) -> str:
    """Remove ANSI colour and cursor sequences."""
    return _ANSI.sub("", text) if "\x1b" in text or "^[[" in text else text


@lru_cache(maxsize=4096)
def _mmdd(md: str, hms: str) -> datetime | None:
    try:
        month, day = (int(md[:-2]), int(md[-2:])) if "-" not in md else (int(md[:2]), int(md[3:5]))
        return datetime(1900, month, day, int(hms[0:2]), int(hms[3:5]), int(hms[6:8]))
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _iso(ts: str) -> datetime | None:
    try:
        return datetime.fromisoformat(ts)
    except ValueError:
        return None


def parse_line(raw: str) -> ParsedLine:
    """Parse one line (without its ``\\n``).

    >>> p = parse_line("[2026-02-26 20:26:06 TP5] Ignore import error when loading x")
    >>> (p.rank, p.text)
    ('TP5', 'Ignore import error when loading x')
    """
    return _make_parsed(raw, *parse_fields(raw))


# A common header read as positions, alike for every line of one digit mask: (where the text starts, the
# level, the timestamp's spans, the rank's span, whether the rank is stripped).
HeaderShape = tuple[int, str | None, tuple[int, int, int, int] | None, tuple[int, int], bool]


def header_shape(raw: str) -> HeaderShape | None:
    """Where :func:`parse_fields` finds the fields of ``raw`` when it carries a common header and no
    transport noise; None otherwise.

    >>> header_shape("[2026-02-26 20:26:06 TP5] Decode batch. #running-req: 1")
    (26, None, (1, 20, -1, -1), (20, 24), True)
    """
    if "\x1b" in raw or "\r" in raw or "it/s]" in raw or "s/it]" in raw:
        return None
    if raw[:1] == "[":
        if (m := _FAST_SGLANG.match(raw)) is None:
            return None
        start, end = m.span("ts")
        return m.end(), m.group("level") or m.group("uvicorn_level"), (start, end, -1, -1), m.span("rank"), True
    if (m := _FAST_VLLM.match(raw)) is None:
        return None
    md, hms = m.span("md"), m.span("hms")
    stamp = (md[0], md[1], hms[0], hms[1]) if md[0] >= 0 else None
    return m.end(), m.group("vllm_level") or m.group("uvicorn_level"), stamp, m.span("tag"), False


def fields_at(raw: str, shape: HeaderShape) -> tuple[str, datetime | None, str | None, str | None]:
    """:func:`parse_fields` of ``raw``, read at the positions ``shape`` gives (``header_shape`` of a line with
    ``raw``'s digit mask)."""
    offset, level, stamp, (rank_start, rank_end), strip = shape
    if stamp is None:
        timestamp = None
    elif stamp[2] < 0:
        timestamp = _iso(raw[stamp[0]:stamp[1]])
    else:
        timestamp = _mmdd(raw[stamp[0]:stamp[1]], raw[stamp[2]:stamp[3]])
    if rank_start < 0:
        rank = None
    else:
        rank = (raw[rank_start:rank_end].strip() or None) if strip else raw[rank_start:rank_end]
    return raw[offset:].rstrip("\r\n"), timestamp, rank, level


def text_and_level(raw: str) -> tuple[str, str | None]:
    """``parse_fields(raw)``'s text and level only: the fast lane of a long log reads no timestamp.

    >>> text_and_level("[2026-02-26 20:26:06 TP5] Decode batch. #running-req: 1")
    ('Decode batch. #running-req: 1', None)
    """
    if (shape := header_shape(raw)) is not None:
        return raw[shape[0]:].rstrip("\n"), shape[1]
    text, _timestamp, _rank, level = parse_fields(raw)
    return text, level


def parse_fields(raw: str) -> tuple[str, datetime | None, str | None, str | None]:
    """:func:`parse_line`'s fields as a tuple ``(text, timestamp, rank, level)``: the classifier's
    hot path, which needs no :class:`ParsedLine` for a line that does not open a traceback."""
    if "\x1b" not in raw and "\r" not in raw and "it/s]" not in raw and "s/it]" not in raw:
        # the common headers in one match each (tests/test_logs_skim.py holds it equal to header_shape)
        if raw[:1] == "[":
            if (m := _FAST_SGLANG.match(raw)) is not None:
                ts, ranks, own_level, uvicorn_level = m.groups()  # (a new group fails this unpacking loudly)
                return raw[m.end():].rstrip("\r\n"), _iso(ts), ranks.strip() if ranks else None, own_level or uvicorn_level
        elif (m := _FAST_VLLM.match(raw)) is not None:
            tag, vllm_level, md, hms, uvicorn_level = m.groups()
            return raw[m.end():].rstrip("\r\n"), _mmdd(md, hms) if md else None, tag, vllm_level or uvicorn_level
    text = strip_ansi(raw)
    if text.endswith("\r"):
        text = text.rstrip("\r")
    if "\r" in text:  # a line redrawn with \r shows its last non-empty segment (as a terminal does)
        text = next((segment for segment in reversed(text.split("\r")) if segment.strip()), "")
    if "it/s]" in text or "s/it]" in text:
        glued = _GLUED.search(text, 1)
        if glued is not None:
            text = text[glued.start():]
    # transport prefixes (at most a few layers: a compose line can carry a CI stamp, a CI line a gutter)
    for _ in range(4):
        first = text[:1]
        m = None
        if first == "[":
            second = text[1:2]
            if second.isdigit() or second == "p":
                m = _BRACKET_PREFIX.match(text)
        elif first == "(":
            break
        elif first == " " or first == "│":
            if text.find("| ", 0, 16) > 0 or first == "│":
                m = _GUTTER.match(text)
        else:
            if first.isdigit() or first in "DIWEC":
                m = _CI_STAMP.match(text)
            if m is None and first.isupper() and len(text) > 16 and text[3] == " ":
                m = _JOURNAL.match(text)
            if m is None and text.find("| ", 0, 64) > 0:
                m = _COMPOSE.match(text) or (_GUTTER.match(text) if first.isdigit() else None)
        if m is None:
            break
        text = text[m.end():]

    rank: str | None = None
    # a process tag, or two: Ray's worker inside an EngineCore, `(EngineCore_0 pid=1) (RayWorkerWrapper pid=2) ERROR ...`
    # (the inner one is the writer)
    while text.startswith("(") and (m := _PROC_TAG.match(text)) is not None:
        rank = m.group(1)
        text = text[m.end():]
    if text.startswith("[rank"):
        m = _TORCH_RANK.match(text)
        if m:
            rank = rank or m.group(1)
            text = text[m.end():]

    timestamp: datetime | None = None
    level: str | None = None
    first = text[:1]
    if first == "[":
        m = _SGLANG.match(text)
        if m:
            ts, ranks, level = m.group(1, 2, 3)
            timestamp = _iso(ts)
            if ranks:
                rank = ranks.strip()
            text = text[m.end():]
            if level is None and (u := _UVICORN.match(text)) is not None:  # uvicorn inside SGLang's logger
                level = u.group(1)
                text = text[u.end():]
        elif (m := _C10.match(text)) is not None:
            level = _GLOG_LEVEL[m.group("level")]
            timestamp = _mmdd(m.group("md"), m.group("hms"))
            text = text[m.end():]
        elif (m := _SGLANG_RANK_ONLY.match(text)) is not None:
            rank = m.group("rank")
            text = text[m.end():]
    elif first in "DIWECF" and len(text) > 6:
        m = _VLLM.match(text)
        if m:
            level = m.group("level")
            timestamp = _mmdd(m.group("md"), m.group("hms"))
            text = text[m.end():]
        elif (m := _UVICORN.match(text)) is not None:
            level = m.group("level")
            text = text[m.end():]
        elif first in "IWEF" and (m := _GLOG.match(text)) is not None:
            level = _GLOG_LEVEL[m.group("level")]
            timestamp = _mmdd(m.group("md"), m.group("hms"))
            text = text[m.end():]
        elif first in "DE" and (m := _TRACING.match(text)) is not None:
            level = _TRACING_LEVEL[m.group("level")]
            text = text[m.end():]
    elif first == " " and (m := _TRACING.match(text)) is not None:
        level = _TRACING_LEVEL[m.group("level")]
        text = text[m.end():]
    elif first.isdigit() and (m := _PYLOG.match(text)) is not None:
        timestamp = _iso(m.group("ts"))
        level = m.group("level")
        text = text[m.end():]
        # a torch rank's prefix inside another logger's record: "... - lmdeploy - ERROR - [rank3]:   File ..."
        if text.startswith("[rank") and (m := _TORCH_RANK.match(text)) is not None:
            rank, text = m.group(1), text[m.end():]
        # a launcher that re-logs the server's lines: "... - INFO - [2025-03-07 23:50:27 TP0] msg"
        if text.startswith("[") and (m := _SGLANG.match(text)) is not None:
            timestamp = _iso(m.group("ts")) or timestamp
            if m.group("rank"):
                rank = m.group("rank").strip()
            text = text[m.end():]
    return text.rstrip("\r\n"), timestamp, rank, level

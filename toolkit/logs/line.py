"""Parse one raw log line: strip transport noise, then read the header (time, rank, level).

Real server logs arrive wrapped: ANSI colours, ``\\r``-redrawn progress bars glued to a
record, CRLF endings, and prefixes added by whatever carried the line (docker compose
``name  | ``, GitHub Actions ``2024-05-01T12:00:00.123Z ``, systemd journal, ray/vLLM
process tags such as ``(EngineCore_DP0 pid=417364)``). :func:`parse_line` removes the
transport layers and returns the record's own text plus the fields every engine prints.
Pure and cheap: each step is guarded by a literal test before any regex runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

__all__ = ["ParsedLine", "parse_line", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

# Outer prefixes, tried in order until none applies (a docker line can carry a CI stamp).
_CI_STAMP = re.compile(r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|DEFAULT|NOTICE) )?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d) ")
_JOURNAL = re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.@/-]+(?:\[\d+\])?: ")
_COMPOSE = re.compile(r"[A-Za-z0-9][\w.-]*\s+\| ")
# Process tags: vLLM `(APIServer pid=1)`, `(EngineCore_DP0 pid=2)`, `(VllmWorker rank=1 pid=3)`,
# `(Worker_TP1 pid=4)`, ray `(pid=5)`, `(RayWorkerWrapper pid=6, ip=10.0.0.1)`; torch `[rank0]:`.
_PROC_TAG = re.compile(r"\(((?:[\w.-]+(?: [\w.-]+=[\w.-]+)*? )?pid=\d+(?:, ip=[\d.:a-f]+)?)\)\s?")
_TORCH_RANK = re.compile(r"\[(rank\d+)\]:\s?")

# Record headers.
_SGLANG = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<rank>(?: (?:TP|DP|PP|EP|CP|MOE_DP|ATTN_DP)\d+)*)\] ?"
    r"(?:\[?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\]?:? (?![ ])(?:[\w./-]+\.py:\d+: )?)?"
)
_SGLANG_RANK_ONLY = re.compile(r"\[(?P<rank>(?:TP|DP|PP|EP|CP)\d+(?: (?:TP|DP|PP|EP|CP)\d+)*)\] ?")
_VLLM = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? "
    r"(?:\[[\w./-]+:\d+\] ?|[\w./-]+:\d+\] ?)"
)
_PYLOG = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? - [\w.\-<>]+ - (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
)
_UVICORN = re.compile(r"(?P<level>INFO|WARNING|ERROR|CRITICAL|DEBUG):\s+")
_GLOG = re.compile(r"(?P<level>[IWEF])(?P<md>\d{4}) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? +\d+ [\w./-]+:\d+\] ")
_C10 = re.compile(r"\[(?P<level>[IWEF])(?P<md>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? (?:\d+ )?[\w./-]+:\d+\] ")
# A record glued after a redrawn progress bar: "...?it/s][2026-08-01 23:37:54] Parameter ..."
_GLUED = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]")

_GLOG_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """One line with its transport layers removed.

    ``text`` is the record's message (what rules match), ``timestamp`` its time (year
    1900 when the engine does not print one, as vLLM does), ``rank`` the process or
    rank tag as printed (``TP5``, ``DP0 TP0``, ``EngineCore_DP0 pid=417364``), ``level``
    the log level in capitals when the line has one.
    """

    raw: str
    text: str
    timestamp: datetime | None
    rank: str | None
    level: str | None


def strip_ansi(text: str) -> str:
    """Remove ANSI colour and cursor sequences."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def _last_segment(text: str) -> str:
    """A line redrawn with ``\\r`` shows its last non-empty segment (what a terminal shows)."""
    if "\r" not in text:
        return text
    segments = [s for s in text.split("\r") if s.strip()]
    return segments[-1] if segments else ""


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
    text = strip_ansi(raw)
    if text.endswith("\r"):
        text = text.rstrip("\r")
    # transport prefixes (at most a few layers)
    for _ in range(3):
        first = text[:1]
        m = None
        if first.isdigit() or first in "DIWEC":
            m = _CI_STAMP.match(text)
        if m is None and first.isupper() and len(text) > 16 and text[3] == " ":
            m = _JOURNAL.match(text)
        if m is None and text.find("| ", 0, 64) > 0:
            m = _COMPOSE.match(text)
        if m is None:
            break
        text = text[m.end():]

    rank: str | None = None
    if text.startswith("("):
        m = _PROC_TAG.match(text)
        if m:
            rank = m.group(1)
            text = text[m.end():]
    if text.startswith("[rank"):
        m = _TORCH_RANK.match(text)
        if m:
            rank = rank or m.group(1)
            text = text[m.end():]

    text = _last_segment(text)
    if "it/s]" in text or "s/it]" in text:
        g = _GLUED.search(text, 1)
        if g:
            text = text[g.start():]

    timestamp: datetime | None = None
    level: str | None = None
    first = text[:1]
    if first == "[":
        m = _SGLANG.match(text)
        if m:
            timestamp = _iso(m.group("ts"))
            if m.group("rank"):
                rank = m.group("rank").strip()
            level = m.group("level")
            text = text[m.end():]
            if level is None and (u := _UVICORN.match(text)) is not None:  # uvicorn inside SGLang's logger
                level = u.group("level")
                text = text[u.end():]
        elif (m := _C10.match(text)) is not None:
            level = _GLOG_LEVEL[m.group("level")]
            timestamp = _mmdd(m.group("md"), m.group("hms"))
            text = text[m.end():]
        elif (m := _SGLANG_RANK_ONLY.match(text)) is not None:
            rank = m.group("rank")
            text = text[m.end():]
    elif first in "DIWEC" and len(text) > 6:
        m = _VLLM.match(text)
        if m:
            level = m.group("level")
            timestamp = _mmdd(m.group("md"), m.group("hms"))
            text = text[m.end():]
        elif (m := _UVICORN.match(text)) is not None:
            level = m.group("level")
            text = text[m.end():]
        elif first in "IWE" and (m := _GLOG.match(text)) is not None:
            level = _GLOG_LEVEL[m.group("level")]
            timestamp = _mmdd(m.group("md"), m.group("hms"))
            text = text[m.end():]
    elif first == "F" and (m := _GLOG.match(text)) is not None:
        level = "FATAL"
        timestamp = _mmdd(m.group("md"), m.group("hms"))
        text = text[m.end():]
    elif first.isdigit() and (m := _PYLOG.match(text)) is not None:
        timestamp = _iso(m.group("ts"))
        level = m.group("level")
        text = text[m.end():]
        # a launcher that re-logs the server's lines: "... - INFO - [2025-03-07 23:50:27 TP0] msg"
        if text.startswith("[") and (m := _SGLANG.match(text)) is not None:
            timestamp = _iso(m.group("ts")) or timestamp
            if m.group("rank"):
                rank = m.group("rank").strip()
            text = text[m.end():]
    return ParsedLine(raw=raw, text=text.rstrip("\r\n"), timestamp=timestamp, rank=rank, level=level)

"""What a Python traceback in a server log is, and whose it is.

Pure: where one starts, which line is its exception, the rules its event gets when no line rule decides,
and whether it came from an engine process (a scheduler rank, an EngineCore, a worker) or from a request.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from toolkit.logs.line import ParsedLine
from toolkit.logs.rules import SEVERITY, Match, Rule, Verdict

__all__ = ["TB_START", "EXCEPTION_LINE", "CHAINED", "TRACEBACK", "TRACEBACK_CUT", "TRACEBACK_ENGINE_CUT",
           "TRACEBACK_AT_END", "TERMINATE_WHAT", "ENGINE_RANK", "FRAME_LITERAL", "is_frame", "opens_traceback",
           "from_engine_process", "OpenTraceback", "is_engine_group", "default_rule", "choose"]

TB_START = "Traceback (most recent call last)"
# A Python frame line: the structure of every traceback, whatever carried it and whether or not its
# `Traceback (most recent call last):` header survived (CPython 3.8-3.14 Lib/traceback.py StackSummary.format_frame_summary:
# `'  File "{}", line {}, in {}\n'`). faulthandler's dumps print `  File "x.py", line 5 in f` (no comma: a watchdog's
# stack dump, not an exception) and do not match. A quote mark may lead (a message quoted by Triton's or a wrapper's logger).
FRAME_LITERAL = 'File "'
_FRAME = re.compile(r'[ \t]*"?[ \t]*File "[^"]+", line \d+, in \S')
# Inside a traceback, the first unindented line naming a (dotted) class is the exception line:
# "KeyError: 'x'", "torch.OutOfMemoryError: CUDA out of memory", "AssertionError", "BackendCompilerFailed: ...".
# Ray names a task's error after its cause's class: "ray.exceptions.RayTaskError(AttributeError): ..." (ray/exceptions.py,
# RayTaskError.as_instanceof_cause, Ray 1.x-2.x).
EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:\([\w.]+\))?(?::\s|:$|$)")
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")

TRACEBACK = Rule("python_traceback", r"^$", Verdict.FATAL, after_ready=Verdict.WARNING,
                  hint="an unhandled Python exception: read the exception line and the frames above it")
TRACEBACK_CUT = Rule("python_traceback_incomplete", r"^$", Verdict.WARNING)
# A traceback from an engine process (a scheduler rank, an EngineCore, a worker) that the log cuts off before its
# exception line, during start-up: the process is dying; the header line stands for it (the end may never come).
TRACEBACK_ENGINE_CUT = Rule("engine_traceback_incomplete", r"^$", Verdict.FATAL, after_ready=Verdict.WARNING,
                             hint="an engine process raised during start-up and the log ends inside its traceback: "
                                  "read the frames quoted, and the rest of the log if you have it")
# A traceback the log ends inside, or one of an engine process after readiness after which the process wrote
# nothing more, when nothing follows in the log: the process died there (issue 24: a wrapper's `- __main__ - INFO -`
# prefix that kept only the frames, an EngineCore's traceback as the last words of a log).
TRACEBACK_AT_END = Rule("traceback_ends_log", r"^$", Verdict.FATAL,
                        hint="the log ends with this traceback: the process that raised it wrote nothing after it "
                             "and died; read the frames and the exception line")
# The entry function of an engine process, as a traceback's frame names it: vLLM V0's MQLLMEngine process
# (`run_mp_engine`, engine/multiprocessing/engine.py 0.6.6 :354, 0.10.0 :437), V1's EngineCore (`run_engine_core`,
# v1/engine/core.py 0.8.5 :353, 0.33.0 :1462), an SGLang scheduler rank (`run_scheduler_process`, 0.4.0-0.5.23).
_ENGINE_ENTRY = re.compile(r", in (?:run_mp_engine|run_engine_core|run_scheduler_process)$")
# std::terminate's message line, indented by libstdc++ itself (libsupc++/vterminate.cc, __verbose_terminate_handler:
# `fputs("  what():  ", stderr)`): it states the failure, it is no quoted source line.
TERMINATE_WHAT = "  what():  "
# Process tags that name an engine process: SGLang rank tags, vLLM's EngineCore/worker tags, Ray workers, torch ranks.
ENGINE_RANK = re.compile(r"^(?:(?:ATTN_CP|ATTN_DP|MOE_DP|TP|DP|PP|EP|CP)\d+ ?)+$|EngineCore|Worker|rank\d|rank=")


def is_frame(text: str) -> bool:
    """``text`` is a Python traceback's frame line (``  File "x.py", line 5, in f``), under any prefix left."""
    return FRAME_LITERAL in text and _FRAME.match(text) is not None


def opens_traceback(text: str) -> bool:
    """``text`` opens a traceback: its header, or a frame line whose header the log lost."""
    return TB_START in text or (FRAME_LITERAL in text and _FRAME.match(text) is not None)


def from_engine_process(lines: Sequence[str]) -> bool:
    """A traceback whose first frame is a program's ``<module>`` (nothing above it can catch) or
    ``python -m``'s ``File "<frozen runpy>"`` (CPython 3.11+), or that passes an engine process's entry."""
    first = next((line.rstrip() for line in lines[:3] if is_frame(line)), "")  # a header or message line may lead
    if first.endswith("in <module>") or '"<frozen runpy>"' in first:
        return True
    return any(_ENGINE_ENTRY.search(line.rstrip()) for line in lines)


@dataclass
class OpenTraceback:
    """A traceback still being read, with the header rule that announced it (``... hit an exception``)."""

    key: str | None
    first: ParsedLine
    first_line_no: int
    header: Match | None
    lines: list[str] = field(default_factory=list)
    headerless: bool = False  # opened by a frame line: the log lost its `Traceback (most recent call last):`


def is_engine_group(group: OpenTraceback) -> bool:
    """The traceback came from an engine process: its process tag or its frames say so."""
    return (group.key is not None and ENGINE_RANK.search(group.key) is not None) or from_engine_process(group.lines)


def default_rule(group: OpenTraceback, complete: bool, *, ready: bool, failed: bool, at_end: bool) -> Rule:
    """The rule a traceback's event gets when no line rule is more severe: unhandled (``complete``); the log's
    last words when nothing had failed yet; cut short by an engine process; or cut short elsewhere. Frames
    whose header the log lost, cut short by another line (a terminal's wrap), state nothing yet."""
    if complete:
        return TRACEBACK
    engine = is_engine_group(group)
    if at_end and not failed and ready and engine:
        return TRACEBACK_AT_END
    if at_end and not failed and group.headerless and not ready:
        return TRACEBACK_ENGINE_CUT if engine else TRACEBACK_AT_END
    if group.headerless:
        return TRACEBACK_CUT
    return TRACEBACK_ENGINE_CUT if engine else TRACEBACK_CUT


def choose(header: Match | None, exception: Match | None, default: Rule, *, ready: bool) -> Match:
    """A benign header or exception line makes it benign; else the most severe of the exception line's rule,
    the header's and the default's (the first of equals wins)."""
    if header is not None and header.verdict is Verdict.BENIGN:
        return header
    if exception is not None and exception.verdict is Verdict.BENIGN:
        return exception
    candidates = [m for m in (exception, header) if m is not None]
    candidates.append(Match(default, default.verdict_for(ready)))
    return max(candidates, key=lambda m: SEVERITY[m.verdict])

"""What a Python traceback in a server log is, and whose it is.

Pure. :class:`~toolkit.logs.classify.LogClassifier` groups a traceback's lines into one event;
this module holds what it needs to know about them: where one starts, which line is its exception,
the rules a traceback's event is given when no line rule decides it, and whether it came from an
engine process (a scheduler rank, an EngineCore, a worker: a death during start-up) or from a request.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from toolkit.logs.line import ParsedLine
from toolkit.logs.rules import Match, Rule, Verdict

__all__ = ["TB_START", "EXCEPTION_LINE", "CHAINED", "TRACEBACK", "TRACEBACK_CUT", "TRACEBACK_ENGINE_CUT",
           "TERMINATE_WHAT", "ENGINE_RANK", "from_engine_process", "OpenTraceback"]

TB_START = "Traceback (most recent call last)"
# Inside a traceback, the first unindented line naming a (dotted) class is the exception line:
# "KeyError: 'x'", "torch.OutOfMemoryError: CUDA out of memory", "AssertionError", "BackendCompilerFailed: ...".
EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s|:$|$)")
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")

TRACEBACK = Rule("python_traceback", r"^$", Verdict.FATAL, after_ready=Verdict.WARNING,
                  hint="an unhandled Python exception: read the exception line and the frames above it")
TRACEBACK_CUT = Rule("python_traceback_incomplete", r"^$", Verdict.WARNING)
# A traceback from an engine process (a scheduler rank, an EngineCore, a worker) that the log cuts off before its
# exception line, during start-up: the process is dying; the header line stands for it (the end may never come).
TRACEBACK_ENGINE_CUT = Rule("engine_traceback_incomplete", r"^$", Verdict.FATAL, after_ready=Verdict.WARNING,
                             hint="an engine process raised during start-up and the log ends inside its traceback: "
                                  "read the frames quoted, and the rest of the log if you have it")
# The entry function of an engine process, as a traceback's frame names it: vLLM V0's MQLLMEngine process
# (`run_mp_engine`, engine/multiprocessing/engine.py 0.6.6 :354, 0.10.0 :437), V1's EngineCore (`run_engine_core`,
# v1/engine/core.py 0.8.5 :353, 0.33.0 :1462), an SGLang scheduler rank (`run_scheduler_process`, 0.4.0-0.5.23).
_ENGINE_ENTRY = re.compile(r", in (?:run_mp_engine|run_engine_core|run_scheduler_process)$")
# std::terminate's message line, indented by libstdc++ itself (libsupc++/vterminate.cc, __verbose_terminate_handler:
# `fputs("  what():  ", stderr)`): it states the failure, it is no quoted source line.
TERMINATE_WHAT = "  what():  "
# Process tags that name an engine process: SGLang rank tags, vLLM's EngineCore/worker tags, Ray workers, torch ranks.
ENGINE_RANK = re.compile(r"^(?:(?:ATTN_CP|ATTN_DP|MOE_DP|TP|DP|PP|EP|CP)\d+ ?)+$|EngineCore|Worker|rank\d|rank=")


def from_engine_process(lines: Sequence[str]) -> bool:
    """A traceback whose first frame is a program's ``<module>`` (the main process itself is raising, nothing
    above it can catch: ``File "/opt/venv/bin/vllm", line 33, in <module>``), or one that passes through an
    engine process's entry function (``File ".../engine.py", line 391, in run_mp_engine``)."""
    start = next((i for i, line in enumerate(lines[:2]) if line.startswith(TB_START)), 0)  # a message line may lead
    if len(lines) > start + 1 and lines[start + 1].rstrip().endswith("in <module>"):
        return True
    return any(_ENGINE_ENTRY.search(line.rstrip()) for line in lines[start + 1:])


@dataclass
class OpenTraceback:
    """A traceback still being read: the process (rank) it belongs to, its first line, the header rule
    that announced it (``Scheduler hit an exception``), and its lines so far."""

    key: str | None
    first: ParsedLine
    first_line_no: int
    header: Match | None
    lines: list[str] = field(default_factory=list)

"""A torch profiler trace (Chrome trace JSON, as Kineto writes it) -> the GPU kernels it ran. Pure.

- **inside a CUDA graph**: a kernel of a graph replay shares its correlation id with the CPU's
  ``cudaGraphLaunch`` (CUPTI gives every node of a graph launch the launch's id); Kineto from 2026-02
  (pytorch/kineto 1a72dcae) also writes a non-zero ``"graph id"`` in the kernel's args;
- **the phase**: the Python frames that enclosed the launch (``with_stack=True``, SGLang's default:
  sglang 0.5.9 managers/scheduler_profiler_mixin.py:180) matched against :data:`PHASE_RULES`, the most
  specific winning (a verify replayed from a CUDA graph is ``verify``). SGLang's ``profile_by_stage`` files
  name their stage (``...-TP-0-EXTEND.trace.json.gz``, same file :268-288): that is the default.

>>> trace = {"traceEvents": [
...     {"ph": "X", "cat": "python_function", "name": "sglang/srt/speculative/eagle_worker.py(691): verify",
...      "pid": 1, "tid": 1, "ts": 0, "dur": 100},
...     {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
...      "args": {"correlation": 7}},
...     {"ph": "X", "cat": "kernel", "name": "void attn<1>(float*)", "pid": 0, "tid": 7, "ts": 20, "dur": 30,
...      "args": {"correlation": 7, "stream": 7}}]}
>>> [(k.short_name, k.phase, k.in_graph, k.dur_us) for k in kernel_calls(trace)]
[('attn', 'verify', False, 30.0)]
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["KernelCall", "PhaseRule", "PHASE_RULES", "STAGE_PHASES", "load_trace", "kernel_calls", "short_kernel_name",
           "stage_of_filename", "trace_marks"]

_KERNEL_CATS = {"kernel", "Kernel"}
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
_CPU_CATS = {"python_function", "user_annotation", "cpu_op", "Operator"}
# Kineto rounds ts and dur to the nanosecond each: a frame and the sibling after it can "overlap" by that much.
_TOUCH_US = 0.005


@dataclass(frozen=True)
class PhaseRule:
    """A CPU frame or annotation whose presence around a launch names the kernel's phase."""

    pattern: str  # a regular expression searched in the event's name
    phase: str
    source: str  # where the engine defines that function

    @property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


PHASE_RULES: tuple[PhaseRule, ...] = (
    # most specific first: speculative decoding's steps, then the model runner's modes
    PhaseRule(r"eagle_worker(?:_v2)?\.py\(\d+\): verify$", "verify", "sglang 0.5.9 speculative/eagle_worker.py:691"),
    PhaseRule(r"eagle_worker(?:_v2)?\.py\(\d+\): forward_draft_extend", "draft_extend",
              "sglang 0.5.9 speculative/eagle_worker.py:862, 902"),
    PhaseRule(r"eagle_worker(?:_v2)?\.py\(\d+\): (?:draft|draft_forward)$", "draft",
              "sglang 0.5.9 speculative/eagle_worker.py:532, 615"),
    PhaseRule(r"eagle_worker(?:_v2)?\.py\(\d+\): forward_target_extend$", "prefill",
              "sglang 0.5.9 speculative/eagle_worker.py:357"),
    PhaseRule(r"model_runner\.py\(\d+\): forward_extend$", "prefill", "sglang 0.5.9 model_executor/model_runner.py:2307"),
    PhaseRule(r"model_runner\.py\(\d+\): forward_decode$", "decode", "sglang 0.5.9 model_executor/model_runner.py:2284"),
    PhaseRule(r"cuda_graph_runner\.py\(\d+\): replay$", "decode",
              "sglang 0.5.9 model_executor/cuda_graph_runner.py:846 (decode batches replay graphs)"),
    PhaseRule(r"(?:eagle|spec_decode).*\.py\(\d+\): propose", "draft", "vllm 0.33.0 v1/spec_decode/eagle.py (propose)"),
    # transformers serve without continuous batching: generate() -> _sample(), whose first forward is _prefill()
    PhaseRule(r"transformers/generation/utils\.py\(\d+\): _prefill$", "prefill",
              "transformers 5.24.0 generation/utils.py:4283 (called from _sample :3208)"),
    PhaseRule(r"transformers/generation/utils\.py\(\d+\): _sample$", "decode",
              "transformers 5.24.0 generation/utils.py:3123"),
    PhaseRule(r"continuous_batching/continuous_api\.py\(\d+\): _generation_step$", "batched step",
              "transformers 5.24.0 generation/continuous_batching/continuous_api.py:635 (prefill and decode mixed)"),
)
"""Frames that name a phase, most specific first. Extend it for another engine's frames."""

STAGE_PHASES = {"EXTEND": "prefill", "PREFILL": "prefill", "DECODE": "decode", "TARGET_VERIFY": "verify"}
"""SGLang's stage suffixes (``ForwardMode`` names) -> phases."""


@dataclass(frozen=True)
class KernelCall:
    """One GPU kernel the trace recorded."""

    name: str
    ts_us: float
    dur_us: float
    in_graph: bool
    phase: str  # "" when the trace does not say
    stream: int | None = None
    device: int | None = None

    @property
    def short_name(self) -> str:
        return short_kernel_name(self.name)


@lru_cache(maxsize=4096)
def short_kernel_name(name: str) -> str:
    """``void flashinfer::BatchDecodeKernel<8u, bf16>(Params)`` -> ``flashinfer::BatchDecodeKernel``."""
    text = re.sub(r"^(?:void|__global__ void)\s+", "", name.strip())
    depth, out = 0, []
    for char in text:  # drop template arguments and the parameter list, which can nest
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(char)
    short = "".join(out).strip() or text
    return short if len(short) <= 90 else short[:87] + "..."


# Kineto writes a Python frame's name unescaped, one key a line: torch 2.13.0+cpu wrote
# `"name": "encodings/unicode_escape.py(0): "id"",` into a CPU server's trace (make test, 2026-12-07).
_KINETO_NAME = re.compile(r'^(\s*"name": ")(.*)(",)$', re.MULTILINE)


def _escaped_name(match: re.Match[str]) -> str:
    """A name line as JSON: as it is when its value reads, else its value escaped whole (backslashes too)."""
    try:
        json.loads(f'"{match.group(2)}"')
        return match.group(0)
    except ValueError:
        return match.group(1) + json.dumps(match.group(2), ensure_ascii=False)[1:-1] + match.group(3)


def load_trace(data: bytes) -> dict[str, Any]:
    """Parse a trace file's bytes (gzip or plain JSON); raises ValueError naming what is wrong.

    A name Kineto left unescaped is escaped (the file itself stays as the engine wrote it).
    """
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ValueError(f"the trace is a truncated or corrupt gzip file ({exc})") from None
    try:
        trace = json.loads(data)
    except ValueError as exc:
        try:
            trace = json.loads(_KINETO_NAME.sub(_escaped_name, data.decode("utf-8", "replace")))
        except ValueError:
            raise ValueError(f"the trace is not JSON ({exc}); was it still being written?") from None
    if isinstance(trace, list):  # the bare-array form of the Chrome trace format
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError("the file is JSON but not a Chrome trace (no traceEvents list)")
    return trace


def stage_of_filename(filename: str) -> str:
    """The phase SGLang's ``profile_by_stage`` wrote into a trace's file name, or ``""``."""
    match = re.search(r"-(EXTEND|PREFILL|DECODE|TARGET_VERIFY)\.trace\.json", filename)
    return STAGE_PHASES[match.group(1)] if match else ""


def trace_marks(trace: Mapping[str, Any]) -> dict[str, Any]:
    """What the trace says of itself: ``simulated`` (the toolkit's simulator wrote it), devices, ranks."""
    devices = trace.get("deviceProperties") or []
    names = sorted({str(d.get("name")) for d in devices if isinstance(d, dict) and d.get("name")})
    info = trace.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    return {"simulated": bool(trace.get("toolkit_sim")), "devices": names, "rank": info.get("rank"),
            "world_size": info.get("world_size")}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _rule_index(name: str, rules: Sequence[PhaseRule], cache: dict[str, int]) -> int:
    if name not in cache:
        cache[name] = next((i for i, rule in enumerate(rules) if rule.regex.search(name)), len(rules))
    return cache[name]


def _launch_phases(events: Iterable[Mapping[str, Any]], rules: Sequence[PhaseRule]) -> tuple[dict[int, int], set[int]]:
    """correlation id -> index of the most specific rule enclosing its launch; graph-launch correlations."""
    cpu: dict[Any, list[tuple[float, float, int]]] = {}
    launches: dict[Any, list[tuple[float, int]]] = {}
    graph: set[int] = set()
    cache: dict[str, int] = {}
    for event in events:
        cat, ts = event.get("cat"), _number(event.get("ts"))
        if ts is None or event.get("ph") not in ("X", None):
            continue
        key = (event.get("pid"), event.get("tid"))
        if cat in _LAUNCH_CATS:
            args = event.get("args") or {}
            correlation = args.get("correlation")
            if isinstance(correlation, int):
                launches.setdefault(key, []).append((ts, correlation))
                if "GraphLaunch" in str(event.get("name", "")):
                    graph.add(correlation)
        elif cat in _CPU_CATS:
            index = _rule_index(str(event.get("name", "")), rules, cache)
            if index < len(rules):
                cpu.setdefault(key, []).append((ts, ts + (_number(event.get("dur")) or 0.0), index))
    phases: dict[int, int] = {}
    for key, points in launches.items():
        spans = sorted(cpu.get(key, []), key=lambda s: (s[0], -s[1]))
        stack: list[tuple[float, int]] = []  # (end, most specific rule so far)
        position = 0
        for ts, correlation in sorted(points):
            while position < len(spans) and spans[position][0] <= ts:
                start, end, index = spans[position]
                while stack and stack[-1][0] <= start + _TOUCH_US:
                    stack.pop()
                stack.append((end, min(index, stack[-1][1]) if stack else index))
                position += 1
            while stack and stack[-1][0] <= ts + _TOUCH_US:  # a frame that ended as the launch came encloses nothing
                stack.pop()
            if stack:
                phases[correlation] = stack[-1][1]
    return phases, graph


def kernel_calls(trace: Mapping[str, Any], *, rules: Sequence[PhaseRule] = PHASE_RULES,
                 default_phase: str = "") -> list[KernelCall]:
    """Every kernel of the trace with its graph membership and phase, in time order."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
    phases, graph = _launch_phases(events, rules)
    out = []
    for event in events:
        if event.get("cat") not in _KERNEL_CATS:
            continue
        ts, dur = _number(event.get("ts")), _number(event.get("dur"))
        if ts is None or dur is None:
            continue
        args = event.get("args") or {}
        correlation = args.get("correlation")
        graph_id = _number(args.get("graph id"))
        in_graph = bool(graph_id) or (isinstance(correlation, int) and correlation in graph)
        index = phases.get(correlation) if isinstance(correlation, int) else None
        phase = rules[index].phase if index is not None else default_phase
        stream, device = args.get("stream"), args.get("device")
        out.append(KernelCall(str(event.get("name", "")), ts, dur, in_graph, phase,
                              stream if isinstance(stream, int) else None,
                              device if isinstance(device, int) else None))
    out.sort(key=lambda k: k.ts_us)
    return out

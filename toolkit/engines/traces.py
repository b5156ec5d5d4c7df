"""The torch trace files each engine release writes, by name: which are a rank's, which the front end's.

``tk.profile`` waits for these names; the simulator writes them. The first real vLLM run (issue 23,
vLLM 0.25.0) waited 300 s for ``..._tp0_...`` while the engine had written ``rank0.<ns>.pt.trace.json.gz``
and ``vm_<pid>.async_llm.<ns>.pt.trace.json.gz`` (torch names ``{worker_name}.{time_ns}.pt.trace.json``).

>>> trace_rank("vllm", "0.25.0", "rank0.1764640000123456789.pt.trace.json.gz")
0
>>> is_frontend_trace("vllm", "0.25.0", "vm_4242.async_llm.1764640000123456789.pt.trace.json.gz")
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from toolkit.engines.versions import ReleaseRange

__all__ = ["TraceName", "TRACE_NAMES", "trace_names", "trace_rank", "is_frontend_trace", "trace_file_name"]


@dataclass(frozen=True)
class TraceName:
    """One file name an engine release writes: a rank's trace or the front end's CPU trace."""

    engine: str
    releases: ReleaseRange
    kind: Literal["rank", "frontend"]
    pattern: str  # a regular expression; a rank trace names the group ``rank``
    template: str  # what the simulator writes: {rank}, {host}, {pid}, {ns}, {ms}, {prefix}
    source: str

    def match(self, name: str) -> re.Match[str] | None:
        return re.fullmatch(self.pattern, name)


_GZ = r"(?:\.gz)?"
TRACE_NAMES: tuple[TraceName, ...] = (
    # vLLM 0.25.0: GPUWorker.profile names its trace get_worker_rank_suffix(global_rank=rank) (gpu_worker.py:1060-1076);
    # that function's fallback is "rank{r}" (distributed/utils.py:696-730), and the real 0.25.0 on one H200 wrote
    # rank0.<ns>.pt.trace.json.gz (issue 23, 2026-12-01). A --profiler-config torch_profiler_prefix goes first (:1065).
    TraceName("vllm", ReleaseRange("0.25.0", "0.26.0"), "rank",
              r"(?:.+_)?rank(?P<rank>\d+)\.\d+\.pt\.trace\.json" + _GZ, "rank{rank}.{ns}.pt.trace.json.gz",
              "vllm 0.25.0 vllm/v1/worker/gpu_worker.py:1060-1076, vllm/distributed/utils.py:696-730"),
    # vLLM 0.25.0 AsyncLLM's CPU trace: worker_name = f"{socket.gethostname()}_{os.getpid()}.async_llm"
    # (vllm/v1/engine/async_llm.py:187-196); written unless profiler_config.ignore_frontend.
    TraceName("vllm", ReleaseRange("0.14.0", None), "frontend",
              r".+_\d+\.async_llm\.\d+\.pt\.trace\.json" + _GZ, "{host}_{pid}.async_llm.{ns}.pt.trace.json.gz",
              "vllm 0.25.0 vllm/v1/engine/async_llm.py:187-196"),
    # vLLM after 0.25 (the simulator's 0.33.0): the full suffix dp{d}_pp{p}_tp{t}_dcp{c}_ep{e}_rank{r}
    # (vllm/profiler/wrapper.py:266, vllm/distributed/utils.py:757).
    TraceName("vllm", ReleaseRange("0.26.0", None), "rank",
              r"(?:.+_)?dp\d+_pp\d+_tp(?P<rank>\d+)_dcp\d+_ep\d+(?:_rank\d+)?\.\d+\.pt\.trace\.json" + _GZ,
              "dp0_pp0_tp{rank}_dcp0_ep0_rank{rank}.{ms}.pt.trace.json.gz",
              "vllm 0.33.0 vllm/profiler/wrapper.py:266, vllm/distributed/utils.py:757"),
    # vLLM before 0.25: the names the toolkit matched before issue 23 (``..._tp{rank}_...``). NOT yet checked
    # against a release's source line: kept so that traces of older releases still match; see docs/engine-releases.md.
    TraceName("vllm", ReleaseRange(None, "0.25.0"), "rank",
              r".*_tp(?P<rank>\d+)_.*\.pt\.trace\.json" + _GZ, "dp0_pp0_tp{rank}_rank{rank}.{ms}.pt.trace.json.gz",
              "vllm < 0.25 UNVERIFIED: the toolkit's match before issue 23, no source line read"),
    # SGLang: each TP rank writes [{prefix}-]{profile_id}-TP-{rank}[-DP-{d}][-PP-{p}][-EP-{e}][-{STAGE}].trace.json.gz,
    # the DP/PP/EP parts only when that size is over 1, the stage with profile_by_stage; profile_id defaults to
    # str(time.time()) (sglang 0.5.9 python/sglang/srt/managers/scheduler_profiler_mixin.py:268-293; the same in
    # 0.5.17, moved to python/sglang/srt/managers/scheduler_components/profiler_manager.py:312-342, the id at
    # python/sglang/srt/managers/tokenizer_control_mixin.py:384). 0.5.17 with SGLANG_PROFILE_V2=1 (default off,
    # srt/environ.py:317) names its files elsewhere: not read.
    TraceName("sglang", ReleaseRange(None, None), "rank",
              r"(?:.+-)?[^-]+-TP-(?P<rank>\d+)(?:-[^.]*)?\.trace\.json" + _GZ,
              "{prefix}{ms}-TP-{rank}.trace.json.gz",
              "sglang 0.5.9 python/sglang/srt/managers/scheduler_profiler_mixin.py:268-293; sglang 0.5.17 "
              "python/sglang/srt/managers/scheduler_components/profiler_manager.py:312-342"),
)


def trace_names(engine: str, version: str | None) -> tuple[TraceName, ...]:
    """The names ``engine`` writes at ``version``; every known name of the engine when the release is unknown."""
    names = tuple(n for n in TRACE_NAMES if n.engine == engine)
    if version is None:
        return names
    return tuple(n for n in names if version in n.releases) or names


def trace_rank(engine: str, version: str | None, name: str) -> int | None:
    """The TP rank whose trace ``name`` is, or None (a front-end trace, another file)."""
    for known in trace_names(engine, version):
        found = known.match(name)
        if found is not None and known.kind == "rank":
            return int(found.group("rank"))
    return None


def is_frontend_trace(engine: str, version: str | None, name: str) -> bool:
    """Whether ``name`` is the engine's front-end CPU trace (vLLM's ``async_llm``)."""
    return any(n.kind == "frontend" and n.match(name) for n in trace_names(engine, version))


def trace_file_name(engine: str, version: str | None, rank: int, *, host: str, pid: int, ns: int,
                    prefix: str = "", kind: Literal["rank", "frontend"] = "rank") -> str | None:
    """The name ``engine`` at ``version`` gives a trace (for the simulator), or None when it writes no such file."""
    for known in trace_names(engine, version):
        if known.kind == kind and (version is None or version in known.releases):
            return known.template.format(rank=rank, host=host, pid=pid, ns=ns, ms=ns // 1_000_000, prefix=prefix)
    return None

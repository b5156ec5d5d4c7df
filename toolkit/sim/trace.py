"""Chrome-trace JSON shaped like a torch profiler trace of SGLang (or vLLM), from the simulator's steps. Pure.

Kineto's event format (pytorch/kineto libkineto/src/CuptiActivity.cpp, output_json.cpp): Python frames
(``with_stack``), ``cudaLaunchKernel`` per eager kernel or one ``cudaGraphLaunch`` per replay, and kernels
sharing their launch's ``correlation`` (a graph's with a non-zero ``graph id``). The frames are SGLang
0.5.9's own (file:line in ``_FRAMES``). The seed incident's premise: ``--speculative-attention-mode
prefill`` verifies eagerly with prefill attention, ``decode`` replays a CUDA graph. Every trace says it
is simulated (``toolkit_sim``, and the device name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["StepRecord", "TraceShape", "build_trace", "trace_json_for_rank"]

_RMS = "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, " \
       "__nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)"
_QKV = "nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNT"
_OPROJ = "nvjet_tst_64x32_64x16_4x1_v_bz_TNT"
_DECODE_ATTN = "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 8u, " \
               "16u, 4u, 1u, flashinfer::DefaultAttention<false, false, false, false>, " \
               "flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >(...)"
_PREFILL_ATTN = "void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<" \
                "(flashinfer::MaskMode)1, 128u, 1u, 4u, 8u, 8u, 1u, 4u, (flashinfer::PosEncodingMode)0, " \
                "__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int, flashinfer::DefaultAttention<false, " \
                "false, false, false> >, flashinfer::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, " \
                "__nv_bfloat16, int> >(...)"
_CUSTOM_AR = "void sglang::cross_device_reduce_1stage<__nv_bfloat16, 8>(sglang::RankData*, sglang::RankSignals, " \
             "sglang::Signal*, __nv_bfloat16*, int, int)"
_NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_MOE = "fused_moe_kernel"
_ACT = "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*, " \
       "__nv_bfloat16 const*, int)"
_LM_HEAD = "nvjet_tst_256x128_64x4_2x1_v_bz_coopB_TNT"
_SAMPLE = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, " \
          "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"

# (kernel, share of a layer's GPU time); attention and all-reduce depend on the mode
_LAYER = ((_RMS, 0.05), (_QKV, 0.17), (None, 0.14), (_OPROJ, 0.08), ("allreduce", 0.13), (_MOE, 0.36), (_ACT, 0.07))

_SG = "sglang/srt"
_FRAMES = {
    "run_batch": f"{_SG}/managers/scheduler.py(2045): run_batch",
    "spec": f"{_SG}/speculative/eagle_worker.py(278): forward_batch_generation",
    "tp": f"{_SG}/managers/tp_worker.py(365): forward_batch_generation",
    "forward": f"{_SG}/model_executor/model_runner.py(2387): forward",
    "raw": f"{_SG}/model_executor/model_runner.py(2443): _forward_raw",
    "extend": f"{_SG}/model_executor/model_runner.py(2307): forward_extend",
    "decode": f"{_SG}/model_executor/model_runner.py(2284): forward_decode",
    "replay": f"{_SG}/model_executor/cuda_graph_runner.py(846): replay",
    "draft": f"{_SG}/speculative/eagle_worker.py(532): draft",
    "draft_forward": f"{_SG}/speculative/eagle_worker.py(615): draft_forward",
    "draft_replay": f"{_SG}/speculative/eagle_draft_cuda_graph_runner.py(319): replay",
    "verify": f"{_SG}/speculative/eagle_worker.py(691): verify",
    "draft_extend": f"{_SG}/speculative/eagle_worker.py(902): forward_draft_extend_after_decode",
    "target_extend": f"{_SG}/speculative/eagle_worker.py(357): forward_target_extend",
    "vllm_execute": "vllm/v1/worker/gpu_model_runner.py(2571): execute_model",
    "vllm_propose": "vllm/v1/spec_decode/eagle.py(231): propose",
}


@dataclass(frozen=True)
class StepRecord:
    """One scheduler step the profiler saw: when it ran (epoch s; steps never overlap) and what it was."""

    kind: str  # "prefill" or "decode"
    start_s: float
    end_s: float
    batch_size: int


@dataclass(frozen=True)
class TraceShape:
    """What decides the trace's structure: the launch's configuration."""

    engine: str  # "sglang" or "vllm"
    num_layers: int
    cuda_graph: bool
    speculative_steps: int  # 0 without speculative decoding
    verify_in_extend: bool
    draft_ms: float  # all draft steps of one speculative step
    tp_size: int


class _Writer:
    def __init__(self, t0: float, pid: int) -> None:
        self.t0, self.pid, self.tid = t0, pid, pid
        self.events: list[dict[str, object]] = []
        self.correlation = 1000
        self.graph_id = 0
        self.python_id = 0

    def us(self, t_s: float) -> float:
        return round((t_s - self.t0) * 1e6, 3)

    def frames(self, keys: str, start_s: float, end_s: float) -> None:
        """Nested Python frames over [start, end], outermost first (``keys`` of ``_FRAMES``)."""
        ts, dur = self.us(start_s), round((end_s - start_s) * 1e6, 3)
        for key in keys.split():
            self.python_id += 1
            self.events.append({"ph": "X", "cat": "python_function", "name": _FRAMES[key], "pid": self.pid,
                                "tid": self.tid, "ts": ts, "dur": dur,
                                "args": {"Python id": self.python_id, "Python thread": 0}})

    def kernels(self, names: list[tuple[str, float]], start_s: float, end_s: float, graph: bool) -> None:
        """Kernels of one forward, laid over [start, end]: one graph launch, or one launch per kernel."""
        offset = min(12e-6, max(end_s - start_s, 1e-6) * 0.05)
        span = max(end_s - start_s - 2 * offset, 1e-6)  # every launch stays inside its frame
        total = sum(w for _, w in names) or 1.0
        if graph:
            self.graph_id += 1
            self._launch("cudaGraphLaunch", 311, start_s + offset / 2)
        at = start_s + offset
        for node, (name, weight) in enumerate(names):
            slot = span * weight / total
            if not graph:
                self._launch("cudaLaunchKernel", 211, at)
            busy = slot * (0.96 if graph else 0.55)  # eager: the GPU waits for each launch
            self.events.append({
                "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": self.us(at + 5e-6),
                "dur": round(busy * 1e6, 3),
                "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": self.correlation,
                         "registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.0,
                         "warps per SM": 8.0, "grid": [132, 1, 1], "block": [256, 1, 1],
                         "est. achieved occupancy %": 25, "graph id": self.graph_id if graph else 0,
                         "graph node id": node + 1 if graph else 0}})
            at += slot

    def _launch(self, name: str, cbid: int, at_s: float) -> None:
        self.correlation += 1
        args = {"cbid": cbid, "correlation": self.correlation}
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": self.pid, "tid": self.tid,
                            "ts": self.us(at_s), "dur": 4.2, "args": args})


def _forward(layers: int, attention: str, allreduce: str, head: bool = True) -> list[tuple[str, float]]:
    names = [(attention if n is None else allreduce if n == "allreduce" else n, w)
             for _ in range(layers) for n, w in _LAYER]
    return names + ([(_LM_HEAD, 0.5), (_SAMPLE, 0.1)] if head else [])


def _decode_step(w: _Writer, shape: TraceShape, start: float, end: float) -> None:
    """A plain decode step (no speculation): a CUDA graph replay, or eager when graphs are off."""
    graph = shape.cuda_graph
    w.frames(f"run_batch tp forward raw {'replay' if graph else 'decode'}", start, end)
    w.kernels(_forward(shape.num_layers, _DECODE_ATTN, _CUSTOM_AR if graph else _NCCL_AR), start, end, graph)


def _spec_step(w: _Writer, shape: TraceShape, start: float, end: float) -> None:
    """draft (graph) -> verify (extend: eager; decode: graph) -> draft extend, in SGLang's frames."""
    duration = end - start
    draft_end = start + min(shape.draft_ms / 1000.0, duration * 0.4)
    verify_end = end - duration * 0.04
    w.frames("run_batch spec", start, end)
    w.frames("draft", start, draft_end)
    step = (draft_end - start) / max(shape.speculative_steps, 1)
    for i in range(shape.speculative_steps):
        s = start + i * step
        w.frames("draft_forward draft_replay", s, s + step)
        w.kernels(_forward(1, _DECODE_ATTN, _CUSTOM_AR), s, s + step, shape.cuda_graph)
    eager = shape.verify_in_extend or not shape.cuda_graph
    w.frames(f"verify forward raw {'extend' if eager else 'replay'}", draft_end, verify_end)
    attention = _PREFILL_ATTN if shape.verify_in_extend else _DECODE_ATTN
    w.kernels(_forward(shape.num_layers, attention, _NCCL_AR if eager else _CUSTOM_AR), draft_end, verify_end,
              not eager)
    w.frames("draft_extend", verify_end, end)
    w.kernels(_forward(1, attention, _CUSTOM_AR), verify_end, end, not eager)


def _prefill_step(w: _Writer, shape: TraceShape, start: float, end: float) -> None:
    """New requests: the extend path, eagerly (SGLang captures no graph for prefill)."""
    worker = "spec target_extend" if shape.speculative_steps else "tp"
    w.frames(f"run_batch {worker} forward raw extend", start, end)
    w.kernels(_forward(shape.num_layers, _PREFILL_ATTN, _NCCL_AR), start, end, False)


def _vllm_step(w: _Writer, shape: TraceShape, step: StepRecord, start: float, end: float) -> None:
    w.frames("vllm_execute", start, end)
    graph = shape.cuda_graph and step.kind == "decode"
    attention = _DECODE_ATTN if step.kind == "decode" else _PREFILL_ATTN
    if shape.speculative_steps and step.kind == "decode":
        split = start + (end - start) * 0.8
        w.kernels(_forward(shape.num_layers, attention, _CUSTOM_AR), start, split, graph)
        w.frames("vllm_propose", split, end)
        w.kernels(_forward(1, _DECODE_ATTN, _CUSTOM_AR, head=False), split, end, graph)
        return
    w.kernels(_forward(shape.num_layers, attention, _CUSTOM_AR if graph else _NCCL_AR), start, end, graph)


def build_trace(shape: TraceShape, steps: list[StepRecord], *, t0: float, pid: int, rank: int,
                note: str) -> dict[str, object]:
    """The whole trace of one rank for the recorded steps (events in Kineto's layout)."""
    w = _Writer(t0, pid)
    for step in steps:
        start, end = step.start_s, step.end_s
        if shape.engine == "vllm":
            _vllm_step(w, shape, step, start, end)
        elif step.kind == "prefill":
            _prefill_step(w, shape, start, end)
        elif shape.speculative_steps:
            _spec_step(w, shape, start, end)
        else:
            _decode_step(w, shape, start, end)
    meta: list[dict[str, object]] = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "python"}},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"name": "thread_name", "ph": "M", "ts": 0, "pid": 0, "tid": 7, "args": {"name": "stream 7"}}]
    device = {"id": 0, "name": "NVIDIA H200 (simulated by toolkit.sim)", "totalGlobalMem": 150754820096,
              "computeMajor": 9, "computeMinor": 0, "numSms": 132}
    return {"schemaVersion": 1, "deviceProperties": [device],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": shape.tp_size},
            "record_shapes": 0, "with_stack": 1, "toolkit_sim": {"simulated": True, "note": note},
            "traceEvents": meta + w.events, "displayTimeUnit": "ms", "baseTimeNanoseconds": int(t0 * 1e9)}


def trace_json_for_rank(rank0_json: str, rank: int, pid0: int, pid: int) -> str:
    """Rank ``rank``'s file from rank 0's text: the same steps, its own pid and rank (cheap for TP 8)."""
    if rank == 0:
        return rank0_json
    text = rank0_json.replace(f'"pid": {pid0},', f'"pid": {pid},')
    return text.replace('"distributedInfo": {"backend": "nccl", "rank": 0,',
                        f'"distributedInfo": {{"backend": "nccl", "rank": {rank},')


def dumps(trace: dict[str, object]) -> str:
    return json.dumps(trace, separators=(", ", ": "))

"""What to try after a failure, spelled with the flags the detected release really has.

The log rule packs' generic hints say "lower --cuda-graph-max-bs", a flag gone in SGLang 0.5.20
(``ambiguous option``) and never in vLLM. Here a family ("OOM", "CUDA_GRAPH") has a text per engine
and release range; a contract test checks every flag against the captured releases of its range.

>>> hint_text("sglang", "CUDA_GRAPH", "0.5.23").split(": ")[1][:60]
'retry with --disable-cuda-graph to confirm, then lower --cuda-'
>>> "--enforce-eager" in hint_text("vllm", "CRASH", "0.33.0")
True
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.engines.versions import ReleaseRange, Version, VersionError, parse_version

__all__ = ["ReleaseHint", "RELEASE_HINTS", "hint_text"]


@dataclass(frozen=True)
class ReleaseHint:
    """The hint of ``family`` for ``engine`` releases in ``releases``; ``source`` names the flag's release line."""

    engine: str
    family: str
    releases: ReleaseRange
    text: str
    source: str


_ANY = ReleaseRange(None, None)
_SG_CG_OLD = ReleaseRange(None, "0.5.14")  # --cuda-graph-max-bs the option (0.5.13 server_args.py:6507)
_SG_CG_NEW = ReleaseRange("0.5.14", None)  # --cuda-graph-max-bs-decode (0.5.14 server_args.py:6359; old name gone in 0.5.20)
_SG_FLAGS = "sglang flag lists, toolkit/engines/flags/sglang-*.txt"
_VL_FLAGS = "vllm flag lists, toolkit/engines/flags/vllm-*.txt"
_SG_ADVICE = "sglang 0.5.23 python/sglang/srt/model_executor/runner_backend_utils/__init__.py:14-20"

RELEASE_HINTS: tuple[ReleaseHint, ...] = (
    ReleaseHint("sglang", "OOM", _SG_CG_OLD,
                "GPU memory ran out: lower --mem-fraction-static, or --cuda-graph-max-bs, --max-running-requests, "
                "--context-length; check that no other process holds GPU memory (nvidia-smi)", _SG_FLAGS),
    ReleaseHint("sglang", "OOM", _SG_CG_NEW,
                "GPU memory ran out: lower --mem-fraction-static, or --cuda-graph-max-bs-decode, "
                "--max-running-requests, --context-length; check that no other process holds GPU memory "
                "(nvidia-smi)", _SG_FLAGS),
    ReleaseHint("sglang", "KV_TOO_SMALL", _ANY,
                "the KV cache cannot hold one request of the configured length: lower --context-length, give the "
                "cache more memory (--mem-fraction-static), or use more GPUs (--tp-size)", _SG_FLAGS),
    ReleaseHint("sglang", "STATIC_TOO_SMALL", _ANY,
                "--mem-fraction-static leaves the KV cache no room once the weights are loaded: raise "
                "--mem-fraction-static (SGLang's own advice), or use more GPUs (--tp-size); check that no other "
                "process holds GPU memory (nvidia-smi)", _SG_FLAGS),
    ReleaseHint("vllm", "STATIC_TOO_SMALL", _ANY,
                "--gpu-memory-utilization leaves the KV cache no room once the weights are loaded: raise "
                "--gpu-memory-utilization, or use more GPUs (--tensor-parallel-size); check that no other process "
                "holds GPU memory (nvidia-smi)", _VL_FLAGS),
    ReleaseHint("sglang", "CUDA_GRAPH", _SG_CG_OLD,
                "CUDA graph capture failed: retry with --disable-cuda-graph to confirm, then lower "
                "--cuda-graph-max-bs or raise memory headroom (lower --mem-fraction-static)", _SG_FLAGS),
    ReleaseHint("sglang", "CUDA_GRAPH", _SG_CG_NEW,
                "CUDA graph capture failed: retry with --disable-cuda-graph to confirm, then lower "
                "--cuda-graph-max-bs-decode (e.g. 16) or disable decode CUDA graphs only with "
                "--cuda-graph-backend-decode disabled (SGLang's own advice)", _SG_ADVICE),
    ReleaseHint("vllm", "OOM", _ANY,
                "GPU memory ran out: lower --gpu-memory-utilization, or --max-num-seqs, --max-model-len; check "
                "that no other process holds GPU memory (nvidia-smi)", _VL_FLAGS),
    ReleaseHint("vllm", "KV_TOO_SMALL", _ANY,
                "the KV cache cannot hold one request of the configured length: lower --max-model-len, give the "
                "cache more memory (--gpu-memory-utilization), or use more GPUs (--tensor-parallel-size)", _VL_FLAGS),
    ReleaseHint("vllm", "CRASH", _ANY,
                "a native crash: note the library in the stack, try --enforce-eager (no CUDA graphs), and check "
                "driver versions", _VL_FLAGS),
    ReleaseHint("vllm", "CUDA_GRAPH", ReleaseRange(None, "0.12.0"),
                "CUDA graph capture failed: retry with --enforce-eager to confirm, then lower --max-num-seqs or "
                "raise memory headroom (lower --gpu-memory-utilization)", _VL_FLAGS),
    ReleaseHint("vllm", "CUDA_GRAPH", ReleaseRange("0.12.0", None),
                "CUDA graph capture failed: retry with --enforce-eager to confirm, then lower "
                "--max-cudagraph-capture-size or --max-num-seqs, or raise memory headroom (lower "
                "--gpu-memory-utilization)", _VL_FLAGS),
    ReleaseHint("vllm", "WATCHDOG", _ANY,
                "a rank stopped making progress: dump its stacks (py-spy dump --pid PID) and check NCCL "
                "(NCCL_DEBUG=INFO) on every rank", _VL_FLAGS),
    ReleaseHint("vllm", "MODEL", _ANY,
                "the model could not be found or read: check the model of `vllm serve MODEL`, HF_TOKEN for gated "
                "repos, and that the host can reach the hub or has the files locally", _VL_FLAGS),
    ReleaseHint("vllm", "ARCH", _ANY,
                "this GPU or model is not supported by this build: check vLLM's supported models and the GPU's "
                "compute capability, or try a newer release", _VL_FLAGS),
    ReleaseHint("sglang", "MODEL", _ANY,
                "the model could not be found or read: check --model-path, HF_TOKEN for gated repos, and that the "
                "host can reach the hub or has the files locally", _SG_FLAGS),
)


def hint_text(engine: str, family: str, version: str | Version | None) -> str | None:
    """This release's hint for ``family`` (unreadable ``version``: the newest range); None: the generic."""
    try:
        parsed = None if version is None else (version if isinstance(version, Version) else parse_version(version))
    except VersionError:
        parsed = None
    matches = [h for h in RELEASE_HINTS if h.engine == engine and h.family == family]
    if parsed is None:
        newest = [h for h in matches if h.releases.high is None]
        return newest[0].text if newest else None
    return next((h.text for h in matches if parsed in h.releases), None)

"""Start-up scripts: which lines each simulated SGLang process prints, when, and how it ends. Pure.

A `Script` is data (offsets from the process's start, text, style) that a worker plays. Phase lengths
are fractions of `--sim-startup-s`, so a short test start looks like a long real one.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.sim import faults
from toolkit.sim.args import SimConfig
from toolkit.sim.release_logs import capture_lines, graph_capture_advice

__all__ = ["Line", "Phases", "Script", "max_total_tokens", "model_architecture", "phases", "sglang_preamble",
           "sglang_server_args", "sglang_worker_script"]

GLMASR_LINE = ("Ignore import error when loading sglang.srt.models.glmasr: cannot import name 'GlmAsrConfig' "
               f"from 'transformers' ({faults.SITE}/transformers/__init__.py)")
TOTAL_GB = 139.81  # one H200, as torch reports it
KV_RESERVE_GB = 4.0  # of the static budget, kept from the KV cache (activations, graphs): the simulator's guess


@dataclass(frozen=True)
class Line:
    """One log record: `style` "log" gets the engine's prefix, "plain" is printed as is."""

    at_s: float
    text: str
    style: str = "log"
    level: str = "info"
    source: str = ""  # vLLM's `[file.py:line]`


@dataclass(frozen=True)
class Script:
    """A process's start-up: its lines, then `outcome` at `outcome_at_s`: ready, fail or hang."""

    lines: tuple[Line, ...]
    outcome: str
    outcome_at_s: float


@dataclass(frozen=True)
class Phases:
    """Start-up phase lengths in seconds (see docs/simulator.md)."""

    pre: float
    dist: float
    weights: float
    draft: float
    kv: float
    graph: float

    @property
    def worker_total(self) -> float:
        return self.dist + self.weights + self.draft + self.kv + self.graph


def phases(config: SimConfig) -> Phases:
    s = config.startup_s
    return Phases(pre=0.05 * s, dist=0.05 * s, draft=0.05 * s if config.speculation else 0.0, kv=0.05 * s,
                  weights=0.35 * s + (config.slow_start_s if config.fault == "slow-start" else 0.0),
                  graph=(0.2 * s + (0.05 * s if config.speculation else 0.0)) if config.cuda_graph else 0.0)


def model_architecture(model_path: str) -> tuple[str, float]:
    """(architecture, total weight GB) guessed from the model name, for the load lines."""
    name = model_path.lower()
    if any(k in name for k in ("kimi", "deepseek")):
        return "DeepseekV3ForCausalLM", 579.2
    if "qwen" in name:
        return "Qwen3ForCausalLM", 61.1
    return "LlamaForCausalLM", 16.1


def _bs_list(max_bs: int) -> list[int]:
    return [b for b in (1, 2, 4, 8, 12) if b <= max_bs] + list(range(16, max_bs + 1, 8))


def _progress(label: str, steps: int, start: float, span: float) -> list[Line]:
    """tqdm bars as SGLang's TP0 prints them: each redraw starts with a carriage return."""
    rate = f"{steps / max(span, 1e-3):5.2f}it/s"
    lines = [Line(start + span * k / steps, f"\r{label}: {int(100 * k / steps):3d}% Completed | {k}/{steps} "
                  f"[00:{int(span * k / steps):02d}<00:00, {rate}]", style="plain") for k in range(steps + 1)]
    return lines + [Line(start + span, "", style="plain")]


def sglang_preamble(config: SimConfig) -> list[str]:
    """Messages the main process logs before it spawns the schedulers (the caller adds prefixes)."""
    out = []
    if config.speculative_algorithm:
        out.append(f"Max running requests is reset to {min(config.cuda_graph_max_bs, 48)} for speculative "
                   "decoding. You can override this by explicitly setting --max-running-requests.")
    if not config.cuda_graph:
        out.append("Disable cuda graph. This may slow down the performance.")
    return out


def _fails(lines: list[Line], at: float, tb: list[str]) -> Script:
    """The rank logs `Scheduler hit an exception: <traceback>` at `at` and fails."""
    failure = Line(at, "Scheduler hit an exception: " + "\n".join(tb), level="error")
    return Script(tuple(lines + [failure]), "fail", at)


def sglang_worker_script(config: SimConfig, rank: int, pid: int) -> Script:
    """The scheduler process of TP rank `rank`: distributed init, weights, KV cache, CUDA graphs."""
    ph = phases(config)
    tp = config.tp_size
    fail_here = config.fault_rank == rank
    jitter = 0.002 * rank
    lines = [Line(jitter, "Init torch distributed begin.")]
    t = ph.dist
    if config.fault == "hang":
        return Script(tuple(lines), "hang", jitter)
    if tp > 1:
        lines.append(Line(0.6 * t, f"[Gloo] Rank {rank} is connected to {tp - 1} peer ranks. Expected number of "
                                   f"connected peer ranks is : {tp - 1}", style="plain"))
    if rank == 0:
        lines.append(Line(0.7 * t, "sglang is using nccl==2.27.5"))
    if config.fault == "nccl":
        if fail_here:
            return _fails(lines, t, faults.sglang_init_traceback("nccl", rank, pid))
        return Script(tuple(lines), "hang", t)
    lines.append(Line(t + jitter, f"Init torch distributed ends. elapsed={t:.2f} s, mem usage=0.23 GB"))
    # Every rank prints the benign glmasr import error (real log 029); TP5's copy comes last, as in the seed.
    glm_last = 5 if tp > 5 else tp - 1
    lines.append(Line(t + 0.01 * config.startup_s + (0.03 * config.startup_s if rank == glm_last else jitter),
                      GLMASR_LINE, level="warning"))
    t += 0.04 * config.startup_s
    arch, weights_total = model_architecture(config.model_path)
    avail = pre_load_gb = TOTAL_GB - 1.3 - 0.03 * (rank % 3)
    weights = weights_total / tp
    lines.append(Line(t + jitter, f"Load weight begin. avail mem={avail:.2f} GB"))
    span = ph.weights - 0.04 * config.startup_s
    if rank == 0:
        lines += _progress("Loading safetensors checkpoint shards", 8, t + 0.1 * span, 0.85 * span)
    t += span
    if config.fault == "oom" and fail_here:
        return _fails(lines, t, faults.sglang_init_traceback("oom", rank, pid))
    if config.fault == "scheduler-traceback" and not config.cuda_graph and fail_here:
        return _fails(lines, t, faults.sglang_init_traceback("weights", rank, pid))
    avail -= weights
    lines.append(Line(t + jitter, f"Load weight end. elapsed={ph.weights:.2f} s, type={arch}, dtype=torch.bfloat16, "
                                  f"avail mem={avail:.2f} GB, mem usage={weights:.2f} GB."))
    if config.fault in ("oom", "scheduler-traceback") and not (config.fault == "scheduler-traceback" and config.cuda_graph):
        return Script(tuple(lines), "hang", t)  # the others wait in the next collective until killed
    if config.speculation:
        t += ph.draft
        lines.append(Line(t - 0.8 * ph.draft + jitter, f"Load weight begin. avail mem={avail:.2f} GB"))
        avail -= 0.96
        lines.append(Line(t + jitter, f"Load weight end. elapsed={ph.draft:.2f} s, type=LlamaForCausalLMEagle3, "
                                      f"dtype=torch.bfloat16, avail mem={avail:.2f} GB, mem usage=0.96 GB."))
    # What the static budget leaves the KV cache once the weights are in; too little fails as SGLang does
    # (faults.sglang_kv_budget_traceback). The others wait in the next collective until killed.
    rest_gb = avail - (1.0 - config.mem_fraction_static) * TOTAL_GB
    if rest_gb <= KV_RESERVE_GB:
        if not fail_here:
            return Script(tuple(lines), "hang", t)
        # the ValueError for weights over the budget: read in 0.5.17 (mem_cache/kv_cache_configurator.py:1639-1655)
        # and 0.5.23; before 0.5.17 (not read): only "Not enough memory. Please try to increase --mem-fraction-static."
        weights_fit = rest_gb > 0 or not config.release.at_least("0.5.17")
        tb = faults.sglang_kv_budget_traceback(config.mem_fraction_static, avail, pre_load_gb, weights_fit)
        return _fails(lines, t + 0.5 * ph.kv, tb)
    t += ph.kv
    kv_gb = max(rest_gb - KV_RESERVE_GB, 1.0) / 2
    tokens = int(kv_gb * 1e9 / (61 * 128 * 2))
    if rank == 0:
        lines.append(Line(t - 0.5 * ph.kv, "Using KV cache dtype: torch.bfloat16"))
    lines.append(Line(t + jitter, f"KV Cache is allocated. #tokens: {tokens}, K size: {kv_gb:.2f} GB, V size: {kv_gb:.2f} GB"))
    avail -= 2 * kv_gb
    lines.append(Line(t + jitter, f"Memory pool end. avail mem={avail:.2f} GB"))
    if config.cuda_graph:
        bs = _bs_list(config.cuda_graph_max_bs)
        begin, end = capture_lines(config.release, "target", bs, avail - 0.55, 0.8 * ph.graph, 0.33)
        lines.append(Line(t + jitter, begin))
        if rank == 0 and config.release.at_least("0.4.6") and not config.release.at_least("0.5.14"):
            lines.append(Line(t + 0.001, f"Capture cuda graph bs {bs}"))  # cuda_graph_runner.py:299 in 0.5.9
        graph_end = t + (0.8 if config.speculation else 1.0) * ph.graph
        if config.fault == "scheduler-traceback":
            if fail_here:
                tb = faults.sglang_graph_capture_traceback(graph_capture_advice(config.release))
                return _fails(lines, t + 0.5 * ph.graph, tb)
            return Script(tuple(lines), "hang", t)
        lines.append(Line(graph_end + jitter, end))
        if config.speculation:
            begin, end = capture_lines(config.release, "draft", bs, avail - 0.88, 0.2 * ph.graph, 0.12)
            lines.append(Line(graph_end + jitter, begin))
            lines.append(Line(t + ph.graph + jitter, end))
        t += ph.graph
    if rank == 0:
        lines.append(Line(t + 0.002, f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, "
                                     f"max_prefill_tokens=16384, max_running_requests={config.cuda_graph_max_bs}, "
                                     f"context_len={config.context_length}, available_gpu_mem={avail - 1.0:.2f} GB"))
    return Script(tuple(lines), "ready", t + 0.004)


def max_total_tokens(config: SimConfig) -> int:
    """KV cache capacity in tokens (TP0's `max_total_num_tokens`), as the start-up lines report it."""
    _, weights_total = model_architecture(config.model_path)
    avail = TOTAL_GB - 1.3 - weights_total / config.tp_size - (0.96 if config.speculation else 0.0)
    kv_gb = max(avail - (1.0 - config.mem_fraction_static) * TOTAL_GB - KV_RESERVE_GB, 1.0) / 2
    return int(kv_gb * 1e9 / (61 * 128 * 2))


def sglang_server_args(config: SimConfig) -> dict[str, object]:
    """The ServerArgs fields SGLang dumps at start and returns from /get_server_info."""
    ns = config.namespace
    return {
        "model_path": config.model_path, "tokenizer_path": ns.get("tokenizer_path") or config.model_path,
        "tokenizer_mode": "auto", "skip_tokenizer_init": False, "load_format": "auto",
        "trust_remote_code": ns.get("trust_remote_code", False), "context_length": ns.get("context_length"),
        "is_embedding": False, "revision": None, "host": config.host, "port": config.port,
        "skip_server_warmup": False, "dtype": ns.get("dtype", "auto"), "quantization": ns.get("quantization"),
        "kv_cache_dtype": ns.get("kv_cache_dtype", "auto"), "mem_fraction_static": config.mem_fraction_static,
        "max_running_requests": ns.get("max_running_requests"), "chunked_prefill_size": ns.get("chunked_prefill_size") or 8192,
        "max_prefill_tokens": 16384, "schedule_policy": "fcfs", "device": "cuda", "tp_size": config.tp_size,
        "pp_size": 1, "stream_interval": 1, "random_seed": ns.get("random_seed"),
        "watchdog_timeout": ns.get("watchdog_timeout"), "dist_timeout": ns.get("dist_timeout"),
        "served_model_name": config.served_model_name, "log_level": config.log_level,
        "log_level_http": ns.get("log_level_http"), "decode_log_interval": config.decode_log_interval,
        "enable_metrics": ns.get("enable_metrics", False), "dp_size": 1, "dist_init_addr": ns.get("dist_init_addr"),
        "nnodes": ns.get("nnodes", 1), "node_rank": ns.get("node_rank", 0),
        "attention_backend": ns.get("attention_backend") or "flashinfer",
        "speculative_algorithm": config.speculative_algorithm,
        "speculative_draft_model_path": config.speculative_draft_model_path,
        "speculative_num_steps": ns.get("speculative_num_steps"), "speculative_eagle_topk": ns.get("speculative_eagle_topk"),
        "speculative_num_draft_tokens": ns.get("speculative_num_draft_tokens"),
        "speculative_attention_mode": ns.get("speculative_attention_mode", "prefill"),
        "disable_radix_cache": ns.get("disable_radix_cache", False), "disable_cuda_graph": not config.cuda_graph,
        "cuda_graph_max_bs": config.cuda_graph_max_bs, "enable_nccl_nvls": config.enable_nccl_nvls,
        "api_key": ns.get("api_key"),
    }

"""Start-up scripts of the simulated vLLM processes: APIServer (the server), EngineCore, Worker_TPn. Pure.

Formats follow real vLLM 0.25 logs (../shared/real-logs/058, 067); the process prefix (`(Worker_TP1 pid=N)`)
is in the log format from 0.33 (vllm/logger.py:28-31); with TP=1 EngineCore loads the model.
"""

from __future__ import annotations

from toolkit.sim import faults
from toolkit.sim.args import SimConfig
from toolkit.sim.startup import Line, Script, model_architecture, phases

__all__ = ["VLLM_ROUTES", "vllm_engine_script", "vllm_preamble", "vllm_worker_script"]
VLLM_ROUTES = (
    ("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/health", "GET"), ("/load", "GET"),
    ("/metrics", "GET"), ("/version", "GET"), ("/tokenize", "POST"), ("/detokenize", "POST"),
    ("/v1/models", "GET"), ("/ping", "GET"), ("/v1/chat/completions", "POST"), ("/v1/completions", "POST"),
)


def _spec_repr(config: SimConfig) -> str:
    if config.speculation is None:
        return "None"
    return (f"SpeculativeConfig(method='{config.speculative_algorithm}', model="
            f"{config.speculative_draft_model_path!r}, num_spec_tokens={config.speculation.num_steps})")


# vLLM 0.33.0 vllm/entrypoints/common/startup.py:16-38 (log_version_and_model, called by launchers/launcher.py:367):
# a logo naming the version and the model, monochrome when the log is no terminal; with VLLM_DISABLE_LOG_LOGO=1
# (envs.py:2184) one line instead. Older releases: "vLLM API server version X" (api_server.py).
_LOGO = ("\n       █     █     █▄   ▄█\n"
         " ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}\n"
         "  █▄█▀ █     █     █     █  model   {model}\n"
         "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n")


def _version_line(config: SimConfig, disable_logo: bool) -> tuple[str, str, str]:
    version = config.release.version
    if not config.release.at_least("0.33.0"):
        return "info", "api_server.py:1896", f"vLLM API server version {version}"
    if disable_logo:
        return "info", "startup.py:38", f"vLLM server version {version}, serving model {config.model_path}"
    return "info", "startup.py:38", _LOGO.format(version=version, model=config.model_path)


def vllm_preamble(config: SimConfig, *, disable_logo: bool = False) -> list[tuple[str, str, str]]:
    """(level, source, message) records the API server logs before it starts the engine (``disable_logo``:
    ``VLLM_DISABLE_LOG_LOGO=1`` was exported)."""
    ns = config.namespace
    non_default: dict[str, object] = {"model_tag": config.model_path, "model": config.model_path}
    for key in ("host", "port", "served_model_name", "tensor_parallel_size", "speculative_config",
                "enforce_eager", "max_model_len", "gpu_memory_utilization", "trust_remote_code"):
        value = ns.get(key)
        if value not in (None, False, "", 8000, 1, 0.9):
            non_default[key] = value
    arch, _ = model_architecture(config.model_path)
    out = [_version_line(config, disable_logo),
           ("info", "utils.py:328", f"non-default args: {non_default}"),
           ("info", "model.py:619", f"Resolved architecture: {arch}"),
           ("info", "model.py:1776", f"Using max model len {config.context_length}")]
    if not config.cuda_graph:
        out.append(("info", "__init__.py:381", "Cudagraph is disabled under eager mode"))
    out.append(("info", "vllm.py:1042", "Asynchronous scheduling is enabled."))
    return out


def _model_lines(config: SimConfig, rank: int, pid: int, start: float) -> tuple[list[Line], float, str | None]:
    """Distributed init and model loading of one rank; returns (lines, end time, failure outcome)."""
    ph = phases(config)
    tp = config.tp_size
    lines = [
        Line(start, f"world_size={tp} rank={rank} local_rank={rank} distributed_init_method=tcp://127.0.0.1:"
                    f"{41000 + config.port % 1000} backend=nccl", source="parallel_state.py:1607"),
        Line(start + 0.001, f"rank {rank} in world size {tp} is assigned as DP rank 0, PP rank 0, PCP rank 0, "
                            f"TP rank {rank}, EP rank {rank}, EPLB rank N/A", source="parallel_state.py:1942")]
    t = start + ph.dist
    failing = config.fault_rank == rank
    where = "core.py:1231" if tp == 1 else "multiproc_executor.py:702"
    head = "EngineCore failed to start." if tp == 1 else "WorkerProc failed to start."
    if config.fault == "hang" or (config.fault == "nccl" and not failing):
        return lines, t, "hang"
    if config.fault == "nccl":
        tb = "\n".join([head, *faults.vllm_worker_traceback("nccl", rank, pid)])
        return lines + [Line(t, tb, level="error", source=where)], t, "fail"
    if rank == 0:
        lines.append(Line(t, f"Starting to load model {config.model_path}...", source="gpu_model_runner.py:5209"))
        for k in range(9):
            lines.append(Line(t + ph.weights * (0.1 + 0.1 * k), f"\rLoading safetensors checkpoint shards: "
                                                                f"{int(100 * k / 8):3d}% Completed | {k}/8", "plain"))
    t += ph.weights
    if config.fault == "oom" and not failing:
        return lines, t, "hang"
    if config.fault == "oom":
        tb = "\n".join([head, *faults.vllm_worker_traceback("oom", rank, pid)])
        return lines + [Line(t, tb, level="error", source=where)], t, "fail"
    lines.append(Line(t, f"Loading weights took {ph.weights:.2f} seconds", source="default_loader.py:430"))
    if config.speculation:
        lines.append(Line(t + 0.001, "Loading drafter model...", source="gpu_model_runner.py:5233"))
        t += ph.draft
        lines.append(Line(t, f"Loading weights took {ph.draft:.2f} seconds", source="default_loader.py:430"))
    _, weights_total = model_architecture(config.model_path)
    lines.append(Line(t + 0.001, f"Model loading took {weights_total / tp:.2f} GiB memory and "
                                 f"{ph.weights + ph.draft:.6f} seconds", source="gpu_model_runner.py:5306"))
    if config.cuda_graph and rank == 0:
        lines.append(Line(t + 0.3 * ph.kv, f"torch.compile took {0.5 * ph.kv:.2f} s in total", source="monitor.py:53"))
    t += ph.kv
    lines.append(Line(t, "Available KV cache memory: 35.2 GiB", source="gpu_worker.py:538"))
    if config.cuda_graph:
        t += ph.graph
        if rank == 0:
            lines.append(Line(t - 0.001, "\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|"
                                         "##########| 51/51 [00:08<00:00,  6.12it/s]", "plain"))
        lines.append(Line(t, f"Graph capturing finished in {max(int(ph.graph), 1)} secs, took 1.02 GiB",
                          source="gpu_model_runner.py:6707"))
    return lines, t, None


def vllm_worker_script(config: SimConfig, rank: int, pid: int) -> Script:
    """A `Worker_TPn` process (TP > 1 only)."""
    lines, t, failure = _model_lines(config, rank, pid, 0.05 * config.startup_s + 0.002 * rank)
    if failure is not None:
        return Script(tuple(lines), failure, t)
    if config.fault == "scheduler-traceback":
        return Script(tuple(lines), "hang", t)  # the EngineCore fails; workers wait until killed
    return Script(tuple(lines), "ready", t + 0.003)


def _init_engine_took(config: SimConfig, t: float) -> Line:
    """0.33.0 says "took %.2f s" (v1/engine/core.py:413, without compilation time); older "took %.2f seconds"."""
    unit, source = ("s", "core.py:413") if config.release.at_least("0.33.0") else ("seconds", "core.py:337")
    return Line(t + 0.001, f"init engine (profile, create kv cache, warmup model) took {t:.2f} {unit}",
                source=source)


def vllm_engine_script(config: SimConfig, pid: int) -> Script:
    """The `EngineCore` process; with TP=1 it loads the model itself."""
    lines = [Line(0.0, f"Initializing a V1 LLM engine (v{config.release.version}) with config: model='{config.model_path}', "
                       f"speculative_config={_spec_repr(config)}, tokenizer='{config.model_path}', "
                       "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, "
                       f"dtype=torch.bfloat16, max_seq_len={config.context_length}, download_dir=None, "
                       f"load_format=auto, tensor_parallel_size={config.tp_size}, pipeline_parallel_size=1, "
                       f"data_parallel_size=1, quantization=None, enforce_eager={not config.cuda_graph}, "
                       f"kv_cache_dtype=auto, device_config=cuda, seed=0, served_model_name="
                       f"{config.served_model_name}, enable_prefix_caching=True, enable_chunked_prefill=True",
                  source="core.py:114")]
    t = phases(config).worker_total + 0.05 * config.startup_s
    if config.tp_size == 1:
        model_lines, t, failure = _model_lines(config, 0, pid, 0.05 * config.startup_s)
        lines += model_lines
        if failure is not None:
            return Script(tuple(lines), failure, t)
    elif config.fault in ("hang", "nccl", "oom"):
        return Script(tuple(lines), "hang", t)  # waits for its workers; the server reports their failure
    if config.fault == "scheduler-traceback":
        tb = "\n".join(["EngineCore failed to start.", *faults.vllm_engine_traceback("kv-cache")])
        return Script(tuple(lines + [Line(t, tb, level="error", source="core.py:1231")]), "fail", t)
    t += 0.004
    lines += [Line(t, "GPU KV cache size: 950,420 tokens", source="kv_cache_utils.py:2146"),
              Line(t, f"Maximum concurrency for {config.context_length:,} tokens per request: "
                      f"{950420 / config.context_length:.2f}x", source="kv_cache_utils.py:2147"),
              _init_engine_took(config, t)]
    return Script(tuple(lines), "ready", t + 0.002)

"""Command-line flags of the simulator: the engines' real flag names, parsed as the engines parse them.

SGLang builds one `argparse.ArgumentParser` and calls `parse_args`, so an unknown flag ends with
`error: unrecognized arguments: ...` and exit status 2; so does this parser. `--help` lists every
flag and its choices because the toolkit validates flags against `--help` output.
Simulator-only knobs start with `--sim-` (plus `--engine` and `--source-dir`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from toolkit.sim.latency import DecodeSetup, Speculation

__all__ = ["FAULTS", "SimConfig", "build_parser", "engine_of", "parse_server_args"]

FAULTS = ("none", "oom", "nccl", "port-in-use", "scheduler-traceback", "crash-while-serving", "hang", "slow-start",
          "greedy-divergence")
SIM_ENGINES = ("sglang", "vllm")
VLLM_SPEC_METHODS = ("eagle", "eagle3", "mtp", "deepseek_mtp", "medusa", "ngram", "draft_model")


@dataclass(frozen=True)
class SimConfig:
    """Everything a launch decided, engine-neutral. Built only by `parse_server_args`."""

    engine: str
    argv: tuple[str, ...]
    model_path: str
    served_model_name: str
    tp_size: int
    host: str
    port: int
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculation: Speculation | None
    cuda_graph: bool
    cuda_graph_max_bs: int
    mem_fraction_static: float
    context_length: int
    log_level: str
    decode_log_interval: int
    enable_nccl_nvls: bool
    startup_s: float
    warmup_s: float
    fault: str
    fault_rank: int
    crash_after_requests: int
    crash_after_s: float | None
    slow_start_s: float
    seed: int
    drop_env_in_workers: tuple[str, ...]
    source_dir: str | None
    spin_ms: float
    namespace: dict[str, object]  # every parsed flag by its dest, for the server_args dump

    @property
    def decode_setup(self) -> DecodeSetup:
        return DecodeSetup(cuda_graph=self.cuda_graph, cuda_graph_max_bs=self.cuda_graph_max_bs,
                           speculation=self.speculation)


def engine_of(argv: Sequence[str]) -> str:
    """The `--engine` value before full parsing (it picks which parser applies); default sglang."""
    for i, arg in enumerate(argv):
        if arg == "--engine" and i + 1 < len(argv) and argv[i + 1] in SIM_ENGINES:
            return argv[i + 1]
        if arg.startswith("--engine=") and arg.split("=", 1)[1] in SIM_ENGINES:
            return arg.split("=", 1)[1]
    return "sglang"


def _add_sim_flags(parser: argparse.ArgumentParser, engine: str) -> None:
    g = parser.add_argument_group("simulator (toolkit.sim only; not engine flags)")
    g.add_argument("--engine", choices=SIM_ENGINES, default=engine,
                   help="which server to imitate: sglang (python -m sglang.launch_server) or vllm (vllm serve)")
    g.add_argument("--sim-startup-s", type=float, default=3.0,
                   help="seconds from launch to the ready line (default 3.0; tests use ~0.5)")
    g.add_argument("--sim-warmup-s", type=float, default=None,
                   help="sglang: seconds between 'Uvicorn running' and 'fired up' (default 15%% of startup)")
    g.add_argument("--sim-fault", choices=FAULTS, default="none", help="inject a failure (docs/simulator.md)")
    g.add_argument("--sim-fault-rank", type=int, default=None, help="TP rank that fails (default: the last rank)")
    g.add_argument("--sim-crash-after-requests", type=int, default=2,
                   help="crash-while-serving: requests that complete before the crash (default 2)")
    g.add_argument("--sim-crash-after-s", type=float, default=None,
                   help="crash-while-serving: crash this many seconds after ready instead")
    g.add_argument("--sim-slow-start-s", type=float, default=30.0,
                   help="slow-start: extra seconds of weight loading (default 30)")
    g.add_argument("--sim-seed", type=int, default=0, help="seed of token texts and acceptance noise")
    g.add_argument("--sim-drop-env-in-workers", default="", metavar="VAR,VAR",
                   help="start the TP worker processes without these environment variables")
    g.add_argument("--sim-spin-ms", type=float, default=2.0,
                   help="busy-wait this long before each step deadline for exact step gaps (0: sleep only)")
    g.add_argument("--source-dir", default=None, metavar="DIR",
                   help="read performance parameters from DIR/sim_perf.json (see make-repo)")


def _sglang_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolkit sim",
        description="SIMULATED SGLang server (toolkit.sim): real SGLang flag names, no GPU, no model.")
    a = parser.add_argument
    a("--model-path", "--model", dest="model_path", required=True,
      help="The path of the model weights. This can be a local folder or a Hugging Face repo ID.")
    a("--tokenizer-path", default=None, help="The path of the tokenizer.")
    a("--served-model-name", default=None, help="Override the model name returned by the v1/models endpoint.")
    a("--host", default="127.0.0.1", help="The host of the HTTP server.")
    a("--port", type=int, default=30000, help="The port of the HTTP server.")
    a("--tp-size", "--tp", dest="tp_size", type=int, default=1, help="The tensor parallelism size.")
    a("--trust-remote-code", action="store_true", help="Whether to allow custom models from the Hub.")
    a("--context-length", type=int, default=None, help="The model's maximum context length.")
    a("--dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"],
      help="Data type for model weights and activations.")
    a("--kv-cache-dtype", default="auto", choices=["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"],
      help="Data type for kv cache storage.")
    a("--quantization", default=None, help="The quantization method.")
    a("--mem-fraction-static", type=float, default=None,
      help="The fraction of the memory used for static allocation (model weights and KV cache memory pool).")
    a("--max-running-requests", type=int, default=None, help="The maximum number of running requests.")
    a("--chunked-prefill-size", type=int, default=None, help="The maximum number of tokens in a chunk.")
    a("--attention-backend", default=None, choices=["flashinfer", "triton", "torch_native", "fa3", "flashmla"],
      help="Choose the kernels for attention layers.")
    a("--speculative-algorithm", default=None, choices=["EAGLE", "EAGLE3", "NEXTN"],
      help="Speculative algorithm.")
    a("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path",
      default=None, help="The path of the draft model weights.")
    a("--speculative-num-steps", type=int, default=None,
      help="The number of steps sampled from draft model in Speculative Decoding.")
    a("--speculative-eagle-topk", type=int, default=None,
      help="The number of tokens sampled from the draft model in eagle2 each step.")
    a("--speculative-num-draft-tokens", type=int, default=None,
      help="The number of tokens sampled from the draft model in Speculative Decoding.")
    a("--speculative-attention-mode", default="prefill", choices=["prefill", "decode"],
      help="Attention backend for speculative decoding operations (both target verify and draft extend).")
    a("--disable-cuda-graph", action="store_true", help="Disable cuda graph.")
    a("--cuda-graph-max-bs", type=int, default=None, help="Set the maximum batch size for cuda graph.")
    a("--disable-radix-cache", action="store_true", help="Disable RadixAttention for prefix caching.")
    a("--enable-metrics", action="store_true", help="Enable log prometheus metrics.")
    a("--enable-nccl-nvls", action="store_true", help="Enable NCCL NVLS for prefill heavy requests when available.")
    a("--log-level", default="info", help="The logging level of all loggers.")
    a("--log-level-http", default=None, help="The logging level of HTTP server.")
    a("--decode-log-interval", type=int, default=40, help="The log interval of decode batch.")
    a("--random-seed", type=int, default=None, help="The random seed.")
    a("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", default=None,
      help="The host address for initializing distributed backend (e.g., `192.168.0.2:25000`).")
    a("--nnodes", type=int, default=1, help="The number of nodes.")
    a("--node-rank", type=int, default=0, help="The node rank.")
    a("--dist-timeout", type=int, default=None, help="Set timeout for torch.distributed initialization.")
    a("--watchdog-timeout", type=float, default=300, help="Set watchdog timeout in seconds.")
    _add_sim_flags(parser, "sglang")
    return parser


def _vllm_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolkit sim --engine vllm",
        description="SIMULATED vLLM OpenAI-compatible server (toolkit.sim): `vllm serve MODEL` flags, no GPU.")
    a = parser.add_argument
    a("model_tag", nargs="?", default=None, help="The model tag to serve (optional if specified in config)")
    a("--model", default=None, help="Name or path of the Hugging Face model to use.")
    a("--host", default=None, help="Host name.")
    a("--port", type=int, default=8000, help="Port number.")
    a("--served-model-name", nargs="+", default=None, help="The model name(s) used in the API.")
    a("--tensor-parallel-size", "-tp", dest="tensor_parallel_size", type=int, default=1,
      help="Number of tensor parallel groups.")
    a("--speculative-config", type=json.loads, default=None,
      help='Speculative decoding configuration as JSON, e.g. \'{"method": "eagle3", "model": "...", '
           '"num_speculative_tokens": 2}\'.')
    a("--enforce-eager", action="store_true", help="Always use eager-mode PyTorch (no CUDA graphs).")
    a("--max-model-len", type=int, default=None, help="Model context length.")
    a("--gpu-memory-utilization", type=float, default=0.9, help="The fraction of GPU memory to be used.")
    a("--max-num-seqs", type=int, default=None, help="Maximum number of sequences per iteration.")
    a("--trust-remote-code", action="store_true", help="Trust remote code from huggingface.")
    a("--dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"],
      help="Data type for model weights and activations.")
    a("--disable-log-requests", action="store_true", help="Disable logging requests.")
    a("--profiler-config", type=json.loads, default=None,
      help='Profiler configuration as JSON, e.g. \'{"profiler": "torch", "torch_profiler_dir": "DIR"}\'.')
    _add_sim_flags(parser, "vllm")
    return parser


def build_parser(engine: str) -> argparse.ArgumentParser:
    """The parser for one engine; `--help` prints it."""
    return _vllm_parser() if engine == "vllm" else _sglang_parser()


class _SimFields(TypedDict):
    startup_s: float
    warmup_s: float
    fault: str
    fault_rank: int
    crash_after_requests: int
    crash_after_s: float | None
    slow_start_s: float
    seed: int
    spin_ms: float
    source_dir: str | None
    drop_env_in_workers: tuple[str, ...]


def _sim_fields(ns: argparse.Namespace, parser: argparse.ArgumentParser, tp: int) -> _SimFields:
    """Validate the simulator knobs and return them as SimConfig fields."""
    if ns.sim_startup_s <= 0:
        parser.error(f"argument --sim-startup-s: must be > 0, got {ns.sim_startup_s}")
    fault_rank = tp - 1 if ns.sim_fault_rank is None else ns.sim_fault_rank
    if not 0 <= fault_rank < tp:
        parser.error(f"argument --sim-fault-rank: {fault_rank} is not a rank of tp size {tp} (0..{tp - 1})")
    if ns.sim_crash_after_requests < 0:
        parser.error("argument --sim-crash-after-requests: must be >= 0")
    warmup = ns.sim_warmup_s if ns.sim_warmup_s is not None else 0.15 * ns.sim_startup_s
    return {
        "startup_s": ns.sim_startup_s, "warmup_s": max(warmup, 0.0), "fault": ns.sim_fault,
        "fault_rank": fault_rank, "crash_after_requests": ns.sim_crash_after_requests,
        "crash_after_s": ns.sim_crash_after_s, "slow_start_s": max(ns.sim_slow_start_s, 0.0),
        "seed": ns.sim_seed, "spin_ms": max(ns.sim_spin_ms, 0.0), "source_dir": ns.source_dir,
        "drop_env_in_workers": tuple(v.strip() for v in ns.sim_drop_env_in_workers.split(",") if v.strip()),
    }


def _sglang_config(ns: argparse.Namespace, parser: argparse.ArgumentParser, argv: tuple[str, ...]) -> SimConfig:
    if ns.tp_size < 1:
        parser.error(f"argument --tp-size: must be >= 1, got {ns.tp_size}")
    speculation = None
    if ns.speculative_algorithm is not None:
        # SGLang auto-chooses (3, 1, 4) for most architectures when the triple is not given,
        # and forces num_draft_tokens = num_steps + 1 when topk == 1.
        steps = ns.speculative_num_steps if ns.speculative_num_steps is not None else 3
        topk = ns.speculative_eagle_topk if ns.speculative_eagle_topk is not None else 1
        draft = ns.speculative_num_draft_tokens if ns.speculative_num_draft_tokens is not None else steps + 1
        if topk == 1:
            draft = steps + 1
        ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens = steps, topk, draft
        speculation = Speculation(num_steps=steps, topk=topk, num_draft_tokens=draft,
                                  verify_in_extend=ns.speculative_attention_mode == "prefill")
    default_bs = 64 if speculation else 256
    return SimConfig(
        engine="sglang", argv=argv, model_path=ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path, tp_size=ns.tp_size, host=ns.host, port=ns.port,
        speculative_algorithm=ns.speculative_algorithm, speculative_draft_model_path=ns.speculative_draft_model_path,
        speculation=speculation, cuda_graph=not ns.disable_cuda_graph,
        cuda_graph_max_bs=ns.cuda_graph_max_bs or default_bs,
        mem_fraction_static=ns.mem_fraction_static or 0.85, context_length=ns.context_length or 131072,
        log_level=ns.log_level.lower(), decode_log_interval=max(ns.decode_log_interval, 1),
        enable_nccl_nvls=ns.enable_nccl_nvls, namespace=dict(vars(ns)), **_sim_fields(ns, parser, ns.tp_size))


def _vllm_config(ns: argparse.Namespace, parser: argparse.ArgumentParser, argv: tuple[str, ...]) -> SimConfig:
    model = ns.model_tag or ns.model
    if model is None:
        parser.error("the following arguments are required: model_tag (or --model)")
    tp = ns.tensor_parallel_size
    if tp < 1:
        parser.error(f"argument --tensor-parallel-size: must be >= 1, got {tp}")
    speculation, algorithm, draft_model = None, None, None
    if ns.speculative_config is not None:
        spec = ns.speculative_config
        if not isinstance(spec, dict) or not isinstance(spec.get("num_speculative_tokens"), int):
            parser.error("argument --speculative-config: needs a JSON object with an integer num_speculative_tokens")
        method = str(spec.get("method", "eagle"))
        if method not in VLLM_SPEC_METHODS:
            parser.error(f"argument --speculative-config: method {method!r} is not one of {list(VLLM_SPEC_METHODS)}")
        algorithm, draft_model = method, spec.get("model")
        # vLLM verifies drafts in its (piecewise) CUDA-graph decode path: decode-mode cost.
        speculation = Speculation(num_steps=spec["num_speculative_tokens"], verify_in_extend=False)
    return SimConfig(
        engine="vllm", argv=argv, model_path=model,
        served_model_name=(ns.served_model_name or [model])[0], tp_size=tp, host=ns.host or "0.0.0.0",
        port=ns.port, speculative_algorithm=algorithm, speculative_draft_model_path=draft_model,
        speculation=speculation, cuda_graph=not ns.enforce_eager, cuda_graph_max_bs=512,
        mem_fraction_static=ns.gpu_memory_utilization, context_length=ns.max_model_len or 131072,
        log_level="info", decode_log_interval=40, enable_nccl_nvls=False,
        namespace=dict(vars(ns)), **_sim_fields(ns, parser, tp))


def parse_server_args(argv: Sequence[str]) -> SimConfig:
    """Parse a server command line; argparse exits with status 2 on any error, like the engines."""
    argv = tuple(argv)
    engine = engine_of(argv)
    parser = build_parser(engine)
    ns = parser.parse_args(list(argv))
    return _vllm_config(ns, parser, argv) if engine == "vllm" else _sglang_config(ns, parser, argv)

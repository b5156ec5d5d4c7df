"""The engines' argument parsers as the imitated release has them: every flag it accepts, no other.

From the release's captured flag list: simulated flags in that release's spellings, every other one
accepted and ignored. So ``--cuda-graph-max-bs 8`` on SGLang 0.5.20+ is an ``ambiguous option`` and
``--tp`` works only as a prefix of ``--tp-size``, as on the real server.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from toolkit.sim.release import SimRelease

__all__ = ["sglang_parser", "vllm_parser", "transformers_parser", "PASSTHROUGH_HELP"]

PASSTHROUGH_HELP = "accepted as {release} accepts it; not simulated"
Adder = Callable[..., None]


def _adder(parser: argparse.ArgumentParser | Any, release: SimRelease) -> Adder:
    """``add(*spellings, dest=, default=, **kw)``: the spellings ``release`` has (none: the default only)."""

    def add(*spellings: str, dest: str, default: object = None, **kw: Any) -> None:
        if default is None and kw.get("action") == "store_true":
            default = False
        parser.set_defaults(**{dest: default})
        kept = [s for s in spellings if release.has(s)]
        if not kept:
            return
        entry = release.flags.entry(kept[0])
        others = [s for s in (entry.spellings if entry else ()) if s not in kept and s not in spellings]
        negations = [s for s in others if s.startswith("--no-")]
        if kw.get("action") == "store_true" and negations:  # vLLM's BooleanOptionalAction: --x / --no-x
            kw["action"] = argparse.BooleanOptionalAction
            others = [s for s in others if s not in negations]
        parser.add_argument(*kept, *others, dest=dest, default=default, **kw)

    return add


def _passthrough(parser: argparse.ArgumentParser, release: SimRelease) -> None:
    """Every other flag of ``release``: a value (one word) or a switch, as its parser declared it."""
    taken = set(parser._option_string_actions)  # noqa: SLF001 - argparse keeps no public list
    group = parser.add_argument_group(f"other {release.label} flags (accepted, not simulated)")
    text = PASSTHROUGH_HELP.format(release=release.label)
    for entry in release.flags.entries:
        spellings = [s for s in entry.spellings if s.startswith("-") and s not in taken]
        if not spellings or len(spellings) < len(entry.spellings):
            continue
        dest = "x_" + entry.name.lstrip("-").replace("-", "_")
        if entry.takes_value:
            group.add_argument(*spellings, dest=dest, default=None, metavar=dest[2:].upper(), help=text)
        else:
            group.add_argument(*spellings, dest=dest, action="store_true", help=text)
        taken.update(spellings)


def _finish(parser: argparse.ArgumentParser, release: SimRelease,
            knobs: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """The simulator's knobs, then every other flag of the release."""
    knobs(parser)
    _passthrough(parser, release)
    return parser


def sglang_parser(release: SimRelease, knobs: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """``python -m sglang.launch_server`` of ``release`` (prog as 0.5.16+ names it: ``sglang serve``)."""
    parser = argparse.ArgumentParser(
        prog="python -m toolkit sim",
        description=f"SIMULATED {release.label} server (toolkit.sim): {release.label}'s flags, no GPU, no model.")
    a = _adder(parser, release)
    a("--model-path", "--model", dest="model_path", required=True,
      help="The path of the model weights. This can be a local folder or a Hugging Face repo ID.")
    a("--tokenizer-path", dest="tokenizer_path", help="The path of the tokenizer.")
    a("--served-model-name", dest="served_model_name", help="Override the model name returned by /v1/models.")
    a("--host", dest="host", default="127.0.0.1", help="The host of the HTTP server.")
    a("--port", dest="port", type=int, default=30000, help="The port of the HTTP server.")
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1, help="The tensor parallelism size.")
    a("--trust-remote-code", dest="trust_remote_code", action="store_true", help="Allow custom models from the Hub.")
    a("--context-length", dest="context_length", type=int, help="The model's maximum context length.")
    a("--dtype", dest="dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"],
      help="Data type for model weights and activations.")
    a("--kv-cache-dtype", dest="kv_cache_dtype", default="auto",
      choices=["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"], help="Data type for kv cache storage.")
    a("--quantization", dest="quantization", help="The quantization method.")
    a("--mem-fraction-static", dest="mem_fraction_static", type=float,
      help="The fraction of the memory used for static allocation (model weights and KV cache memory pool).")
    a("--max-running-requests", dest="max_running_requests", type=int, help="The maximum number of running requests.")
    a("--chunked-prefill-size", dest="chunked_prefill_size", type=int, help="The maximum number of tokens in a chunk.")
    a("--attention-backend", dest="attention_backend",
      choices=["flashinfer", "triton", "torch_native", "fa3", "flashmla"], help="Choose the attention kernels.")
    a("--speculative-algorithm", dest="speculative_algorithm", choices=["EAGLE", "EAGLE3", "NEXTN"],
      help="Speculative algorithm.")
    a("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path",
      help="The path of the draft model weights.")
    a("--speculative-num-steps", dest="speculative_num_steps", type=int,
      help="The number of steps sampled from draft model in Speculative Decoding.")
    a("--speculative-eagle-topk", dest="speculative_eagle_topk", type=int,
      help="The number of tokens sampled from the draft model in eagle2 each step.")
    a("--speculative-num-draft-tokens", dest="speculative_num_draft_tokens", type=int,
      help="The number of tokens sampled from the draft model in Speculative Decoding.")
    a("--speculative-attention-mode", dest="speculative_attention_mode", default="prefill",
      choices=["prefill", "decode"], help="Attention backend for speculative decoding (target verify, draft extend).")
    a("--disable-cuda-graph", dest="disable_cuda_graph", action="store_true", help="Disable cuda graph.")
    # The option until 0.5.13; a deprecated alias of -decode in 0.5.14-0.5.19; gone from 0.5.20.
    a("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", dest="cuda_graph_max_bs", type=int,
      help="Set the maximum batch size for (decode) cuda graph.")
    a("--disable-radix-cache", dest="disable_radix_cache", action="store_true", help="Disable RadixAttention.")
    a("--enable-metrics", dest="enable_metrics", action="store_true", help="Enable log prometheus metrics.")
    a("--enable-nccl-nvls", dest="enable_nccl_nvls", action="store_true", help="Enable NCCL NVLS.")
    a("--api-key", dest="api_key", help="Set API key of the server (Authorization: Bearer KEY).")
    a("--log-level", dest="log_level", default="info", help="The logging level of all loggers.")
    a("--log-level-http", dest="log_level_http", help="The logging level of HTTP server.")
    a("--decode-log-interval", dest="decode_log_interval", type=int, default=40, help="The log interval of decode batch.")
    a("--random-seed", dest="random_seed", type=int, help="The random seed.")
    a("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr",
      help="The host address for initializing distributed backend (e.g., `192.168.0.2:25000`).")
    a("--nnodes", dest="nnodes", type=int, default=1, help="The number of nodes.")
    a("--node-rank", dest="node_rank", type=int, default=0, help="The node rank.")
    a("--dist-timeout", dest="dist_timeout", type=int, help="Set timeout for torch.distributed initialization.")
    a("--watchdog-timeout", dest="watchdog_timeout", type=float, default=300, help="Set watchdog timeout in seconds.")
    a("--skip-server-warmup", dest="skip_server_warmup", action="store_true", help="Skip the warm-up request.")
    return _finish(parser, release, knobs)


def vllm_parser(release: SimRelease, knobs: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """``vllm serve MODEL`` of ``release``."""
    parser = argparse.ArgumentParser(
        prog="python -m toolkit sim --engine vllm",
        description=f"SIMULATED {release.label} OpenAI-compatible server (toolkit.sim): `vllm serve MODEL` flags.")
    a = _adder(parser, release)
    parser.add_argument("model_tag", nargs="?", default=None, help="The model tag to serve")
    a("--model", dest="model", help="Name or path of the Hugging Face model to use.")
    a("--host", dest="host", help="Host name.")
    a("--port", dest="port", type=int, default=8000, help="Port number.")
    a("--served-model-name", dest="served_model_name", nargs="+", help="The model name(s) used in the API.")
    a("--tensor-parallel-size", "-tp", dest="tensor_parallel_size", type=int, default=1,
      help="Number of tensor parallel groups.")
    a("--speculative-config", "-sc", dest="speculative_config", type=json.loads,
      help='Speculative decoding configuration as JSON, e.g. \'{"method": "eagle3", "num_speculative_tokens": 2}\'.')
    a("--enforce-eager", dest="enforce_eager", action="store_true", help="Always use eager mode.")
    a("--max-model-len", dest="max_model_len", type=int, help="Model context length.")
    a("--gpu-memory-utilization", dest="gpu_memory_utilization", type=float, default=0.9,
      help="The fraction of GPU memory to be used.")
    a("--max-num-seqs", dest="max_num_seqs", type=int, help="Maximum number of sequences per iteration.")
    a("--trust-remote-code", dest="trust_remote_code", action="store_true", help="Trust remote code.")
    a("--dtype", dest="dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"],
      help="Data type for model weights and activations.")
    a("--profiler-config", dest="profiler_config", type=json.loads,  # 0.14+ (toolkit/engines/vllm.py)
      help='Profiler configuration as JSON, e.g. \'{"profiler": "torch", "torch_profiler_dir": "DIR"}\'.')
    # A list from 0.11 (vllm/entrypoints/openai/cli_args.py); VLLM_API_KEY when not given.
    a("--api-key", dest="api_key", nargs="+" if release.at_least("0.11.0") else None,
      help="If provided, the server will require one of these keys to be presented in the header.")
    return _finish(parser, release, knobs)


def transformers_parser(release: SimRelease,
                        knobs: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """``transformers serve [FORCE_MODEL]`` of ``release`` (typer; simulated with argparse)."""
    parser = argparse.ArgumentParser(
        prog="python -m toolkit sim --engine transformers",
        description=f"SIMULATED {release.label} (toolkit.sim): FastAPI + uvicorn, one process, no model.")
    a = _adder(parser, release)
    parser.add_argument("force_model", nargs="?", default=None, metavar="FORCE_MODEL",
                        help="Model to preload and use for all requests.")
    a("--host", dest="host", default="localhost", help="Interface the server will listen to.")
    a("--port", dest="port", type=int, default=8000, help="Port the server will listen to.")
    a("--continuous-batching", dest="continuous_batching", action="store_true",
      help="Enable continuous batching with paged attention (--no-continuous-batching: the default).")
    a("--log-level", dest="log_level", default="warning", help="Logging level (e.g. 'info', 'warning').")
    return _finish(parser, release, knobs)

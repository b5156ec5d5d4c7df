"""Command-line flags of the simulator: the imitated release's flags, parsed as that release parses them.

An unknown flag exits 2 (`unrecognized arguments`) as on the engines; `--help` lists every flag, as the
toolkit validates flags against it. Simulator-only knobs: `--sim-*`, `--engine` and `--source-dir`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from toolkit.sim.latency import DecodeSetup, Speculation
from toolkit.sim.parsers import sglang_parser, transformers_parser, vllm_parser
from toolkit.sim.release import DEFAULT_VERSIONS, EnvContext, SimRelease, option_value, release_from_argv

__all__ = ["FAULTS", "SimConfig", "build_parser", "engine_of", "parse_server_args"]

# worker-dead-after-start: the engine's worker dies once HTTP is up; the server keeps answering
# (transformers serve's batching thread; the others' schedulers die with their server).
# watchdog (SGLang): a forward step stalls while serving; the rank's watchdog fires after --watchdog-timeout.
FAULTS = ("none", "oom", "nccl", "port-in-use", "scheduler-traceback", "crash-while-serving", "hang", "slow-start",
          "worker-dead-after-start", "watchdog", "greedy-divergence")
SIM_ENGINES = ("sglang", "vllm", "transformers")
VLLM_SPEC_METHODS = ("eagle", "eagle3", "mtp", "deepseek_mtp", "medusa", "ngram", "draft_model")


@dataclass(frozen=True)
class SimConfig:
    """Everything a launch decided, engine-neutral. Built only by `parse_server_args`."""

    engine: str
    release: SimRelease
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
    noise_pct: float
    namespace: dict[str, object]  # every parsed flag by its dest, for the server_args dump
    api_keys: tuple[str, ...] = ()  # --api-key (vLLM: also VLLM_API_KEY); empty: no guard
    skip_warmup: bool = False

    @property
    def decode_setup(self) -> DecodeSetup:
        return DecodeSetup(cuda_graph=self.cuda_graph, cuda_graph_max_bs=self.cuda_graph_max_bs,
                           speculation=self.speculation)

    @property
    def env_context(self) -> EnvContext:
        """What the release's environment writes depend on (their conditions)."""
        flags = frozenset(a.split("=", 1)[0] for a in self.argv if a.startswith("-"))
        return EnvContext(self.tp_size, self.cuda_graph, flags, self.namespace)


def engine_of(argv: Sequence[str]) -> str:
    """The `--engine` value before full parsing (it picks which parser applies); default sglang."""
    value = option_value(argv, "--engine")
    return value if value in SIM_ENGINES else "sglang"


def _add_sim_flags(parser: argparse.ArgumentParser, release: SimRelease) -> None:
    engine = release.engine
    g = parser.add_argument_group("simulator (toolkit.sim only; not engine flags)")
    g.add_argument("--engine", choices=SIM_ENGINES, default=engine,
                   help="which server to imitate: sglang (python -m sglang.launch_server), vllm (vllm serve) or "
                        "transformers (transformers serve)")
    g.add_argument("--sim-engine-version", default=DEFAULT_VERSIONS[engine], metavar="VERSION",
                   help=f"the {engine} release to imitate (default {DEFAULT_VERSIONS[engine]}, the newest read); "
                        "its flags, environment writes, log lines and health answers (docs/simulator.md)")
    # Like `sglang version` / `vllm --version`: the toolkit reads the imitated release here.
    g.add_argument("--version", action="version", version=f"toolkit.sim imitating {engine} {release.version}")
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
    g.add_argument("--sim-noise-pct", type=float, default=0.0, metavar="P",
                   help="slow each generation request by a seeded random factor (lognormal, sd ~P%%; default 0)")
    g.add_argument("--sim-drop-env-in-workers", default="", metavar="VAR,VAR",
                   help="start the TP worker processes without these environment variables")
    g.add_argument("--sim-spin-ms", type=float, default=2.0,
                   help="wait the last M ms before each step deadline with a precise blocking sleep, for "
                        "step gaps exact to ~0.1 ms (0: the event loop's timers only, which wake on whole ms)")
    g.add_argument("--source-dir", default=None, metavar="DIR",
                   help="read performance parameters from DIR/sim_perf.json (see make-repo)")


def build_parser(engine: str, release: SimRelease | None = None) -> argparse.ArgumentParser:
    """The parser for one engine and release (default: the newest); `--help` prints it."""
    chosen = release or release_from_argv((), engine)
    builders = {"vllm": vllm_parser, "transformers": transformers_parser}
    return builders.get(engine, sglang_parser)(chosen, lambda parser: _add_sim_flags(parser, chosen))


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
    noise_pct: float
    source_dir: str | None
    drop_env_in_workers: tuple[str, ...]


def _sim_fields(ns: argparse.Namespace, parser: argparse.ArgumentParser, tp: int) -> _SimFields:
    if ns.sim_startup_s <= 0:
        parser.error(f"argument --sim-startup-s: must be > 0, got {ns.sim_startup_s}")
    fault_rank = tp - 1 if ns.sim_fault_rank is None else ns.sim_fault_rank
    if not 0 <= fault_rank < tp:
        parser.error(f"argument --sim-fault-rank: {fault_rank} is not a rank of tp size {tp} (0..{tp - 1})")
    if ns.sim_crash_after_requests < 0:
        parser.error("argument --sim-crash-after-requests: must be >= 0")
    if not 0 <= ns.sim_noise_pct <= 100:
        parser.error(f"argument --sim-noise-pct: must lie between 0 and 100, got {ns.sim_noise_pct}")
    warmup = ns.sim_warmup_s if ns.sim_warmup_s is not None else 0.15 * ns.sim_startup_s
    return {
        "startup_s": ns.sim_startup_s, "warmup_s": max(warmup, 0.0), "fault": ns.sim_fault,
        "fault_rank": fault_rank, "crash_after_requests": ns.sim_crash_after_requests,
        "crash_after_s": ns.sim_crash_after_s, "slow_start_s": max(ns.sim_slow_start_s, 0.0),
        "seed": ns.sim_seed, "spin_ms": max(ns.sim_spin_ms, 0.0), "noise_pct": ns.sim_noise_pct,
        "source_dir": ns.source_dir,
        "drop_env_in_workers": tuple(v.strip() for v in ns.sim_drop_env_in_workers.split(",") if v.strip()),
    }


def _sglang_config(ns: argparse.Namespace, parser: argparse.ArgumentParser, argv: tuple[str, ...],
                   release: SimRelease) -> SimConfig:
    if ns.tp_size < 1:
        parser.error(f"argument --tp-size: must be >= 1, got {ns.tp_size}")
    speculation = None
    if ns.speculative_algorithm is not None:
        # SGLang auto-chooses (3, 1, 4) for most architectures; num_draft_tokens = num_steps + 1 with topk 1.
        steps = ns.speculative_num_steps if ns.speculative_num_steps is not None else 3
        topk = ns.speculative_eagle_topk if ns.speculative_eagle_topk is not None else 1
        draft = ns.speculative_num_draft_tokens
        draft = steps + 1 if topk == 1 or draft is None else draft
        ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens = steps, topk, draft
        speculation = Speculation(num_steps=steps, topk=topk, num_draft_tokens=draft,
                                  verify_in_extend=ns.speculative_attention_mode == "prefill")
    default_bs = 64 if speculation else 256
    return SimConfig(
        engine="sglang", release=release, argv=argv, model_path=ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path, tp_size=ns.tp_size, host=ns.host, port=ns.port,
        speculative_algorithm=ns.speculative_algorithm, speculative_draft_model_path=ns.speculative_draft_model_path,
        speculation=speculation, cuda_graph=not ns.disable_cuda_graph,
        cuda_graph_max_bs=ns.cuda_graph_max_bs or default_bs,
        mem_fraction_static=ns.mem_fraction_static or 0.85, context_length=ns.context_length or 131072,
        log_level=ns.log_level.lower(), decode_log_interval=max(ns.decode_log_interval, 1),
        enable_nccl_nvls=ns.enable_nccl_nvls, namespace=dict(vars(ns)),
        api_keys=(ns.api_key,) if ns.api_key else (), skip_warmup=ns.skip_server_warmup,
        **_sim_fields(ns, parser, ns.tp_size))


def _vllm_config(ns: argparse.Namespace, parser: argparse.ArgumentParser, argv: tuple[str, ...],
                 release: SimRelease) -> SimConfig:
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
    # which of --api-key and VLLM_API_KEY wins is the release profile's (toolkit/engines/vllm.py: the variable up to
    # 0.8.2, `envs.VLLM_API_KEY or args.api_key`; the flag from 0.8.5, api_server.py:842-843). A list from 0.11.
    given = ns.api_key if isinstance(ns.api_key, list) else [ns.api_key] if ns.api_key else []
    env_key = os.environ.get("VLLM_API_KEY")
    keys = [env_key] if env_key and (not given or release.profile.api_key_env_wins) else given
    return SimConfig(
        engine="vllm", release=release, argv=argv, model_path=model,
        served_model_name=(ns.served_model_name or [model])[0], tp_size=tp, host=ns.host or "0.0.0.0",
        port=ns.port, speculative_algorithm=algorithm, speculative_draft_model_path=draft_model,
        speculation=speculation, cuda_graph=not ns.enforce_eager, cuda_graph_max_bs=512,
        mem_fraction_static=ns.gpu_memory_utilization, context_length=ns.max_model_len or 131072,
        log_level="info", decode_log_interval=40, enable_nccl_nvls=False,
        namespace=dict(vars(ns)), api_keys=tuple(keys), **_sim_fields(ns, parser, tp))


def _transformers_config(ns: argparse.Namespace, parser: argparse.ArgumentParser, argv: tuple[str, ...],
                         release: SimRelease) -> SimConfig:
    model = ns.force_model or "sim-model"
    fields = _sim_fields(ns, parser, 1)
    if fields["fault"] == "worker-dead-after-start" and not ns.continuous_batching:
        parser.error("--sim-fault worker-dead-after-start needs --continuous-batching (the worker is its thread)")
    return SimConfig(
        engine="transformers", release=release, argv=argv, model_path=model, served_model_name=model, tp_size=1,
        host=ns.host, port=ns.port, speculative_algorithm=None, speculative_draft_model_path=None, speculation=None,
        cuda_graph=False, cuda_graph_max_bs=64 if ns.continuous_batching else 1, mem_fraction_static=0.9,
        context_length=32768, log_level=ns.log_level.lower(), decode_log_interval=40, enable_nccl_nvls=False,
        namespace=dict(vars(ns)), **fields)


_CONFIGS = {"sglang": _sglang_config, "vllm": _vllm_config, "transformers": _transformers_config}


def parse_server_args(argv: Sequence[str]) -> SimConfig:
    """Parse a server command line; argparse exits with status 2 on any error, like the engines."""
    argv = tuple(argv)
    engine = engine_of(argv)
    try:
        release = release_from_argv(argv, engine)
    except ValueError as exc:
        build_parser(engine).error(str(exc))
    parser = build_parser(engine, release)
    ns = parser.parse_args(list(argv))
    if not 0 < ns.port < 65536:  # the engines take any int here and die at bind with a traceback (issue 25)
        parser.error(f"--port {ns.port}: a TCP port is 1-65535")
    return _CONFIGS[engine](ns, parser, argv, release)

"""vLLM release lines from 0.6 to 0.33, read from the released wheels.

Cut where ``NCCL_CUMEM_ENABLE`` handling, the worker start method or the profiler switch changed:
0.6.x sets it in each worker's own Python (no ``/proc`` shows it); 0.7.0-0.8.2 on ``import vllm`` in
every process; 0.8.3-0.9.0 ``env_override.py`` still overwrites it, and ``vllm serve`` spawns;
0.9.1-0.10.1.1 keeps a user's value; 0.10.2-0.13 writes none; 0.14+ profiles by ``--profiler-config``
(``VLLM_TORCH_PROFILER_DIR`` ignored from 0.16).
``--api-key`` guards only ``/v1`` (later ``/v2``, ``/inference``, ``/cohere``).
"""

from __future__ import annotations

from toolkit.engines.release_profile import (
    Endpoint,
    EngineProfile,
    EnvWrite,
    HealthAnswer,
    HealthCheck,
    MetricNames,
    ProcessRole,
)
from toolkit.engines.versions import ReleaseRange

__all__ = ["VLLM_PROFILES"]

_API = "vllm/entrypoints/openai/api_server.py"
_OVERRIDE = "vllm/env_override.py"
_VERSION_CMD = "python -c \"import importlib.metadata as m; print(m.version('vllm'))\""
_VERSION_NOTE = ("`vllm --version` exists from 0.6.6 (vllm/scripts.py:148; absent in 0.6.4), "
                 "vllm/entrypoints/cli/main.py:56-58 in 0.7.3; python -c 'import vllm; print(vllm.__version__)' "
                 "works in every release but imports torch")
_LIB_FORK = ("as a library (LLM(...)) the default stays fork: VLLM_WORKER_MULTIPROC_METHOD defaults to 'fork' "
             "in vllm/envs.py, and only the CLI entry points switch it to spawn")
_SPAWNED: tuple[ProcessRole, ...] = ("engine_core", "worker")


def _health(release: str, src: str, dead_status: int, dead_src: str) -> tuple[HealthCheck, ...]:
    """vLLM starts its HTTP server only after the engine is up, so a 200 means loaded, not generating."""
    answers = (HealthAnswer(200, "ready", f"vllm {release} {src} (the engine answered check_health)"),
               HealthAnswer(dead_status, "dead", f"{dead_src} (no body)"))
    return (HealthCheck("/health", "GET", False, 0.0, f"vllm {release} {src}", None, dead_status,
                        (f"engine dead (EngineDeadError / engine.errored): {dead_src}",), answers=answers),)


def _api_key(release: str, src: str, *, env_wins: bool = False) -> str:
    order = ("VLLM_API_KEY wins over --api-key: `envs.VLLM_API_KEY or args.api_key`; the order flips by 0.8.5"
             if env_wins else "--api-key wins over VLLM_API_KEY")
    return f"vllm {release} {src} ({order}; 401 {{'error': 'Unauthorized'}})"


def _profile(release: str, start: str, stop: str, enabled_by: str, fields: tuple[str, ...] = (),
             output_env: str | None = "VLLM_TORCH_PROFILER_DIR") -> tuple[Endpoint, Endpoint]:
    return (Endpoint("/start_profile", ("POST",), f"vllm {release} {start}", enabled_by, body_fields=fields,
                     output_env=output_env),
            Endpoint("/stop_profile", ("POST",), f"vllm {release} {stop}", enabled_by))


def _reset(release: str, src: str, gate: str, query: tuple[str, ...] = ()) -> Endpoint:
    return Endpoint("/reset_prefix_cache", ("POST",), f"vllm {release} {src}; gate {gate}",
                    "VLLM_SERVER_DEV_MODE=1", query_fields=query)


def _spawn_write(release: str, src: str) -> EnvWrite:
    return EnvWrite("VLLM_WORKER_MULTIPROC_METHOD", "spawn", "server", "if_unset", f"vllm {release} {src}",
                    condition="vllm serve / python -m vllm.entrypoints.openai.api_server (cli_env_setup)",
                    visible_in=_SPAWNED)


def _import_writes(release: str, nvml: int | None, inductor: int, spawned: bool) -> tuple[EnvWrite, ...]:
    """What env_override.py writes on `import vllm` (every process that imports vllm)."""
    seen: tuple[ProcessRole, ...] = _SPAWNED if spawned else ()
    lines = (("PYTORCH_NVML_BASED_CUDA_CHECK", nvml), ("TORCHINDUCTOR_COMPILE_THREADS", inductor))
    return tuple(EnvWrite(name, "1", "every", "always", f"vllm {release} {_OVERRIDE}:{line}", visible_in=seen)
                 for name, line in lines if line is not None)


def _line(name: str, releases: ReleaseRange, start_method: str, start_method_source: str,
          env_writes: tuple[EnvWrite, ...], health: tuple[HealthCheck, ...], metrics: MetricNames,
          profile: tuple[Endpoint, Endpoint], reset: Endpoint | None, api_key_source: str,
          guarded: tuple[str, ...], version_source: str, flag_releases: tuple[str, ...],
          notes: tuple[str, ...], *, api_key_env_wins: bool = False) -> EngineProfile:
    return EngineProfile(
        engine="vllm", name=name, releases=releases, start_method=start_method,  # type: ignore[arg-type]
        start_method_source=start_method_source, env_writes=env_writes, health=health,
        ready_log_line="Application startup complete.",
        ready_log_source="uvicorn, once vLLM's server runs (vLLM lists its routes just before: 'Available routes are:')",
        models_path="/v1/models", metrics_path="/metrics", metrics=metrics, flush_cache=reset, version_path="/version",
        start_profile=profile[0], stop_profile=profile[1], api_key_flag="--api-key", api_key_env="VLLM_API_KEY",
        api_key_source=api_key_source, api_key_guarded=guarded, api_key_open=(), version_command=_VERSION_CMD,
        version_source=version_source, flag_releases=flag_releases, notes=notes, api_key_env_wins=api_key_env_wins,
    )


_V0_METRICS = MetricNames("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
                          "vllm 0.6.6 vllm/engine/metrics.py:57,62,83,249,253 (V0 engine)",
                          spec_accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
                          spec_draft_tokens="vllm:spec_decode_num_draft_tokens_total")


def _v1_metrics(release: str, loggers: str, spec: str, usage: str = "vllm:kv_cache_usage_perc") -> MetricNames:
    # Counters are declared without _total and exposed with it (prometheus_client).
    return MetricNames("vllm:num_requests_running", "vllm:num_requests_waiting", usage,
                       f"vllm {release} vllm/v1/metrics/loggers.py:{loggers}; vllm/v1/spec_decode/metrics.py:{spec}",
                       spec_accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
                       spec_draft_tokens="vllm:spec_decode_num_draft_tokens_total",
                       spec_drafts="vllm:spec_decode_num_drafts_total")


_GUARD_V1 = ("/v1",)

_V06 = _line(
    "vllm-0.6.x", ReleaseRange("0.6.0", "0.7.0"), "fork",
    "vllm 0.6.6 vllm/envs.py:351 (VLLM_WORKER_MULTIPROC_METHOD default 'fork'; the V0 engine process is "
    f"started with spawn, {_API}:186)",
    (
        EnvWrite("NCCL_CUMEM_ENABLE", "0", "worker", "always",
                 "vllm 0.6.6 vllm/worker/worker_base.py:445 (init_worker; 0.6.0 :438)",
                 condition="in each worker's own Python, so no /proc/<pid>/environ shows it"),
        EnvWrite("TORCHINDUCTOR_COMPILE_THREADS", "1", "engine_core", "always",
                 "vllm 0.6.3 vllm/executor/multiproc_gpu_executor.py:41", condition="TP > 1 (multiprocessing workers)",
                 releases=ReleaseRange(None, "0.6.4")),
        EnvWrite("OMP_NUM_THREADS", "1", "engine_core", "if_unset",
                 "vllm 0.6.6 vllm/executor/multiproc_worker_utils.py:309-317", condition="TP > 1"),
    ),
    _health("0.6.6", f"{_API}:311-315", 500, "vllm 0.6.6 vllm/entrypoints/launcher.py:64-81 "
            "(HTTP 500, and the server exits unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1)"),
    _V0_METRICS,
    _profile("0.6.6", f"{_API}:496", f"{_API}:503", f"VLLM_TORCH_PROFILER_DIR ({_API}:491)"),
    None,
    _api_key("0.6.6", f"{_API}:572-583", env_wins=True), _GUARD_V1,
    "vllm 0.6.6 vllm/scripts.py:148 (`vllm --version`; 0.6.0-0.6.4 have none, vllm.__version__ then)",
    ("0.6.0", "0.6.6"),
    ("no /reset_prefix_cache in 0.6.x", _VERSION_NOTE, _LIB_FORK),
    api_key_env_wins=True,
)

_V07 = _line(
    "vllm-0.7.0-0.8.2", ReleaseRange("0.7.0", "0.8.3"), "fork",
    "vllm 0.7.3 vllm/envs.py:389 (default 'fork'; 0.8.0 makes the V1 engine default, VLLM_USE_V1=1, "
    "vllm/envs.py:522-523)",
    (
        EnvWrite("NCCL_CUMEM_ENABLE", "0", "every", "always", "vllm 0.8.2 vllm/__init__.py:32 (0.7.0 :29, 0.7.3 :32)",
                 condition="on `import vllm`, in every process that imports it"),
        EnvWrite("TORCHINDUCTOR_COMPILE_THREADS", "1", "every", "always", "vllm 0.8.2 vllm/__init__.py:35"),
    ),
    _health("0.7.3", f"{_API}:343-347", 500, "vllm 0.7.3 vllm/entrypoints/launcher.py (HTTP 500)"),
    _V0_METRICS,
    _profile("0.7.3", f"{_API}:677", f"{_API}:684", f"VLLM_TORCH_PROFILER_DIR ({_API}:672)"),
    _reset("0.7.3", f"{_API}:618", f"{_API}:616"),
    _api_key("0.7.3", f"{_API}:751-762", env_wins=True), _GUARD_V1,
    "vllm 0.7.3 vllm/entrypoints/cli/main.py:56-58 (`vllm --version`)",
    ("0.7.3", "0.8.2"),
    (_VERSION_NOTE, _LIB_FORK, "V1 metrics (0.8.0+) keep vllm:gpu_cache_usage_perc (vllm/v1/metrics/loggers.py:127 "
     "in 0.8.2); spec-decode counters there only from 0.8.5"),
    api_key_env_wins=True,
)

_V083 = _line(
    "vllm-0.8.3-0.9.0", ReleaseRange("0.8.3", "0.9.1"), "spawn",
    "vllm 0.8.5 vllm/entrypoints/utils.py:136 (cli_env_setup: VLLM_WORKER_MULTIPROC_METHOD=spawn when unset; "
    "called by vllm serve, vllm/entrypoints/cli/main.py:33)",
    (
        EnvWrite("NCCL_CUMEM_ENABLE", "0", "every", "always", f"vllm 0.8.4 {_OVERRIDE}:12",
                 releases=ReleaseRange(None, "0.8.5")),
        EnvWrite("NCCL_CUMEM_ENABLE", "0", "every", "always", f"vllm 0.8.5 {_OVERRIDE}:11-25",
                 condition="unless /dev/nvidia-caps-imex-channels exists (multi-node NVLink)",
                 visible_in=_SPAWNED, releases=ReleaseRange("0.8.5", None)),
        *_import_writes("0.8.5", 29, 32, spawned=True),
        _spawn_write("0.8.5", "vllm/entrypoints/utils.py:136"),
    ),
    _health("0.8.5", f"{_API}:391-395", 500, "vllm 0.8.5 vllm/entrypoints/launcher.py (HTTP 500)"),
    _v1_metrics("0.8.5", "156,161,169", "125,130,135", usage="vllm:gpu_cache_usage_perc"),
    _profile("0.8.5", f"{_API}:768", f"{_API}:775", f"VLLM_TORCH_PROFILER_DIR ({_API}:763)"),
    _reset("0.8.5", f"{_API}:696", f"{_API}:689", ("device",)),
    _api_key("0.8.5", f"{_API}:843-854"), _GUARD_V1,
    "vllm 0.8.5 vllm/entrypoints/cli/main.py:36-38 (`vllm --version`)",
    ("0.8.5", "0.9.0"),
    (_VERSION_NOTE, _LIB_FORK, "0.8.3-0.8.4: env_override.py:16/19 set PYTORCH_NVML_BASED_CUDA_CHECK and "
     "TORCHINDUCTOR_COMPILE_THREADS"),
)

_V091 = _line(
    "vllm-0.9.1-0.10.1.1", ReleaseRange("0.9.1", "0.10.2"), "spawn",
    "vllm 0.10.1.1 vllm/entrypoints/utils.py:169 (cli_env_setup)",
    (
        EnvWrite("NCCL_CUMEM_ENABLE", "0", "every", "if_unset", f"vllm 0.10.1.1 {_OVERRIDE}:16-32",
                 condition="and no /dev/nvidia-caps-imex-channels; a user's value is kept (logged: "
                           "'NCCL_CUMEM_ENABLE is set to ..., skipping override')", visible_in=_SPAWNED),
        *_import_writes("0.10.1.1", 36, 39, spawned=True),
        _spawn_write("0.10.1.1", "vllm/entrypoints/utils.py:169"),
    ),
    _health("0.9.2", f"{_API}:415-419", 500, "vllm 0.9.2 vllm/entrypoints/launcher.py (HTTP 500)"),
    _v1_metrics("0.10.1.1", "189,198,245", "138,143,148"),
    _profile("0.9.2", f"{_API}:1010", f"{_API}:1017", f"VLLM_TORCH_PROFILER_DIR ({_API}:1005)"),
    _reset("0.9.2", f"{_API}:921", f"{_API}:912", ("device",)),
    _api_key("0.9.2", f"{_API}:1181; guard {_API}:1094"), _GUARD_V1,
    "vllm 0.9.2 vllm/entrypoints/cli/main.py:47-49 (`vllm --version`)",
    ("0.9.2", "0.10.1.1"),
    (_VERSION_NOTE, _LIB_FORK, "vllm:kv_cache_usage_perc from 0.9.2 (vllm/v1/metrics/loggers.py:217); "
     "vllm:gpu_cache_usage_perc before, kept as a deprecated duplicate"),
)

_V0102 = _line(
    "vllm-0.10.2-0.13", ReleaseRange("0.10.2", "0.14.0"), "spawn",
    "vllm 0.12.0 vllm/entrypoints/utils.py:176 (cli_env_setup)",
    (
        *_import_writes("0.12.0", 19, 22, spawned=True),
        _spawn_write("0.12.0", "vllm/entrypoints/utils.py:176"),
        EnvWrite("OMP_NUM_THREADS", "per-worker count", "engine_core", "if_unset",
                 "vllm 0.12.0 vllm/v1/executor/multiproc_executor.py:862-887",
                 condition="TP > 1, not on CPU", visible_in=("worker",)),
    ),
    _health("0.11.0", f"{_API}:345-352 (503 from 0.11.0; 0.10.2 :447-451 lets it become HTTP 500)", 503,
            f"vllm 0.11.0 {_API}:351"),
    _v1_metrics("0.10.2", "189,198,245", "151,156,161"),
    _profile("0.12.0", f"{_API}:1072", f"{_API}:1079", f"VLLM_TORCH_PROFILER_DIR ({_API}:1060)"),
    _reset("0.12.0", f"{_API}:879", f"{_API}:857", ("reset_running_requests",)),
    _api_key("0.12.0", f"{_API}:1418; guard {_API}:1142"), _GUARD_V1,
    "vllm 0.11.0 vllm/entrypoints/cli/main.py:37-39 (`vllm --version`)",
    ("0.10.2", "0.11.0", "0.12.0"),
    (_VERSION_NOTE, _LIB_FORK, "vLLM writes no NCCL_CUMEM_ENABLE from 0.10.2 (vllm/env_override.py)",
     "from 0.11 `vllm serve --help` lists config groups; the flags need --help=all"),
)

_V014 = _line(
    "vllm-0.14+", ReleaseRange("0.14.0", None), "spawn",
    "vllm 0.33.0 vllm/entrypoints/common/startup.py:147-149 (cli_env_setup, called by vllm/entrypoints/cli/main.py:68)",
    (
        *_import_writes("0.33.0", 164, 168, spawned=True),
        EnvWrite("TRITON_CACHE_AUTOTUNING", "1", "every", "if_unset", f"vllm 0.33.0 {_OVERRIDE}:176",
                 visible_in=_SPAWNED, releases=ReleaseRange("0.20.0", None)),
        _spawn_write("0.33.0", "vllm/entrypoints/common/startup.py:147-149"),
        EnvWrite("OMP_NUM_THREADS", "per-worker count", "engine_core", "if_unset",
                 "vllm 0.33.0 vllm/v1/executor/multiproc_executor.py:1238-1248",
                 condition="TP > 1, not on CPU", visible_in=("worker",)),
        # beside it, the mark that vLLM chose that count (the worker may drop it once started: utils/torch_utils.py:
        # 238-266); the API server sets both around starting its engine cores too (v1/engine/utils.py:234-236)
        EnvWrite("VLLM_OMP_NUM_THREADS_SET_BY_VLLM", "1", "engine_core", "always",
                 "vllm 0.33.0 vllm/v1/executor/multiproc_executor.py:1248",
                 condition="TP > 1, not on CPU, with the OMP_NUM_THREADS vLLM chose", visible_in=("worker",),
                 releases=ReleaseRange("0.33.0", None)),
        # read in 0.33.0 only (earlier releases of the line not read): the import-time writes of env_override.py
        EnvWrite("TILELANG_CLEANUP_TEMP_FILES", "1", "every", "if_unset", f"vllm 0.33.0 {_OVERRIDE}:183",
                 visible_in=_SPAWNED, releases=ReleaseRange("0.33.0", None)),
        EnvWrite("LD_LIBRARY_PATH", "the CUDA compat folder, put first", "every", "always",
                 f"vllm 0.33.0 {_OVERRIDE}:51-94 (_maybe_set_cuda_compatibility_path, called at :147)",
                 condition="VLLM_ENABLE_CUDA_COMPATIBILITY=1 and a compat folder exists (VLLM_CUDA_COMPATIBILITY_PATH, "
                           "$CONDA_PREFIX/cuda-compat or /usr/local/cuda-<torch's CUDA>/compat)",
                 visible_in=_SPAWNED, releases=ReleaseRange("0.33.0", None)),
    ),
    _health("0.33.0", "vllm/entrypoints/serve/instrumentator/health.py:22-33", 503,
            "vllm 0.33.0 vllm/entrypoints/serve/instrumentator/health.py:32-33"),
    _v1_metrics("0.33.0", "528,538,620", "229,230,231"),
    _profile("0.33.0", "vllm/entrypoints/serve/profile/api_router.py:38", "vllm/entrypoints/serve/profile/api_router.py:51",
             "--profiler-config '{\"profiler\": \"torch\", \"torch_profiler_dir\": DIR}' "
             "(vllm/entrypoints/serve/profile/api_router.py:59-66; 0.14 still read VLLM_TORCH_PROFILER_DIR "
             "with a deprecation warning, vllm/config/profiler.py:132-133)",
             ("profile_prefix", "delay_iterations", "max_iterations", "profiler_kwargs"), output_env=None),
    _reset("0.33.0", "vllm/entrypoints/serve/dev/cache/api_router.py:20-43",
           "vllm/entrypoints/launchers/api_server/routers.py:46", ("reset_running_requests", "reset_external")),
    _api_key("0.33.0", "vllm/entrypoints/serve/middleware/register.py:33; guard "
             "vllm/entrypoints/serve/middleware/authenticate.py:11,59"),
    ("/v1", "/v2", "/inference", "/cohere"),
    "vllm 0.33.0 vllm/entrypoints/cli/main.py:94-96 (`vllm --version`)",
    ("0.14.0", "0.16.0", "0.20.0", "0.25.0", "0.30.0", "0.33.0"),
    (_VERSION_NOTE, _LIB_FORK,
     "guarded prefixes: /v1 only up to 0.20 (vllm/entrypoints/openai/server_utils.py:83 in 0.20.0); "
     "('/v1', '/v2', '/inference') in 0.25.0; + '/cohere' from 0.28.0",
     "vllm bench serve reports spec_decode_acceptance_length from 0.14 (vllm/benchmarks/serve.py:1160-1162 "
     "in 0.33.0: 1 + accepted/drafts over the run, from /metrics)"),
)

VLLM_PROFILES: tuple[EngineProfile, ...] = (_V06, _V07, _V083, _V091, _V0102, _V014)

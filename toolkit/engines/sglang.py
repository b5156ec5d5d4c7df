"""SGLang release lines, read from the released wheels (paths as in the repository's ``python/``).

Cut where a behaviour the toolkit depends on changed: 0.4.x overwrites ``NCCL_CUMEM_ENABLE`` (and five
more); 0.5.0-0.5.4.post1 still does (``str(int(--enable-symm-mem))``) and ``/health`` generates;
0.5.4.post2-0.5.19 keeps a user's value; 0.5.20+ drops ``--cuda-graph-max-bs`` (``ambiguous option``).
Every write happens in the launcher before it spawns the schedulers, so their ``/proc/<pid>/environ``
shows the written values and the launcher's shows what the user exported.
"""

from __future__ import annotations

from typing import Any

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

__all__ = ["SGLANG_PROFILES"]

_ENGINE_PY = "python/sglang/srt/entrypoints/engine.py"
_HTTP = "python/sglang/srt/entrypoints/http_server.py"
_SPAWNED: tuple[ProcessRole, ...] = ("worker", "detokenizer", "dp_controller")
_READY = "The server is fired up and ready to roll!"
_VERSION_CMD = "python -c \"import importlib.metadata as m; print(m.version('sglang'))\""
_VERSION_NOTE = (
    "sglang.__version__ (python -c 'import sglang; print(sglang.__version__)') gives the same but imports "
    "the runtime; from 0.5.7 python/sglang/version.py:1-8 reads sglang/_version.py (written at build time) "
    "and falls back to importlib.metadata, so a source checkout on PYTHONPATH reports the installed release "
    "(up to 0.5.6 version.py:1 is a literal)"
)


def _w(name: str, value: str, when: str, src: str, **kw: object) -> EnvWrite:
    return EnvWrite(name, value, "server", when, src, visible_in=_SPAWNED, **kw)  # type: ignore[arg-type]


def _health_generating(release: str, health: int, starting: int, sleep: int, timeout: int, exiting: int,
                       env_switch: str | None, bypassed_by: tuple[str, ...] = ()) -> tuple[HealthCheck, ...]:
    """0.5.x: one handler serves both paths; it sends a 1-token request and sleeps 1 s before looking."""
    unhealthy = (
        f"server still starting: warm-up not finished ({_HTTP}:{starting})",
        f"shutting down ({_HTTP}:{exiting})",
        f"no detokenizer output within SGLANG_HEALTH_CHECK_TIMEOUT (default 20 s) ({_HTTP}:{timeout})",
    )
    src = f"sglang {release} {_HTTP}:{health}-{health + 1}, asyncio.sleep(1) at :{sleep}"
    health_note = (f"; /health skips generation only with {env_switch}" if env_switch else "")
    return tuple(HealthCheck(path, "GET", True, 1.0, src + note, 20.0, 503, unhealthy,
                             answers=_ANSWERS_05(src), bypassed_by=bypassed_by)
                 for path, note in (("/health_generate", ""), ("/health", health_note)))


def _ANSWERS_05(src: str) -> tuple[HealthAnswer, ...]:  # noqa: N802 - reads like the constant it is
    """200 after a token came back; 503 (no body) for starting, shutting down and stuck alike."""
    return (HealthAnswer(200, "ready", f"{src} (200 once the health request's token came back)"),
            HealthAnswer(503, "starting_or_dead", f"{src} (503, no body: warm-up not finished, shutting down, "
                                                   "or no detokenizer output for 20 s; only the log says which)"))


def _metrics(release: str, path: str, running: int, queue: int, usage: int, accept: int,
             middleware: int) -> MetricNames:
    return MetricNames(
        "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
        f"sglang {release} {path}:{running},{queue},{usage},{accept}; middleware {_HTTP}:{middleware}",
        spec_accept_length="sglang:spec_accept_length", enabled_by="--enable-metrics",
    )


def _line(name: str, releases: ReleaseRange, release: str, profile_lines: tuple[int, int],
          fields: tuple[str, ...], api_key_open: tuple[str, ...] = ("/health", "/metrics"),
          **kw: Any) -> EngineProfile:
    """What every SGLang line shares, and its /start_profile, /stop_profile read in ``release``."""
    start, stop = profile_lines
    return EngineProfile(
        engine="sglang", name=name, releases=releases, start_method="spawn", ready_log_line=_READY,
        models_path="/v1/models", metrics_path="/metrics", api_key_flag="--api-key", api_key_env=None,
        api_key_guarded=("/",), api_key_open=api_key_open, version_command=_VERSION_CMD,
        start_profile=Endpoint("/start_profile", ("GET", "POST"), f"sglang {release} {_HTTP}:{start}",
                               body_fields=fields, output_env="SGLANG_TORCH_PROFILER_DIR",
                               note="output_dir defaults to $SGLANG_TORCH_PROFILER_DIR, else /tmp; "
                                    "num_steps stops by itself"),
        stop_profile=Endpoint("/stop_profile", ("GET", "POST"), f"sglang {release} {_HTTP}:{stop}"), **kw)


_PROFILE_FIELDS_04 = ("output_dir", "start_step", "num_steps", "activities", "with_stack", "record_shapes",
                      "profile_by_stage")
_PROFILE_FIELDS_059 = (*_PROFILE_FIELDS_04, "merge_profiles", "profile_prefix", "profile_stages")
_PROFILE_FIELDS_0523 = (*_PROFILE_FIELDS_059, "profile_id", "detailed_annotations")
_FLUSH_NOTE = "does nothing while requests are running or waiting (says so in the body)"

_V04 = _line(
    "sglang-0.4.x", ReleaseRange("0.4.0", "0.5.0rc0"), "0.4.10", (432, 453), _PROFILE_FIELDS_04,
    start_method_source=f"sglang 0.4.10 {_ENGINE_PY}:670 mp.set_start_method('spawn', force=True)",
    env_writes=(
        _w("TF_CPP_MIN_LOG_LEVEL", "3", "always", f"sglang 0.4.10 {_ENGINE_PY}:625"),
        _w("NCCL_CUMEM_ENABLE", "0", "always", f"sglang 0.4.10 {_ENGINE_PY}:626"),
        _w("NCCL_NVLS_ENABLE", "0", "always", f"sglang 0.4.10 {_ENGINE_PY}:627",
           condition="'1' with --enable-nccl-nvls (0.4.3+; 0.4.0-0.4.1 write '0' unconditionally, "
                     "python/sglang/srt/server.py:571)"),
        _w("NCCL_NVLS_ENABLE", "1", "with_flag", f"sglang 0.4.10 {_ENGINE_PY}:627", flag="--enable-nccl-nvls",
           releases=ReleaseRange("0.4.3", None)),
        _w("TORCH_NCCL_AVOID_RECORD_STREAMS", "1", "always", f"sglang 0.4.10 {_ENGINE_PY}:628"),
        _w("CUDA_DEVICE_MAX_CONNECTIONS", "4", "always", f"sglang 0.4.10 {_ENGINE_PY}:629"),
        _w("CUDA_MODULE_LOADING", "AUTO", "always", f"sglang 0.4.10 {_ENGINE_PY}:630 (absent in 0.4.3, present in 0.4.5)",
           releases=ReleaseRange("0.4.5", None)),
    ),
    health=(
        HealthCheck("/health_generate", "GET", True, 1.0,
                    f"sglang 0.4.10 {_HTTP}:238-293, asyncio.sleep(1) at :274", 20.0, 503,
                    (f"shutting down ({_HTTP}:240)",
                     f"no detokenizer output within SGLANG_HEALTH_CHECK_TIMEOUT (default 20 s) ({_HTTP}:110)"),
                    answers=(HealthAnswer(200, "ready", f"sglang 0.4.10 {_HTTP}:279 (a token came back)"),
                             HealthAnswer(503, "starting_or_dead", f"sglang 0.4.10 {_HTTP}:243,293 (shutting "
                                          "down, or no detokenizer output for 20 s; before warm-up the request "
                                          "waits in the scheduler)"))),
        HealthCheck("/health", "GET", False, 0.0, f"sglang 0.4.10 {_HTTP}:232-235 (always 200: HTTP is up)",
                    answers=(HealthAnswer(200, "ready", f"sglang 0.4.10 {_HTTP}:235 (HTTP is up)"),)),
    ),
    ready_log_source=f"sglang 0.4.10 {_HTTP}:1087", info_paths=("/get_server_info",),
    metrics=_metrics("0.4.10", "python/sglang/srt/metrics/collector.py", 161, 189, 175, 210, 935),
    flush_cache=Endpoint("/flush_cache", ("GET", "POST"), f"sglang 0.4.10 {_HTTP}:421", note=_FLUSH_NOTE),
    api_key_source="sglang 0.4.10 python/sglang/srt/utils.py:967-978 (exact 'Bearer KEY' match)",
    version_source="sglang 0.4.10 python/sglang/version.py:1 (__version__ literal)",
    flag_releases=("0.4.0", "0.4.10"),
    notes=("bench_serving: python -m sglang.bench_serving; accept length from GET /get_server_info",),
)

_V050 = _line(
    "sglang-0.5.0-0.5.4.post1", ReleaseRange("0.5.0rc0", "0.5.4.post2"), "0.5.4.post1", (634, 656),
    (*_PROFILE_FIELDS_04, "merge_profiles"),
    start_method_source=f"sglang 0.5.4.post1 {_ENGINE_PY}:734",
    env_writes=(
        _w("TF_CPP_MIN_LOG_LEVEL", "3", "always", f"sglang 0.5.4.post1 {_ENGINE_PY}:672"),
        _w("NCCL_CUMEM_ENABLE", "0", "always", f"sglang 0.5.4.post1 {_ENGINE_PY}:673 (also 0.5.0rc2 :633, 0.5.1 :651)",
           condition="str(int(--enable-symm-mem)): a user's value is overwritten"),
        _w("NCCL_CUMEM_ENABLE", "1", "with_flag", f"sglang 0.5.4.post1 {_ENGINE_PY}:673", flag="--enable-symm-mem"),
        _w("NCCL_NVLS_ENABLE", "0", "always", f"sglang 0.5.4.post1 {_ENGINE_PY}:674-675",
           condition="str(int(--enable-nccl-nvls)), skipped with --enable-symm-mem"),
        _w("NCCL_NVLS_ENABLE", "1", "with_flag", f"sglang 0.5.4.post1 {_ENGINE_PY}:675", flag="--enable-nccl-nvls"),
        _w("CUDA_DEVICE_MAX_CONNECTIONS", "4", "always", f"sglang 0.5.4 {_ENGINE_PY}:675",
           releases=ReleaseRange(None, "0.5.4.post1")),
        _w("CUDA_DEVICE_MAX_CONNECTIONS", "8", "always", f"sglang 0.5.4.post1 {_ENGINE_PY}:676",
           releases=ReleaseRange("0.5.4.post1", None)),
        _w("CUDA_MODULE_LOADING", "AUTO", "always", f"sglang 0.5.4.post1 {_ENGINE_PY}:677"),
        _w("TRTLLM_ENABLE_PDL", "1", "always", f"sglang 0.5.1 {_ENGINE_PY}:657",
           releases=ReleaseRange("0.5.1", "0.5.2")),
        _w("TRTLLM_ENABLE_PDL", "1", "if_unset", f"sglang 0.5.4.post1 {_ENGINE_PY}:679-681",
           condition="kept only when exported as '0'", releases=ReleaseRange("0.5.2", None)),
        _w("CUTE_DSL_LOG_LEVEL", "30", "if_unset", f"sglang 0.5.4.post1 {_ENGINE_PY}:683-685",
           releases=ReleaseRange("0.5.3", None)),
        _w("CUTE_DSL_LOG_TO_CONSOLE", "1", "if_unset", f"sglang 0.5.4.post1 {_ENGINE_PY}:687-689",
           releases=ReleaseRange("0.5.3", None)),
        _w("NCCL_ALGO", "allreduce:tree", "with_flag", "sglang 0.5.4.post1 python/sglang/srt/server_args.py:1730",
           flag="--enable-deterministic-inference", condition="and TP > 1 on CUDA", releases=ReleaseRange("0.5.3", None)),
    ),
    health=_health_generating("0.5.4.post1", 402, 416, 452, 132, 412, None),
    ready_log_source=f"sglang 0.5.4.post1 {_HTTP}:1548", info_paths=("/get_server_info",),
    metrics=_metrics("0.5.4.post1", "python/sglang/srt/metrics/collector.py", 167, 179, 203, 229, 218),
    flush_cache=Endpoint("/flush_cache", ("GET", "POST"), f"sglang 0.5.4.post1 {_HTTP}:613", note=_FLUSH_NOTE),
    api_key_source="sglang 0.5.4.post1 python/sglang/srt/utils/common.py:1105-1109",
    version_source="sglang 0.5.4.post1 python/sglang/version.py:1 (__version__ literal)",
    flag_releases=("0.5.1", "0.5.4.post1"),
    notes=("the issue's 'from 0.5 on a user-set NCCL_CUMEM_ENABLE is kept' is wrong for 0.5.0rc0-0.5.4.post1",),
)

# Writes 0.5.4.post2+ share with 0.5.20+ (cited at their 0.5.19 / 0.5.23 lines by the callers).
def _keeps_user_values(release: str, lines: dict[str, str]) -> tuple[EnvWrite, ...]:
    e = f"sglang {release} {_ENGINE_PY}"
    return (
        _w("NCCL_CUMEM_ENABLE", "0", "if_unset", f"{e}:{lines['cumem']}",
           condition="'1' on one node with --enable-kv-cache-sharding and SGLANG_ENABLE_KV_SHARD_ZERO_SM_GATHER"
           if release == "0.5.23" else ""),
        _w("NCCL_CUMEM_ENABLE", "1", "with_flag", f"{e}:{lines['cumem']}", flag="--enable-symm-mem",
           releases=ReleaseRange("0.5.4.post3", None)),
        _w("NCCL_CUMEM_ENABLE", "1", "if_unset", f"{e}:{lines['mnnvl']}", condition="--nnodes > 1 on an MNNVL fabric",
           releases=ReleaseRange("0.5.17", None)),
        _w("NCCL_MNNVL_ENABLE", "1", "if_unset", f"{e}:{lines['mnnvl']}", condition="--nnodes > 1 on an MNNVL fabric",
           releases=ReleaseRange("0.5.17", None)),
        _w("NCCL_NVLS_ENABLE", "0", "always", "sglang 0.5.4.post2 python/sglang/srt/entrypoints/engine.py:682-683",
           condition="str(int(--enable-nccl-nvls)), skipped with --enable-symm-mem",
           releases=ReleaseRange(None, "0.5.4.post3")),
        _w("NCCL_NVLS_ENABLE", "0", "if_unset", f"{e}:{lines['nvls']}", releases=ReleaseRange("0.5.4.post3", None)),
        _w("NCCL_NVLS_ENABLE", "1", "with_flag", f"{e}:{lines['nvls']}", flag="--enable-nccl-nvls"),
        _w("NCCL_NVLS_ENABLE", "1", "with_flag", f"{e}:{lines['nvls']}", flag="--enable-symm-mem",
           releases=ReleaseRange("0.5.4.post3", None)),
        _w("NCCL_GRAPH_MIXING_SUPPORT", "0", "if_unset", f"{e}:{lines['mixing']}", condition="--dcp-size > 1",
           releases=ReleaseRange("0.5.15", None)),
        _w("CUDA_DEVICE_MAX_CONNECTIONS", "8", "always", f"{e}:{lines['cdmc']}"),
        _w("TRTLLM_ENABLE_PDL", "1", "if_unset", f"{e}:{lines['pdl']}", condition="kept only when exported as '0'"),
        _w("CUTE_DSL_LOG_LEVEL", "30", "if_unset", f"{e}:{lines['cute']}"),
        _w("CUTE_DSL_LOG_TO_CONSOLE", "1", "if_unset", f"{e}:{lines['cute_console']}"),
        _w("NCCL_ALGO", "allreduce:tree", "with_flag", f"sglang {release} {lines['algo']}",
           flag="--enable-deterministic-inference", condition="and TP > 1 on CUDA"),
        _w("NCCL_MIN_NCHANNELS", "SGLANG_DETERMINISTIC_NCCL_NCHANNELS", "with_flag", f"sglang {release} {lines['nch']}",
           flag="--enable-deterministic-inference", condition="and TP > 1 on CUDA", releases=ReleaseRange("0.5.18", None)),
        _w("NCCL_MAX_NCHANNELS", "SGLANG_DETERMINISTIC_NCCL_NCHANNELS", "with_flag", f"sglang {release} {lines['nch']}",
           flag="--enable-deterministic-inference", condition="and TP > 1 on CUDA", releases=ReleaseRange("0.5.18", None)),
        _w("NCCL_CUMEM_ENABLE", "1", "if_unset", f"sglang {release} {lines['deepep']}",
           condition="--moe-a2a-backend deepep_v2", releases=ReleaseRange("0.5.19", None)),
    )


_V0519 = _line(
    "sglang-0.5.4.post2-0.5.19", ReleaseRange("0.5.4.post2", "0.5.20"), "0.5.19", (1171, 1182),
    _PROFILE_FIELDS_0523,
    start_method_source=f"sglang 0.5.19 {_ENGINE_PY}:1747",
    env_writes=(
        *_keeps_user_values("0.5.19", {
            "cumem": "1658-1659", "mnnvl": "1655-1657", "nvls": "1660-1667", "mixing": "1668-1672",
            "cdmc": "1673", "pdl": "1675-1677", "cute": "1679-1681", "cute_console": "1683-1685",
            "algo": "python/sglang/srt/arg_groups/attention_hook.py:609",
            "nch": "python/sglang/srt/arg_groups/attention_hook.py:630-631",
            "deepep": "python/sglang/srt/arg_groups/moe_hook.py:192"}),
        _w("CUDA_MODULE_LOADING", "AUTO", "always", f"sglang 0.5.18 {_ENGINE_PY}:1675 (gone in 0.5.19)",
           releases=ReleaseRange(None, "0.5.19")),
        _w("TF_CPP_MIN_LOG_LEVEL", "3", "always", f"sglang 0.5.5 {_ENGINE_PY}:678 (gone in 0.5.6)",
           releases=ReleaseRange(None, "0.5.6")),
    ),
    health=_health_generating("0.5.19", 662, 676, 721, 193, 672,
                              "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 (0.5.6+, default 1; http_server.py:687)"),
    ready_log_source=f"sglang 0.5.19 {_HTTP}:2412",
    info_paths=("/server_info", "/get_server_info"),  # /server_info from 0.5.6
    metrics=_metrics("0.5.19", "python/sglang/srt/observability/metrics_collector.py", 278, 284, 318, 425, 289),
    flush_cache=Endpoint("/flush_cache", ("GET", "POST"), f"sglang 0.5.19 {_HTTP}:980", note=_FLUSH_NOTE),
    api_key_source="sglang 0.5.19 python/sglang/srt/utils/auth.py:100 (open prefixes), --admin-api-key for admin routes",
    version_source="sglang 0.5.19 python/sglang/version.py:1-8 (literal up to 0.5.6)",
    flag_releases=("0.5.4.post2", "0.5.9", "0.5.14", "0.5.16", "0.5.17", "0.5.19"),
    notes=(_VERSION_NOTE,
           "--cuda-graph-max-bs: a deprecated alias of --cuda-graph-max-bs-decode from 0.5.14 "
           "(python/sglang/srt/server_args.py:6359 in 0.5.14, :3929 in 0.5.19)",
           "bench_serving moved to python -m sglang.benchmark.serving in 0.5.15 (sglang.bench_serving "
           "stays as a deprecated alias)",
           "read again in 0.5.17 (the release of the GPU field test, issue 23): ready line "
           f"{_HTTP}:2355; /health and /health_generate :646-665; /flush_cache :946-961 takes ?timeout= and "
           "answers 400 when it did not flush, as 0.5.23; /start_profile and /stop_profile :1137-1155; the "
           "scheduler renames itself sglang::scheduler{prefix} (managers/scheduler.py:4859), the detokenizer "
           "sglang::detokenizer (managers/detokenizer_manager.py:521); --disable-cuda-graph is a deprecated alias "
           "that still turns both phases' graphs off (python/sglang/srt/server_args.py:8332-8337, :4297-4299)"),
)

_V0520 = _line(
    "sglang-0.5.20+", ReleaseRange("0.5.20", None), "0.5.23", (1221, 1232), _PROFILE_FIELDS_0523,
    start_method_source=f"sglang 0.5.23 {_ENGINE_PY}:1995",
    env_writes=(
        *_keeps_user_values("0.5.23", {
            "cumem": "1898-1907", "mnnvl": "1884-1886", "nvls": "1908-1915", "mixing": "1916-1920",
            "cdmc": "1921", "pdl": "1923-1925", "cute": "1927-1929", "cute_console": "1931-1933",
            "algo": "python/sglang/srt/arg_groups/attention_hook.py:676",
            "nch": "python/sglang/srt/arg_groups/attention_hook.py:697-698",
            "deepep": "python/sglang/srt/arg_groups/moe_hook.py:403"}),
        _w("NCCL_GRAPH_REGISTER", "0", "with_flag", "sglang 0.5.20 python/sglang/srt/arg_groups/parallel_hook.py:236-237,258",
           flag="--enable-tp-lm-head-all-to-all", condition="only when unset (0.5.22 also with a pausable graph pool)",
           releases=ReleaseRange(None, "0.5.23")),
        _w("NCCL_GRAPH_REGISTER", "0", "if_unset", "sglang 0.5.23 python/sglang/srt/arg_groups/parallel_hook.py:369-371,425",
           condition="max(TP, EP, DP) > 1 and CUDA graphs on: every multi-GPU launch by default",
           releases=ReleaseRange("0.5.23", None)),
    ),
    # SGLANG_DIAG_BYPASS_HEALTH_GENERATE=1: /health and /health_generate answer 200 once past start-up, without
    # generating (0.5.23 http_server.py:739-743, environ.py:346; 0.5.22 http_server.py:723): no proof then
    health=_health_generating("0.5.23", 721, 735, 780, 218, 731,
                              "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 (default 1; http_server.py:746)",
                              ("SGLANG_DIAG_BYPASS_HEALTH_GENERATE",)),
    ready_log_source=f"sglang 0.5.23 {_HTTP}:2600",
    info_paths=("/server_info", "/get_server_info"),  # /get_server_info deprecated (http_server.py:853-860)
    metrics=_metrics("0.5.23", "python/sglang/srt/observability/metrics_collector.py", 365, 371, 405, 512, 315),
    flush_cache=Endpoint("/flush_cache", ("GET", "POST"), f"sglang 0.5.23 {_HTTP}:1025-1040",
                         query_fields=("timeout",), note=_FLUSH_NOTE + "; HTTP 400 when it did not flush"),
    api_key_source="sglang 0.5.23 python/sglang/srt/utils/auth.py:101-106 (open prefixes), 154-200 (middleware)",
    api_key_open=("/health", "/ready", "/metrics"),
    version_source="sglang 0.5.23 python/sglang/version.py:1-23; `sglang version` prints 'sglang version: X' "
                   "(python/sglang/cli/main.py:7-8)",
    flag_releases=("0.5.20", "0.5.23"),
    notes=(_VERSION_NOTE,
           "--cuda-graph-max-bs removed: `--cuda-graph-max-bs 8` exits with 'ambiguous option: --cuda-graph-max-bs "
           "could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill' (argparse, allow_abbrev default)",
           "--tp works only by prefix matching: the option is --tp-size / --tensor-parallel-size "
           "(python/sglang/srt/server_args.py:679 ArgumentParser(prog='sglang serve'))",
           "CUDA-graph failure hint names --cuda-graph-max-bs-decode "
           "(python/sglang/srt/model_executor/runner_backend_utils/__init__.py:15-19)"),
)

SGLANG_PROFILES: tuple[EngineProfile, ...] = (_V04, _V050, _V0519, _V0520)

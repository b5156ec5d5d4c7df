"""toolkit.engines: release lines, their beliefs, and the flag lists generated from the releases.

The flag lists (toolkit/engines/flags) and help captures (tests/data/help) come from the
released wheels' own argument parsers (scripts/engine_contracts.py); the env-write facts
were read in the wheels, each with its source line. These tests pin the boundaries where
behaviour changed, so that a profile edited by hand cannot drift from what was read.
"""

from __future__ import annotations

import doctest
import pathlib
import subprocess
import sys

import pytest

import toolkit.engines as engines
from toolkit.engines import (
    PROFILES,
    ReleaseRange,
    VersionError,
    bench_names,
    flaglists,
    load_release_flags,
    parse_version,
    parse_version_output,
    peer_names,
    profile_for,
    profile_named,
    release_profile,
    releases,
    resolve_profile,
    versions,
)
from toolkit.server.help_table import parse_help

REPO = pathlib.Path(__file__).resolve().parents[1]
HELP = REPO / "tests" / "data" / "help"
ALL_PROFILES = [p for lines in PROFILES.values() for p in lines]


def test_public_api_is_pinned() -> None:
    assert engines.__all__ == [
        "PEER_NAMES", "PROFILES", "RELEASE_HINTS", "Endpoint", "EngineProfile", "EnvOutcome", "EnvWrite", "FlagEntry",
        "HealthAnswer", "HealthCheck", "MetricNames", "PeerName", "ProfileMatch", "ReleaseFlags", "ReleaseHint",
        "ReleaseRange", "Version", "VersionError", "flag_history", "hint_text", "load_release_flags", "parse_version",
        "parse_version_output", "peer_names",
        "profile_for", "profile_named", "resolve_profile",
    ]


@pytest.mark.parametrize("module", [engines, versions, release_profile, flaglists, releases, bench_names])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


def test_package_imports_only_the_standard_library() -> None:
    code = ("import sys, toolkit.engines; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'pandas', 'numpy', 'aiohttp', 'fabric', 'ipywidgets', 'sqlite3'}); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


# --- versions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lower, higher",
    [("0.5.0rc2", "0.5.0"), ("0.5.0", "0.5.0.post1"), ("0.5.4.post1", "0.5.4.post2"), ("0.5.4.post3", "0.5.5"),
     ("0.5.9", "0.5.10"), ("0.5.19", "0.5.20"), ("0.5.20.dev3", "0.5.20"), ("0.5.20rc1.dev2", "0.5.20rc1"),
     ("0.10.1.1", "0.10.2"), ("0.9.2", "0.33.0"), ("0.5.20.dev1", "0.5.20rc0")],
)
def test_versions_order_like_pip(lower: str, higher: str) -> None:
    assert parse_version(lower) < parse_version(higher)
    assert not parse_version(higher) <= parse_version(lower)


def test_version_equality_ignores_trailing_zeros_and_local_labels_are_kept() -> None:
    v = parse_version("0.33.0+cu128")
    assert v == "0.33" and v.local == "cu128" and v.base == "0.33.0" and str(v) == "0.33.0+cu128"


@pytest.mark.parametrize(
    "output, expected",
    [("0.5.23\n", "0.5.23"),
     ("sglang version: 0.5.23\n", "0.5.23"),
     ("INFO 11-29 10:00:01 [__init__.py:216] Automatically detected platform cuda.\n0.33.0\n", "0.33.0"),
     ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:61: FutureWarning: x\n0.5.4.post2\n", "0.5.4.post2"),
     ("Name: vllm\nVersion: 0.11.1.dev12+g1a2b3c.cu128\nSummary: A high-throughput engine 2.0\n",
      "0.11.1.dev12+g1a2b3c.cu128")],
)
def test_parse_version_output(output: str, expected: str) -> None:
    assert parse_version_output(output).text == expected


@pytest.mark.parametrize("output", ["", "ModuleNotFoundError: No module named 'sglang'\n", "command not found"])
def test_parse_version_output_without_a_version_raises(output: str) -> None:
    with pytest.raises(VersionError, match="no release number"):
        parse_version_output(output)


def test_release_range_bounds() -> None:
    line = ReleaseRange("0.5.4.post2", "0.5.20")
    assert "0.5.4.post2" in line and "0.5.19" in line and "0.5.20.dev0" in line
    assert "0.5.4.post1" not in line and "0.5.20" not in line and "garbage" not in ReleaseRange(None, None)
    with pytest.raises(VersionError):
        ReleaseRange("not-a-version", None)


# --- profile lookup -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "engine, version, name",
    [("sglang", "0.4.0", "sglang-0.4.x"), ("sglang", "0.4.10", "sglang-0.4.x"),
     ("sglang", "0.4.10.post2", "sglang-0.4.x"), ("sglang", "0.5.0rc2", "sglang-0.5.0-0.5.4.post1"),
     ("sglang", "0.5.0", "sglang-0.5.0-0.5.4.post1"), ("sglang", "0.5.4.post1", "sglang-0.5.0-0.5.4.post1"),
     ("sglang", "0.5.4.post2", "sglang-0.5.4.post2-0.5.19"), ("sglang", "0.5.9", "sglang-0.5.4.post2-0.5.19"),
     ("sglang", "0.5.19", "sglang-0.5.4.post2-0.5.19"), ("sglang", "0.5.20", "sglang-0.5.20+"),
     ("sglang", "0.5.23", "sglang-0.5.20+"),
     ("vllm", "0.6.0", "vllm-0.6.x"), ("vllm", "0.6.6.post1", "vllm-0.6.x"), ("vllm", "0.7.0", "vllm-0.7.0-0.8.2"),
     ("vllm", "0.8.2", "vllm-0.7.0-0.8.2"), ("vllm", "0.8.3", "vllm-0.8.3-0.9.0"), ("vllm", "0.9.0.1", "vllm-0.8.3-0.9.0"),
     ("vllm", "0.9.1", "vllm-0.9.1-0.10.1.1"), ("vllm", "0.10.1.1", "vllm-0.9.1-0.10.1.1"),
     ("vllm", "0.10.2", "vllm-0.10.2-0.13"), ("vllm", "0.13.0", "vllm-0.10.2-0.13"), ("vllm", "0.14.0", "vllm-0.14+"),
     ("vllm", "0.33.0", "vllm-0.14+")],
)
def test_profile_for_release(engine: str, version: str, name: str) -> None:
    match = resolve_profile(engine, version)
    assert (match.profile.name, match.exact, match.note) == (name, True, "")
    assert profile_named(name) is match.profile


def test_a_health_answer_that_bypasses_generation_proves_nothing() -> None:
    """SGLANG_DIAG_BYPASS_HEALTH_GENERATE=1 makes /health and /health_generate answer 200 without generating
    (0.5.23 http_server.py:739-743): the readiness probe then asks for a completion instead."""
    profile = resolve_profile("sglang", "0.5.23").profile
    assert profile.readiness_check.proves_generation
    bypassed = profile.under_env({"SGLANG_DIAG_BYPASS_HEALTH_GENERATE": "true"})
    assert not any(check.proves_generation for check in bypassed.health)
    # near misses: the variable set false, or another variable
    assert profile.under_env({"SGLANG_DIAG_BYPASS_HEALTH_GENERATE": "0"}) is profile
    assert profile.under_env({"SGLANG_HEALTH_CHECK_TIMEOUT": "1"}) is profile


@pytest.mark.parametrize(("version", "env_wins"), [("0.6.6", True), ("0.7.3", True), ("0.8.5", False), ("0.33.0", False)])
def test_vllm_api_key_variable_wins_over_the_flag_up_to_0_8_2(version: str, env_wins: bool) -> None:
    """vLLM 0.6.6 and 0.7.3: `envs.VLLM_API_KEY or args.api_key` (api_server.py); 0.8.5 takes the flag first."""
    profile = resolve_profile("vllm", version).profile
    assert profile.api_key_env_wins is env_wins
    assert ("VLLM_API_KEY wins over --api-key" in profile.api_key_source) is env_wins


@pytest.mark.parametrize("version", [None, "", "weird-build", "unknown"])
def test_missing_or_unreadable_version_assumes_the_newest_and_says_so(version: str | None) -> None:
    match = resolve_profile("sglang", version)
    assert match.profile.name == "sglang-0.5.20+" and not match.exact
    assert "assuming the newest line, sglang-0.5.20+" in match.note


def test_releases_outside_every_line_are_flagged() -> None:
    old = resolve_profile("vllm", "0.5.5")
    assert old.profile.name == "vllm-0.6.x" and not old.exact and "predates" in old.note
    new = resolve_profile("sglang", "0.5.24")
    assert new.profile.name == "sglang-0.5.20+" and new.exact and "newer than the newest release read" in new.note


def test_unknown_engine_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: sglang, transformers, vllm"):
        profile_for("tgi", "2.0")
    with pytest.raises(KeyError, match="sglang-0.5.20"):
        profile_named("sglang-9")


def test_lines_tile_the_releases_without_gaps() -> None:
    for lines in PROFILES.values():
        for older, newer in zip(lines, lines[1:], strict=False):
            assert older.releases.high == newer.releases.low, (older.name, newer.name)
        assert lines[-1].releases.high is None


# --- environment writes -------------------------------------------------------------------------------------

USER = {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "Ring"}


@pytest.mark.parametrize(
    "engine, version, cumem",
    [("sglang", "0.4.10", "0"), ("sglang", "0.5.1", "0"), ("sglang", "0.5.4.post1", "0"),
     ("sglang", "0.5.4.post2", "1"), ("sglang", "0.5.9", "1"), ("sglang", "0.5.19", "1"), ("sglang", "0.5.23", "1"),
     ("vllm", "0.8.2", "0"), ("vllm", "0.8.5", "0"), ("vllm", "0.10.1.1", "1")],
)
def test_user_set_nccl_cumem_enable(engine: str, version: str, cumem: str) -> None:
    outcome = profile_for(engine, version).predict_env(USER, version=version)["NCCL_CUMEM_ENABLE"]
    assert outcome.result == cumem and outcome.overridden == (cumem != "1")
    assert all(w.source.startswith(f"{engine} ") for w in outcome.writes)


def test_vllm_0_10_2_on_writes_no_nccl_cumem_enable() -> None:
    for version in ("0.10.2", "0.12.0", "0.33.0"):
        names = {w.name for w in profile_for("vllm", version).env_writes_at(version)}
        assert "NCCL_CUMEM_ENABLE" not in names and "TORCHINDUCTOR_COMPILE_THREADS" in names


def test_sglang_writes_nccl_cumem_enable_when_unset_or_with_symm_mem() -> None:
    p = profile_for("sglang", "0.5.23")
    assert p.predict_env({}, version="0.5.23")["NCCL_CUMEM_ENABLE"].result == "0"
    assert p.predict_env(USER, ["--enable-symm-mem"], "0.5.23")["NCCL_CUMEM_ENABLE"].result == "1"
    assert p.predict_env({"NCCL_CUMEM_ENABLE": "0"}, ["--enable-symm-mem"], "0.5.23")["NCCL_CUMEM_ENABLE"].overridden


def test_sglang_nvls_kept_from_0_5_4_post3_only() -> None:
    assert profile_for("sglang", "0.5.4.post2").predict_env(USER, version="0.5.4.post2")["NCCL_NVLS_ENABLE"].result == "0"
    assert profile_for("sglang", "0.5.9").predict_env(USER, version="0.5.9")["NCCL_NVLS_ENABLE"].result == "1"
    assert profile_for("sglang", "0.4.10").predict_env(USER, ["--enable-nccl-nvls"], "0.4.10")["NCCL_NVLS_ENABLE"].result == "1"


@pytest.mark.parametrize(
    "version, present, absent",
    [("0.4.10", {"TORCH_NCCL_AVOID_RECORD_STREAMS", "TF_CPP_MIN_LOG_LEVEL", "CUDA_MODULE_LOADING"}, set()),
     ("0.5.5", {"TF_CPP_MIN_LOG_LEVEL", "CUDA_MODULE_LOADING"}, {"TORCH_NCCL_AVOID_RECORD_STREAMS"}),
     ("0.5.9", {"CUDA_MODULE_LOADING"}, {"TF_CPP_MIN_LOG_LEVEL", "TORCH_NCCL_AVOID_RECORD_STREAMS"}),
     ("0.5.19", set(), {"CUDA_MODULE_LOADING", "TF_CPP_MIN_LOG_LEVEL", "NCCL_GRAPH_REGISTER"}),
     ("0.5.23", {"NCCL_GRAPH_REGISTER"}, {"CUDA_MODULE_LOADING", "TF_CPP_MIN_LOG_LEVEL"})],
)
def test_sglang_writes_per_release(version: str, present: set[str], absent: set[str]) -> None:
    names = {w.name for w in profile_for("sglang", version).env_writes_at(version)}
    assert present <= names and not absent & names


def test_cuda_device_max_connections_is_4_then_8() -> None:
    def value(version: str) -> str:
        return profile_for("sglang", version).predict_env({}, version=version)["CUDA_DEVICE_MAX_CONNECTIONS"].result or ""

    assert [value(v) for v in ("0.4.10", "0.5.4", "0.5.4.post1", "0.5.23")] == ["4", "4", "8", "8"]


def test_sglang_writes_show_in_spawned_schedulers_only() -> None:
    for line in PROFILES["sglang"]:
        assert line.start_method == "spawn"
        assert all(w.process == "server" and "worker" in w.visible_in for w in line.env_writes)


def test_vllm_worker_start_method() -> None:
    assert profile_for("vllm", "0.6.6").start_method == "fork"
    assert profile_for("vllm", "0.8.2").start_method == "fork"
    assert profile_for("vllm", "0.8.3").start_method == "spawn"  # vllm serve's cli_env_setup
    cumem_06 = next(w for w in profile_for("vllm", "0.6.6").env_writes if w.name == "NCCL_CUMEM_ENABLE")
    assert cumem_06.process == "worker" and cumem_06.visible_in == ()


# --- endpoints ----------------------------------------------------------------------------------------------


def test_sglang_health_generate_sleeps_a_second_and_proves_generation() -> None:
    for version in ("0.4.10", "0.5.9", "0.5.23"):
        check = next(h for h in profile_for("sglang", version).health if h.path == "/health_generate")
        assert check.proves_generation and check.min_latency_s == 1.0 and check.unhealthy_status == 503
    health_04 = next(h for h in profile_for("sglang", "0.4.10").health if h.path == "/health")
    health_05 = next(h for h in profile_for("sglang", "0.5.1").health if h.path == "/health")
    assert not health_04.proves_generation and health_05.proves_generation


def test_api_key_guards() -> None:
    vllm = profile_for("vllm", "0.33.0")
    assert (vllm.api_key_flag, vllm.api_key_env) == ("--api-key", "VLLM_API_KEY")
    assert vllm.needs_api_key("/v1/models") and vllm.needs_api_key("/v1/completions")
    assert not vllm.needs_api_key("/health") and not vllm.needs_api_key("/metrics")
    assert profile_for("vllm", "0.25.0").needs_api_key("/inference/v1/generate")
    sglang = profile_for("sglang", "0.5.23")
    assert sglang.api_key_env is None and sglang.needs_api_key("/v1/models") and sglang.needs_api_key("/flush_cache")
    assert not sglang.needs_api_key("/health_generate") and not sglang.needs_api_key("/metrics")


def test_prefix_cache_and_profiler_switches() -> None:
    assert profile_for("sglang", "0.5.23").flush_cache is not None
    assert profile_for("sglang", "0.5.23").flush_cache.enabled_by is None  # type: ignore[union-attr]
    assert profile_for("vllm", "0.6.6").flush_cache is None
    reset = profile_for("vllm", "0.33.0").flush_cache
    assert reset is not None and (reset.path, reset.enabled_by) == ("/reset_prefix_cache", "VLLM_SERVER_DEV_MODE=1")
    assert profile_for("vllm", "0.12.0").start_profile.enabled_by.startswith("VLLM_TORCH_PROFILER_DIR")  # type: ignore[union-attr]
    assert profile_for("vllm", "0.33.0").start_profile.enabled_by.startswith("--profiler-config")  # type: ignore[union-attr]
    assert "num_steps" in profile_for("sglang", "0.5.23").start_profile.body_fields  # type: ignore[union-attr]


def test_metric_names() -> None:
    assert profile_for("sglang", "0.5.23").metrics.enabled_by == "--enable-metrics"
    assert profile_for("vllm", "0.8.5").metrics.kv_cache_usage == "vllm:gpu_cache_usage_perc"
    assert profile_for("vllm", "0.33.0").metrics.kv_cache_usage == "vllm:kv_cache_usage_perc"
    assert profile_for("vllm", "0.33.0").metrics.spec_drafts == "vllm:spec_decode_num_drafts_total"


def test_every_fact_names_its_release_and_line() -> None:
    for p in ALL_PROFILES:
        sources = [p.start_method_source, p.api_key_source, p.version_source, *(m.source for m in [p.metrics] if m),
                   *(w.source for w in p.env_writes), *(h.source for h in p.health),
                   *(e.source for e in (p.flush_cache, p.start_profile, p.stop_profile) if e is not None)]
        for source in sources:
            words = source.split()
            assert words[0] in (p.engine, "uvicorn,") or source.startswith("uvicorn"), (p.name, source)
            if words[0] == p.engine:
                parse_version(words[1].rstrip(":"))
                assert ":" in source or "no " in source, (p.name, source)


# --- flags --------------------------------------------------------------------------------------------------


def test_every_profile_has_its_flag_lists() -> None:
    for p in ALL_PROFILES:
        for release in p.flag_releases:
            assert release in p.releases, (p.name, release)
            flags = load_release_flags(p.engine, release)
            assert len(flags) > (20 if p.engine == "transformers" else 50) and f"{p.engine} {release}" in flags.source


def test_cuda_graph_max_bs_is_gone_from_0_5_20() -> None:
    for release in ("0.4.10", "0.5.9", "0.5.14", "0.5.19"):
        assert "--cuda-graph-max-bs" in profile_for("sglang", release).flags(release), release
    for release in ("0.5.20", "0.5.23"):
        flags = profile_for("sglang", release).flags(release)
        assert "--cuda-graph-max-bs" not in flags
        # what argparse does with it: two candidates, so "ambiguous option"
        assert flags.prefix_matches("--cuda-graph-max-bs") == ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill")


def test_tp_size_in_every_sglang_list_and_tp_only_by_prefix() -> None:
    for line in PROFILES["sglang"]:
        for release in line.flag_releases:
            flags = load_release_flags("sglang", release)
            assert "--tp-size" in flags and "--tensor-parallel-size" in flags, release
            assert "--tp" not in flags and flags.prefix_matches("--tp") == ("--tp-size",), release


def test_vllm_tensor_parallel_size_everywhere() -> None:
    for line in PROFILES["vllm"]:
        for release in line.flag_releases:
            flags = load_release_flags("vllm", release)
            assert {"--tensor-parallel-size", "-tp", "--api-key"} <= flags.names, release


def test_flags_for_a_version_picks_the_capture_below_it() -> None:
    line = profile_named("sglang-0.5.4.post2-0.5.19")
    assert line.flag_release_for("0.5.15") == "0.5.14" and line.flag_release_for(None) == "0.5.19"
    assert line.flags("0.5.15") is line.flags("0.5.14")  # loaded once


HELP_FILES = sorted(p for p in HELP.glob("*.txt") if p.name.startswith(("sglang-", "vllm-")))


@pytest.mark.parametrize("path", HELP_FILES, ids=lambda p: p.name)
def test_help_captures_parse_and_name_their_release(path: pathlib.Path) -> None:
    text = path.read_text(encoding="utf-8")
    engine = path.name.split("-")[0]
    assert text.startswith(f"# {engine} ") and "scripts/engine_contracts.py" in text.splitlines()[0]
    if engine == "vllm" and "--help=all" in text and not path.name.endswith("-all.txt"):
        with pytest.raises(ValueError, match="short help"):
            parse_help(text, engine=engine)
        return
    table = parse_help(text, engine=engine)
    assert table.style == "argparse" and len(table) > 50


def test_flag_lists_agree_with_the_help_captures() -> None:
    done = subprocess.run([sys.executable, "scripts/engine_contracts.py", "--check"], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# --- benchmark names ----------------------------------------------------------------------------------------


def test_itl_mapping_depends_on_backend_and_speculation() -> None:
    def key(tool: str, backend: str, spec: bool) -> list[str]:
        return [n.toolkit_key for n in peer_names(tool, backend, "median_itl_ms", speculative=spec)]  # type: ignore[arg-type]

    assert key("sglang.bench_serving", "sglang", True) == ["median_itl_per_token_ms"]
    assert key("sglang.bench_serving", "sglang", False) == ["median_itl_per_token_ms"]
    assert key("sglang.bench_serving", "sglang-oai", True) == ["median_itl_per_token_ms"]
    assert key("sglang.bench_serving", "sglang-oai", False) == ["median_itl_ms"]
    assert key("vllm bench serve", "vllm", True) == ["median_itl_ms"]
    accept = peer_names("vllm bench serve", "vllm", "spec_decode_acceptance_length")
    assert [n.toolkit_key for n in accept] == ["accept_length"]


def test_docs_list_every_belief_with_its_source() -> None:
    doc = (REPO / "docs" / "engine-releases.md").read_text(encoding="utf-8").replace("\\|", "|")
    for p in ALL_PROFILES:
        sources = [p.start_method_source, p.api_key_source, p.version_source, *(m.source for m in [p.metrics] if m),
                   *(w.source for w in p.env_writes), *(h.source for h in p.health),
                   *(e.source for e in (p.flush_cache, p.start_profile, p.stop_profile) if e is not None)]
        for source in sources:
            assert source in doc, (p.name, source)
    for name in bench_names.PEER_NAMES:
        assert name.source in doc


def test_writes_reach_the_processes_started_after_them() -> None:
    vllm = profile_for("vllm", "0.33.0")
    assert "OMP_NUM_THREADS" in vllm.predict_env({}, role="worker")  # engine core sets it for its workers
    assert "OMP_NUM_THREADS" not in vllm.predict_env({}, role="server")
    assert vllm.predict_env({}, role="worker")["VLLM_WORKER_MULTIPROC_METHOD"].result == "spawn"
    assert vllm.predict_env({"VLLM_WORKER_MULTIPROC_METHOD": "fork"}, role="worker")[
        "VLLM_WORKER_MULTIPROC_METHOD"].result == "fork"
    assert "NCCL_CUMEM_ENABLE" in profile_for("vllm", "0.6.6").predict_env({}, role="worker")
    assert "NCCL_CUMEM_ENABLE" not in profile_for("vllm", "0.6.6").predict_env({}, role="server")

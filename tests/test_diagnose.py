"""The diagnosis core on hand-made inputs where the answer is known: every kind of difference, the ranking, proposals."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime
from pathlib import Path

import pytest

from toolkit.engines import profile_for
from toolkit.logs import MetricRow
from toolkit.moves.diagnose import (
    Diagnosis,
    Difference,
    Gap,
    SideEvidence,
    follows,
    gather_differences,
    propose,
    rank,
)
from toolkit.moves.diagnose.difference import config_differences, same_record, topic_of_setting
from toolkit.moves.diagnose.environment import code_differences, env_differences
from toolkit.moves.diagnose.profile_gap import digest_profile, profile_differences, profiled_gap_ms
from toolkit.moves.diagnose.resolved import parse_config_line, resolved_settings, split_top_level
from toolkit.moves.diagnose.series import (
    log_metric_differences,
    server_metric_differences,
    telemetry_differences,
)
from toolkit.observe.trace import KernelCall
from toolkit.sim.release import release_from_argv
from toolkit.sim.release_logs import server_args_line

REAL = [line for line in (Path(__file__).parent / "data" / "diagnose" / "real_config_lines.txt")
        .read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
SGLANG_PLAIN, SGLANG_DFLASH, VLLM_NON_DEFAULT, VLLM_ENGINE = REAL
# the seed: baseline 82 tok/s, EAGLE-3 60 tok/s -> 4.47 ms more per output token
SEED_GAP = Gap.from_throughput("output_throughput", 82.0, 60.0, (-24.0, -20.0), beyond_noise=True)


# ---- the resolved configuration, from real start-up lines -------------------------------------------------------
@pytest.mark.parametrize(("line", "source", "expected"), [
    (SGLANG_PLAIN, "sglang server_args", {"model_path": "Qwen/Qwen3-14B", "disable_cuda_graph": "False",
                                          "speculative_algorithm": "None", "speculative_attention_mode": "prefill"}),
    (SGLANG_DFLASH, "sglang server_args", {"speculative_algorithm": "DFLASH", "disable_cuda_graph": "False"}),
    (VLLM_NON_DEFAULT, "vllm non-default args", {"model": "poolside/Laguna-S-2.1-INT4", "max_model_len": "65536"}),
    (VLLM_ENGINE, "vllm engine config", {"enforce_eager": "False", "dtype": "torch.bfloat16", "tokenizer_mode": "auto",
                                         "tensor_parallel_size": "1"}),
])
def test_the_resolved_configuration_is_read_from_the_engines_own_lines(line: str, source: str,
                                                                       expected: dict[str, str]) -> None:
    config = parse_config_line(line)
    assert config is not None and config.source == source
    assert {k: config.values[k] for k in expected} == expected


def test_nested_values_stay_whole_and_a_cut_line_keeps_its_complete_settings() -> None:
    engine = parse_config_line(VLLM_ENGINE)
    assert engine is not None
    assert engine.values["speculative_config"].startswith("SpeculativeConfig(method='dflash'")
    cut = SGLANG_PLAIN[: SGLANG_PLAIN.index("disable_cuda_graph=") + len("disable_cuda_graph=Fa")]
    config = parse_config_line(cut)
    assert config is not None and "disable_cuda_graph" not in config.values  # half a value is no value
    assert config.values["tokenizer_mode"] == "auto"
    assert split_top_level("a=1, b=(2, 3), c='x,y') tail") == (["a=1", "b=(2, 3)", "c='x,y'"], True)


def test_the_simulators_dict_form_of_server_args_reads_the_same() -> None:
    fields = {"model_path": "kimi", "tp_size": 8, "disable_cuda_graph": False, "speculative_attention_mode": "prefill"}
    for version in ("0.5.9", "0.5.23"):  # ServerArgs(...) repr up to 0.5.18, a dict from 0.5.19
        release = release_from_argv(["--sim-engine-version", version], "sglang")
        settings = resolved_settings([f"[2026-02-26 20:25:01] {server_args_line(release, fields)}"])
        assert {n: s.value for n, s in settings.items()} == {"model_path": "kimi", "tp_size": "8",
                                                             "disable_cuda_graph": "False",
                                                             "speculative_attention_mode": "prefill"}


@pytest.mark.parametrize("line", ["Parsed server_args from the command line", "non-default args: none",
                                  "INFO Initializing a V1 LLM engine", "Decode batch. #running-req: 1"])
def test_near_misses_are_not_configuration_lines(line: str) -> None:
    assert parse_config_line(line) is None


def test_config_differences_between_two_real_sglang_launches_name_speculation() -> None:
    plain, dflash = ({n: (s.value, s.line) for n, s in resolved_settings([line]).items()}
                     for line in (SGLANG_PLAIN, SGLANG_DFLASH))
    found = {d.name: d for d in config_differences(plain, dflash)}
    assert found["speculative_algorithm"].topic == "speculation"
    assert (found["speculative_algorithm"].fast, found["speculative_algorithm"].slow) == ("None", "DFLASH")
    assert "disable_cuda_graph" not in found  # the same on both
    assert "port" not in found and "random_seed" not in found  # incidental
    assert any("speculative_algorithm=" in e for e in found["speculative_algorithm"].evidence)


@pytest.mark.parametrize(("name", "topic"), [
    ("disable_cuda_graph", "cuda_graphs"), ("enforce_eager", "cuda_graphs"), ("cuda_graph_max_bs_decode", "cuda_graphs"),
    ("speculative_attention_mode", "cuda_graphs"), ("speculative_num_steps", "speculation"),
    ("attention_backend", "attention"), ("chunked_prefill_size", "batching"), ("kv_cache_dtype", "precision"),
    ("tp_size", "parallelism"), ("mem_fraction_static", "memory"), ("log_requests", "other"),
])
def test_settings_map_to_the_mechanism_they_bear_on(name: str, topic: str) -> None:
    assert topic_of_setting(name) == topic


# ---- environment and code ----------------------------------------------------------------------------------------
def test_an_environment_alike_on_every_rank_is_one_checked_sameness() -> None:
    rows = [(f"TP{r} [{100 + r}]", v, "Ring" if v == "NCCL_ALGO" else None) for r in range(8)
            for v in ("NCCL_ALGO", "NCCL_PROTO")]
    other = [(f"TP{r} [{200 + r}]", v, x) for (_, v, x), r in zip(rows, [r for r in range(8) for _ in (1, 2)],
                                                                    strict=True)]
    found = env_differences(rows, other)
    assert len(found) == 1 and found[0].same and found[0].topic == "environment"
    assert "identical on every rank" in found[0].fast


def test_a_variable_missing_on_one_rank_of_the_slow_side_is_a_difference() -> None:
    fast = [(f"TP{r}", "NCCL_ALGO", "Ring") for r in range(8)]
    slow = [(f"TP{r}", "NCCL_ALGO", None if r == 5 else "Ring") for r in range(8)]
    (found,) = env_differences(fast, slow)
    assert (found.name, found.same, found.fast) == ("NCCL_ALGO", False, "Ring on all 8 processes")
    assert found.slow == "(unset) on 1 / Ring on 7"


def test_code_same_commit_or_two_commits_with_their_files() -> None:
    (same,) = code_differences("abc123", "abc123")
    assert same.same and same.topic == "code"
    (changed,) = code_differences("aaa", "bbb", ["python/sglang/srt/speculative/eagle_worker.py"])
    assert not changed.same and "eagle_worker.py" in changed.evidence[0]


# ---- log metric series, telemetry, /metrics --------------------------------------------------------------------
def _decode(line_no: int, graph: bool, accept: float | None = None, running: int = 1) -> MetricRow:
    values: dict[str, float | int | bool] = {"running_req": running, "queue_req": 0, "cuda_graph": graph,
                                             "gen_throughput": 80.0}
    if accept is not None:
        values["accept_len"] = accept
    return MetricRow("sglang_decode", values, datetime(2026, 2, 26), "TP0", line_no)


def test_cuda_graph_false_in_the_slow_sides_decode_lines_is_a_cuda_graph_difference() -> None:
    fast = [_decode(n, True) for n in range(10, 15)]
    slow = [_decode(n, False, accept=1.9) for n in range(20, 25)]
    found = {d.name: d for d in log_metric_differences(fast, slow)}
    graph = found["cuda graph (decode lines)"]
    assert (graph.topic, graph.fast, graph.slow) == ("cuda_graphs", "True in all 5 lines", "False in all 5 lines")
    assert graph.evidence == ("fast: log line 12: cuda graph: True", "slow: log line 22: cuda graph: False")
    accept = found["accept length (decode lines)"]
    assert (accept.topic, accept.fast) == ("speculation", "(not printed)")
    assert found["running requests"].same  # the same load on both sides: checked, alike


def test_identical_series_give_no_difference() -> None:
    rows = [_decode(n, True) for n in range(5)]
    assert all(d.same for d in log_metric_differences(rows, rows))


def test_telemetry_and_server_metrics_differ_only_beyond_their_thresholds() -> None:
    def gpu(util: float, power: float) -> MetricRow:
        return MetricRow("gpu", {"gpu_util_pct": util, "power_w": power}, None, "GPU0", 0)

    found = {d.name: d for d in telemetry_differences([gpu(95, 600)] * 3, [gpu(60, 590)] * 3)}
    assert not found["GPU utilisation (%)"].same and found["GPU power (W)"].same
    assert found["GPU utilisation (%)"].evidence[1] == "slow: GPU utilisation (%): mean 60 over 3 samples (GPU0)"

    def prom(rate: float) -> MetricRow:
        return MetricRow("prometheus", {"spec_accept_rate": rate, "num_running": 1.0,
                                        "generation_tokens_total": 100 * rate}, None, None, 0)

    (diff,) = server_metric_differences([prom(0.9)] * 2, [prom(0.4)] * 2)
    assert (diff.name, diff.topic, diff.kind) == ("spec_accept_rate", "speculation", "server_metrics")


# ---- profiles ---------------------------------------------------------------------------------------------------
def _steps(phase: str, in_graph: bool, steps: int, kernels: int, dur_us: float, gap_us: float,
           start_us: float = 0.0) -> list[KernelCall]:
    calls, t = [], start_us
    for _ in range(steps):
        for _ in range(kernels):
            calls.append(KernelCall("void gemm<1>()", t, dur_us, in_graph, phase, 7, 0))
            t += dur_us + gap_us
        t += 50_000.0  # between steps: over the gap cap, not launch overhead
    return calls


def test_eager_verify_with_idle_gaps_accounts_for_its_extra_time_per_token() -> None:
    # fast: 10 decode steps of 1 token, 100 kernels x 100 us in a graph, 1 us apart: 10 + 99 x 0.001 ms per token
    fast = digest_profile("fast", _steps("decode", True, 10, 100, 100.0, 1.0), output_tokens=10)
    # slow: 5 verify steps accepting 2 tokens, 100 eager kernels x 150 us with 80 us launch gaps between them:
    # (15 + 99 x 0.08) / 2 = 11.46 ms per token; and a draft of 20 graph kernels x 50 us per step: 0.5 ms per token
    slow_calls = _steps("verify", False, 5, 100, 150.0, 80.0) + _steps("draft", True, 5, 20, 50.0, 0.0, 1e7)
    slow = digest_profile("slow", slow_calls, output_tokens=10)
    found = {d.topic: d for d in profile_differences(fast, slow)}
    assert found["cuda_graphs"].explains_ms == pytest.approx((15 + 99 * 0.08) / 2 - (10 + 99 * 0.001))
    assert found["speculation"].explains_ms == pytest.approx(0.5, abs=0.01)
    assert "100% of its GPU time outside CUDA graphs [verify]" in found["cuda_graphs"].slow


def test_shares_are_of_the_gap_the_profiles_themselves_saw() -> None:
    fast = digest_profile("fast", _steps("decode", True, 10, 100, 100.0, 1.0), output_tokens=10)
    slow = digest_profile("slow", _steps("verify", False, 5, 100, 150.0, 80.0), output_tokens=10)
    profiled = profiled_gap_ms(fast, slow)
    assert profiled == pytest.approx((15 + 99 * 0.08) / 2 - (10 + 99 * 0.001))
    # the benchmark saw 4.47 ms per token, the profiles (with the profiler's overhead) 1.36: the share is of the latter
    gap = dataclasses.replace(SEED_GAP, profiled_ms=profiled)
    top, = rank(profile_differences(fast, slow), gap)
    assert top.share == pytest.approx(1.0) and "(+1.36 in the profiles)" in gap.text


def test_the_same_profile_on_both_sides_is_a_checked_sameness() -> None:
    calls = _steps("decode", True, 4, 10, 100.0, 1.0)
    found = profile_differences(digest_profile("a", calls, output_tokens=4), digest_profile("b", calls, output_tokens=4))
    assert [d.same for d in found] == [True]


# ---- the ranking -------------------------------------------------------------------------------------------------
EXPLAINS = Difference("profile", "cuda_graphs", "forward", "10 ms", "14 ms", ("slow: verify eager",), explains_ms=4.0)
NOTHING = Difference("profile", "other", "sampling", "1 ms", "1.02 ms", explains_ms=0.02)
ALIKE_ENV = same_record("env", "environment", "environment (5 variables)", "identical on every rank")
ALIKE_CODE = same_record("code", "code", "code", "abc: the same code on both sides")
LOG_GRAPH = Difference("log_metric", "cuda_graphs", "cuda graph (decode lines)", "True", "False")
FLAG_ONLY = Difference("config", "speculation", "speculative_num_steps", "None", "2")


@pytest.mark.parametrize(("differences", "order"), [
    ([NOTHING, EXPLAINS], ["cuda_graphs", "other"]),
    ([ALIKE_ENV, ALIKE_CODE, EXPLAINS], ["cuda_graphs", "environment", "code"]),
    ([FLAG_ONLY, EXPLAINS], ["cuda_graphs", "speculation"]),
    ([NOTHING, FLAG_ONLY], ["speculation", "other"]),  # unmeasured but differing: above a measured ~0
    ([ALIKE_ENV, NOTHING], ["other", "environment"]),
])
def test_a_difference_that_explains_nothing_ranks_below_one_that_explains_the_gap(
        differences: list[Difference], order: list[str]) -> None:
    assert [r.topic for r in rank(differences, SEED_GAP)] == order


def test_evidence_from_several_kinds_on_one_mechanism_raises_confidence() -> None:
    alone, = rank([EXPLAINS], SEED_GAP)
    joined, = rank([EXPLAINS, LOG_GRAPH], SEED_GAP)
    assert (alone.confidence, joined.confidence) == ("medium", "high")
    assert joined.kinds == ("profile", "log_metric") and joined.share == pytest.approx(4.0 / 4.472, abs=0.01)
    assert joined.title == "the forward pass runs outside CUDA graphs on the slow side (launch-bound)"
    ruled_out = rank([ALIKE_ENV], SEED_GAP)[0]
    assert (ruled_out.ruled_out, ruled_out.share, ruled_out.confidence) == (True, 0.0, "high")
    assert ruled_out.verdict.startswith("does not explain the gap")


def test_the_gap_per_output_token() -> None:
    assert SEED_GAP.per_token_ms == pytest.approx(1000 / 60 - 1000 / 82)
    assert Gap.from_throughput("mean_ttft_ms", 10.0, 12.0, (1.0, 3.0), beyond_noise=True).per_token_ms is None
    assert math.isnan(Gap.from_throughput("output_throughput", 1, 1, (math.nan, math.nan), beyond_noise=False).ci[0])


# ---- proposals, in the detected release's flags ------------------------------------------------------------------
SPECULATING = {"speculative_algorithm": "EAGLE3", "speculative_attention_mode": "prefill"}


@pytest.mark.parametrize(("engine", "version", "config", "flag"), [
    ("sglang", "0.5.23", SPECULATING, "--speculative-attention-mode"),
    ("sglang", "0.5.9", SPECULATING, "--speculative-attention-mode"),
    ("sglang", "0.4.10", SPECULATING, None),  # the release has no such flag: never proposed
    ("sglang", "0.5.23", {"speculative_algorithm": "None", "disable_cuda_graph": "True"}, "--disable-cuda-graph"),
    ("vllm", "0.33.0", {"enforce_eager": "True"}, "--enforce-eager"),
    ("vllm", "0.25.0", {"enforce_eager": "True"}, "--enforce-eager"),
    ("sglang", None, SPECULATING, None),  # the release is unknown: no flag
])
def test_cuda_graph_proposals_use_only_the_releases_flags(engine: str, version: str | None, config: dict[str, str],
                                                          flag: str | None) -> None:
    reason, = rank([EXPLAINS, LOG_GRAPH], SEED_GAP)
    flags = profile_for(engine, version).flags(version) if version else None
    proposal = propose(reason, engine=engine, flags=flags, slow_config=config)
    assert (proposal.flag if proposal else None) == flag
    if flag is not None:
        assert proposal is not None and flag in proposal.call and "diagnosis.hypothesis(1)" in proposal.call
        assert flags is not None and flag in flags


def test_seed_proposal_is_decode_attention() -> None:
    reason, = rank([EXPLAINS, LOG_GRAPH], SEED_GAP)
    proposal = propose(reason, engine="sglang", flags=profile_for("sglang", "0.5.23").flags("0.5.23"),
                       slow_config=SPECULATING)
    assert proposal is not None and proposal.values == ("prefill", "decode")
    assert proposal.text.endswith("--speculative-attention-mode decode")


def test_env_and_code_reasons_propose_the_fast_sides_value_or_a_bisection() -> None:
    env = Difference("env", "environment", "NCCL_ALGO", "Ring on all 8 processes", "(unset) on 8")
    reason, = rank([env], SEED_GAP)
    proposal = propose(reason, engine="sglang", flags=None, slow_config={})
    assert proposal is not None and proposal.flag == "env:NCCL_ALGO" and proposal.values == (None, "Ring")
    code, = rank([Difference("code", "code", "commit", "aaa", "bbb")], SEED_GAP)
    bisect = propose(code, engine="sglang", flags=None, slow_config={}, commits=("aaa111", "bbb222"), repo="/src")
    assert bisect is not None and bisect.call.startswith("tk.perf_bisect(host, '/src', good='aaa111', bad='bbb222'")
    assert "spec=slow" in bisect.call  # perf_bisect's spec is required: a pasted call without it is a TypeError
    assert propose(rank([ALIKE_ENV], SEED_GAP)[0], engine="sglang", flags=None, slow_config={}) is None


# ---- the whole core on one hand-made case: the seed, with its answer known -------------------------------------
def test_the_seed_by_hand_ranks_cuda_graphs_first_and_rules_out_env_and_code(tmp_path: Path) -> None:
    config = ("[2026-02-26 20:25:01] server_args=ServerArgs(model_path='kimi', tp_size=8, disable_cuda_graph=False, "
              "speculative_algorithm={alg}, speculative_attention_mode='prefill', port={port})")
    env = [(f"TP{r}", "NCCL_ALGO", "Ring") for r in range(8)]
    fast = SideEvidence(config_lines=[config.format(alg="None", port=30000)], env_rows=env, commit="abc",
                        log_rows=[_decode(n, True) for n in range(10, 20)])
    slow = SideEvidence(config_lines=[config.format(alg="'EAGLE3'", port=30001)], env_rows=env, commit="abc",
                        log_rows=[_decode(n, False, accept=1.9) for n in range(10, 20)])
    profiles = [digest_profile("fast", _steps("decode", True, 10, 100, 100.0, 1.0), output_tokens=10),
                digest_profile("slow", _steps("verify", False, 5, 100, 150.0, 80.0)
                               + _steps("draft", True, 5, 20, 50.0, 0.0, 1e7), output_tokens=10)]
    gap = Gap.from_throughput("output_throughput", 99.0, 83.3, (-17.0, -14.0), beyond_noise=True)
    reasons = rank(gather_differences(fast, slow, profiles=profiles), gap)
    top = reasons[0]
    assert top.topic == "cuda_graphs" and set(top.kinds) == {"log_metric", "profile"}
    assert top.title.startswith("the speculative verify step runs outside CUDA graphs")
    ruled_out = {r.topic for r in reasons if r.ruled_out}
    assert {"environment", "code"} <= ruled_out
    assert [r.topic for r in reasons][-len(ruled_out):] == [r.topic for r in reasons if r.ruled_out]
    flags = profile_for("sglang", "0.5.23").flags("0.5.23")
    proposals = tuple(p for r in reasons if (p := propose(r, engine="sglang", flags=flags,
                                                          slow_config={"speculative_algorithm": "EAGLE3"})))
    diagnosis = Diagnosis("fast: sim", "slow: sim EAGLE3", gap, reasons, proposals, "0.5.23", 7)
    assert diagnosis.proposal(1) is not None and diagnosis.proposal(1).flag == "--speculative-attention-mode"
    assert follows(diagnosis.hypothesis(1)) == (7, 1)
    assert diagnosis.table().loc[0, "evidence_kinds"] == "profile, log_metric"
    assert "does not explain the gap" in diagnosis.text()
    assert diagnosis.write(tmp_path).name == "diagnosis.json"


def test_no_gap_says_so_and_nothing_else() -> None:
    gap = Gap.from_throughput("output_throughput", 82.0, 81.9, (-0.6, 0.4), beyond_noise=False)
    diagnosis = Diagnosis("fast: sim", "slow: sim", gap, (), (), "0.5.23")
    assert diagnosis.summary_text.startswith("no difference beyond noise between fast: sim and slow: sim")
    assert diagnosis.top is None and diagnosis.text() == diagnosis.summary_text
    with pytest.raises(ValueError, match="reasons 1 to 0"):
        diagnosis.hypothesis(1)


def test_the_plot_draws_the_shares_and_says_when_there_is_nothing_to_rank() -> None:
    from toolkit.views import plots

    reasons = rank([EXPLAINS, LOG_GRAPH, ALIKE_ENV], SEED_GAP)
    profiles = {"fast": digest_profile("fast", _steps("decode", True, 2, 5, 100.0, 1.0), output_tokens=2),
                "slow": digest_profile("slow", _steps("verify", False, 1, 5, 150.0, 80.0), output_tokens=2)}
    fig = plots.diagnosis(Diagnosis("fast: a", "slow: b", SEED_GAP, reasons, (), "0.5.23", 1, profiles))
    left, right = fig.axes
    assert [t.get_text() for t in left.get_yticklabels()][0].startswith("1. the forward pass runs outside CUDA")
    assert {t.get_text() for t in left.texts} == {"89%", "ruled out"}
    assert [t.get_text() for t in right.get_yticklabels()] == ["fast", "slow"]
    none = plots.diagnosis(Diagnosis("fast: a", "slow: a", dataclasses.replace(SEED_GAP, beyond_noise=False), (), (),
                                     None).to_dict())
    assert "no difference beyond noise" in " ".join(t.get_text() for t in none.axes[0].texts)


def test_two_commits_where_only_the_code_differs_blame_the_code_and_propose_a_bisection() -> None:
    config = ["server_args=ServerArgs(model_path='kimi', tp_size=8, disable_cuda_graph=False)"]
    fast = SideEvidence(config_lines=config, commit="aaa111")
    slow = SideEvidence(config_lines=config, commit="bbb222")
    profiles = [digest_profile("fast", _steps("decode", True, 10, 100, 100.0, 1.0), output_tokens=10),
                digest_profile("slow", _steps("decode", True, 10, 100, 120.0, 1.0), output_tokens=10)]  # 20% slower
    gap = dataclasses.replace(SEED_GAP, profiled_ms=profiled_gap_ms(*profiles))
    reasons = rank(gather_differences(fast, slow, profiles=profiles, changed_files=["python/sglang/x.py"]), gap)
    top = reasons[0]
    assert top.topic == "code" and set(top.kinds) == {"profile", "code"} and top.share == pytest.approx(1.0)
    assert any("python/sglang/x.py" in line for line in top.evidence)
    proposal = propose(top, engine="sglang", flags=None, slow_config={}, commits=("aaa111", "bbb222"), repo="/src")
    assert proposal is not None and proposal.call.startswith("tk.perf_bisect(host, '/src', good='aaa111'")
    # with a setting that differs too, a slower path is not blamed on the code by itself
    changed = SideEvidence(config_lines=["server_args=ServerArgs(model_path='kimi', tp_size=4)"], commit="bbb222")
    assert rank(gather_differences(fast, changed, profiles=profiles), gap)[0].topic == "other"
